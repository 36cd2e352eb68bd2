"""The table of `quotree simulate -o table` (and `kubectl quotree tree`): columns apart,
quantities in the units they were written in, scaled guarantees, what unmanaged pods
hold, each warning once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotree.cli import main
from quotree.report import COLUMNS, render_tree, tree_width
from quotree.simulate import render_table, simulate, table_report, to_json

NODE = """
apiVersion: v1
kind: Node
metadata: {{name: n1}}
status: {{allocatable: {{{allocatable}}}}}
"""


def quota_yaml(name: str, spec: str, namespace: str | None = None) -> str:
    return f"""---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {{name: {name}, namespace: {namespace or name}}}
spec: {{{spec}}}
"""


def pod_yaml(key: str, requests: str, spec: str = "") -> str:
    namespace, name = key.split("/")
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec: {{{spec}containers: [{{name: c, resources: {{requests: {{{requests}}}}}}}]}}
"""


def table(tmp_path: Path, text: str) -> str:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    return render_table(simulate([path]))


def cells(text: str, member: str, resource: str) -> dict[str, str]:
    """The table's cells for `member`'s `resource`, by column title."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if f" {member} (" in line)
    for line in lines[start:]:
        words = line.split()
        if resource in words:
            values = words[words.index(resource) + 1 :]
            return dict(zip([title for title, _ in COLUMNS], values, strict=True))
    raise AssertionError(f"no {resource} row under {member}:\n{text}")


def test_long_names_and_numbers_never_run_together(tmp_path: Path) -> None:
    big = "10000000000"  # wider than the MIN column, as the other numbers below are
    text = (
        NODE.format(allocatable=f'memory: "{big}0000", example.com/a-rather-long-resource: 5')
        + quota_yaml(
            "a-quota-whose-name-is-much-longer-than-the-tree-column",
            f'min: {{memory: "{big}"}}, max: {{example.com/a-rather-long-resource: 3}}',
            namespace="a",
        )
        + pod_yaml("a/p", 'memory: "1000000000"')
    )
    out = table(tmp_path, text)
    assert cells(out, "a-quota-whose-name-is-much-longer-than-the-tree-column", "memory") == {
        "MIN": big,
        "MAX": "-",
        "REQUEST": "1000000000",
        "RUNTIME": "1000000000",
        "USED": "1000000000",
    }
    name = "a-quota-whose-name-is-much-longer-than-the-tree-column"
    long_resource = cells(out, name, "example.com/a-rather-long-resource")
    assert long_resource["MAX"] == "3"
    row = next(line for line in out.splitlines() if "a-quota-whose" in line)
    assert "(eq)  example.com/a-rather-long-resource " in row or "(eq)  memory " in row


def test_numbers_are_right_aligned_under_their_titles() -> None:
    report = to_json(simulate(["examples/koordinator-runtime.yaml"]))
    report["nodes"]["a"]["used"]["example.com/unit"] = "123456789012345678"
    lines = render_tree(report).splitlines()
    header, row = lines[1], lines[2]
    assert row.endswith(" 123456789012345678")
    assert len(row) == len(header)  # USED is as wide as its widest cell, right-aligned
    assert tree_width(report) == len(header)


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("1G", "1G"),
        ("1Gi", "1Gi"),
        ("1500M", "1500M"),
        ("1000000000", "1000000000"),
    ],
)
def test_quantities_print_in_the_units_they_were_written_in(
    tmp_path: Path, written: str, shown: str
) -> None:
    text = NODE.format(allocatable='memory: "64Gi", cpu: "8"') + quota_yaml(
        "a", f'min: {{memory: "{written}", cpu: "500m"}}'
    )
    out = table(tmp_path, text)
    assert cells(out, "a", "memory")["MIN"] == shown
    assert cells(out, "a", "cpu")["MIN"] == "500m"


def test_the_json_report_keeps_the_operators_quantities(tmp_path: Path) -> None:
    """Only the table follows the input's units: the JSON says what the status says."""
    path = tmp_path / "input.yaml"
    path.write_text(
        NODE.format(allocatable='memory: "4G"') + quota_yaml("a", 'min: {memory: "1G"}')
    )
    assert to_json(simulate([path]))["nodes"]["a"]["min"] == {"memory": "1000000000"}


def scaled_cluster() -> str:
    """Capacity 10 cpu, of which an unmanaged pod holds 3: the mins (4 + 4) are scaled
    to 3500m each; a's third pod does not fit."""
    return (
        NODE.format(allocatable='cpu: "10"')
        + quota_yaml("a", 'min: {cpu: "4"}, max: {cpu: "4"}')
        + quota_yaml("b", 'min: {cpu: "4"}')
        + pod_yaml("kube-system/dns", 'cpu: "3"', spec="nodeName: n1, ")
        + pod_yaml("a/p1", 'cpu: "2"')
        + pod_yaml("a/p2", 'cpu: "1500m"')
        + pod_yaml("a/p3", 'cpu: "1"')
        + pod_yaml("b/q1", 'cpu: "1"')
    )


def test_a_scaled_guarantee_is_shown_as_such(tmp_path: Path) -> None:
    out = table(tmp_path, scaled_cluster())
    assert "   4, scaled 3500m " in next(line for line in out.splitlines() if "a (eq)" in line)
    assert "   4, scaled 3500m " in next(line for line in out.splitlines() if "b (eq)" in line)
    report = to_json(simulate([tmp_path / "input.yaml"]))
    assert report["pods"]["a/p3"]["reason"] == (
        "does not fit in ElasticQuota a: cpu: used 3500m + request 1 > runtime 4 "
        "(min 4, scaled 3500m, cap 4)"
    )


def test_a_guarantee_that_is_not_scaled_shows_the_min_alone(tmp_path: Path) -> None:
    text = NODE.format(allocatable='cpu: "10"') + quota_yaml("a", 'min: {cpu: "4"}')
    assert table_report(simulate([_write(tmp_path, text)]))["nodes"]["a"]["scaledMin"] == {}
    assert cells(table(tmp_path, text), "a", "cpu")["MIN"] == "4"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    return path


def test_the_header_says_what_unmanaged_pods_hold(tmp_path: Path) -> None:
    out = table(tmp_path, scaled_cluster())
    assert out.splitlines()[0] == (
        "cluster (capacity: cpu 7; unmanaged pods hold cpu 3 of 10 allocatable)"
    )


def test_the_header_without_unmanaged_pods_is_the_capacity(tmp_path: Path) -> None:
    text = NODE.format(allocatable='cpu: "10", memory: 4G') + quota_yaml("a", 'min: {cpu: "4"}')
    assert table(tmp_path, text).splitlines()[0] == "cluster (capacity: cpu 10, memory 4G)"


def test_the_header_keeps_the_units_of_what_it_subtracts(tmp_path: Path) -> None:
    text = (
        NODE.format(allocatable='cpu: "4", memory: 4G')
        + quota_yaml("a", 'min: {memory: "1G"}')
        + pod_yaml("kube-system/dns", 'cpu: "250m", memory: 100M', spec="nodeName: n1, ")
    )
    assert table(tmp_path, text).splitlines()[0] == (
        "cluster (capacity: cpu 3750m, memory 3900M; unmanaged pods hold cpu 250m of 4, "
        "memory 100M of 4G allocatable)"
    )


def test_a_missing_parent_is_warned_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = NODE.format(allocatable='cpu: "10"') + quota_yaml(
        "a", 'parent: nowhere, min: {cpu: "1"}'
    )
    path = _write(tmp_path, text)
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("parent Cohort nowhere does not exist") == 1, out
    assert main(["simulate", str(path), "-o", "json"]) == 0
    err = capsys.readouterr().err
    assert err.count("parent Cohort nowhere does not exist") == 1, err


def test_a_parent_defined_later_in_the_input_is_no_warning(tmp_path: Path) -> None:
    cohort = """---
apiVersion: quotree.io/v1alpha1
kind: Cohort
metadata: {name: later}
spec: {min: {cpu: "2"}}
"""
    text = NODE.format(allocatable='cpu: "10"') + quota_yaml("a", "parent: later") + cohort
    assert simulate([_write(tmp_path, text)]).warnings == []


def test_the_renderer_prints_a_repeated_warning_once() -> None:
    report: dict[str, Any] = {"capacity": {}, "nodes": {}, "pods": {}}
    text = render_tree(report, ["w1", "w2", "w1"])
    assert text.splitlines()[-2:] == ["warning: w1", "warning: w2"]


def test_pod_keys_longer_than_their_column_keep_the_states_aligned() -> None:
    report: dict[str, Any] = {
        "capacity": {},
        "nodes": {},
        "pods": {
            "ns/short": {"state": "pending", "reason": "r1"},
            "a-namespace/a-pod-name-well-beyond-thirty-characters": {
                "state": "pending",
                "reason": "r2",
            },
        },
    }
    lines = [line for line in render_tree(report).splitlines() if line.endswith(("r1", "r2"))]
    assert len(lines) == 2
    assert len({line.index("pending") for line in lines}) == 1
    assert all(" pending" in line for line in lines)


def test_the_readmes_sample_table_is_the_real_output() -> None:
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    command = ".venv/bin/quotree simulate examples/koordinator-runtime.yaml"
    shown = readme[readme.index(command) :].split("```\n")[2]  # the block after the command's
    real = render_table(simulate([root / "examples" / "koordinator-runtime.yaml"]))
    assert shown == real + "\n"
