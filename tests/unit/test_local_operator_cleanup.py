"""What scripts that start a local operator delete after it: its webhook configurations.

An operator started by tests/e2e/operator_proc.py serves its webhooks at a URL, so its
configurations carry the local name (quotree_webhooks.configurations). Left behind, they
point at a stopped server and hold up every pod of a managed namespace; the benchmarks
that start such operators delete them through one helper, which must name what the
operator really writes.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from quotree.resolution import never_gated
from quotree_webhooks import configurations
from tests.e2e import operator_proc

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_helper_deletes_both_configurations_a_local_operator_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = configurations.build_configurations(
        {"url": "https://127.0.0.1:9443", "caBundle": "Q0E="},
        never_gated=never_gated("quotree-system"),
    )
    expected = {(c["kind"].lower(), c["metadata"]["name"]) for c in written}
    deleted: set[tuple[str, str]] = set()

    def kubectl(*args: str, **_: Any) -> None:
        assert args[0] == "delete", args
        assert "--ignore-not-found" in args, args
        deleted.add((args[1], args[2]))

    monkeypatch.setattr(operator_proc.cluster, "kubectl", kubectl)
    operator_proc.delete_webhook_configurations()
    assert deleted == expected


def _operator_benchmarks() -> list[Path]:
    """The benchmarks that start an operator with its webhooks on (the default)."""
    return sorted(
        p
        for p in BENCH.glob("bench_*.py")
        if "start_operator(" in p.read_text() and '"QUOTREE_WEBHOOKS": "0"' not in p.read_text()
    )


def test_benchmarks_that_start_an_operator_clean_up_through_the_helper() -> None:
    benches = _operator_benchmarks()
    assert {p.name for p in benches} >= {
        "bench_webhooks.py",
        "bench_kueue_shape.py",
        "bench_scale.py",
    }
    names = {configurations.CONFIGURATION_NAME, configurations.LOCAL_CONFIGURATION_NAME}
    for path in benches:
        tree = ast.parse(path.read_text())
        calls = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert "delete_webhook_configurations" in calls, f"{path.name} never cleans up"
        literal = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names
        ]
        assert not literal, f"{path.name} names a webhook configuration itself, lines {literal}"
