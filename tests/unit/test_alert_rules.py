"""The alert rules of manifests/prometheus/ pass `promtool check rules` and their unit tests.

promtool comes with Debian's `prometheus` package, which `make test` installs when it is
missing (hack/tools.sh). Without it these tests fail and say so: they are not skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RULES_DIR = Path(__file__).resolve().parents[2] / "manifests" / "prometheus"
ALERTS = {
    "QuotreeOperatorDown",
    "QuotreeNoLeader",
    "QuotreePendingUnderMin",
    "QuotreeReclaimOverdue",
    "QuotreeWebhookErrors",
}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: run hack/tools.sh (make test does)")
    return subprocess.run(
        [promtool, *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=120, check=False
    )


def test_rules_are_valid() -> None:
    result = _promtool("check", "rules", "rules.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_rule_unit_tests_pass() -> None:
    result = _promtool("test", "rules", "rules_test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_unit_test_and_docs() -> None:
    tests = (RULES_DIR / "rules_test.yaml").read_text()
    rules = (RULES_DIR / "rules.yaml").read_text()
    docs = (RULES_DIR.parents[1] / "docs" / "observability.md").read_text()
    for alert in ALERTS:
        assert f"alert: {alert}" in rules
        assert f"alertname: {alert}" in tests, f"{alert} has no promtool unit test"
        assert alert in docs, f"{alert} is not in docs/observability.md"


def test_a_broken_expectation_fails(tmp_path: Path) -> None:
    """promtool really checks the expectations: a wrong one makes the run fail."""
    original = (RULES_DIR / "rules_test.yaml").read_text()
    broken = original.replace("summary: No quotree", "summary: X")
    assert broken != original
    (tmp_path / "rules.yaml").write_text((RULES_DIR / "rules.yaml").read_text())
    (tmp_path / "t.yaml").write_text(broken)
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is not installed: run hack/tools.sh"
    result = subprocess.run(
        [promtool, "test", "rules", "t.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "QuotreeOperatorDown" in result.stdout + result.stderr


def test_the_prometheusrule_carries_the_same_rules() -> None:
    import yaml  # noqa: PLC0415

    manifests = RULES_DIR.parent
    rules = yaml.safe_load((RULES_DIR / "rules.yaml").read_text())
    wrapped = yaml.safe_load((manifests / "monitoring" / "prometheusrule.yaml").read_text())
    assert wrapped["kind"] == "PrometheusRule"
    assert wrapped["spec"] == rules


def test_the_servicemonitor_scrapes_the_metrics_service() -> None:
    import yaml  # noqa: PLC0415

    manifests = RULES_DIR.parent
    service = yaml.safe_load((manifests / "metrics-service.yaml").read_text())
    monitor = yaml.safe_load((manifests / "monitoring" / "servicemonitor.yaml").read_text())
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    component = yaml.safe_load((manifests / "monitoring" / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert set(component["resources"]) == {"servicemonitor.yaml", "prometheusrule.yaml"}
