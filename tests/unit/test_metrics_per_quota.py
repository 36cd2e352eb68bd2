"""The metrics a dashboard slices by quota and Cohort: the admission wait histogram, the
counters and `quotree_pending_units`, their labels, and the label sets docs/observability.md
states for them (no cluster)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from builders import cohort, engine, pod, quota
from prometheus_client.parser import text_string_to_metric_families

from quotree.engine import Engine
from quotree_operator.metrics import Metrics
from quotree_operator.tree_gauges import pending_units
from tests.unit.test_pod_groups import gang, job_pod

ROOT = Path(__file__).resolve().parents[2]
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(metrics: Metrics) -> Scrape:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
    }


def _labels(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _tree() -> Engine:
    """research > (vision > team-a, team-b), ops > team-c; one unit of `x` each, 4 in all."""
    return engine(
        cohort("research", min=3),
        cohort("vision", "research", min=2),
        quota("team-a", "vision", min=1, max=1),
        quota("team-b", "vision", min=1, max=1),
        cohort("ops", min=1),
        quota("team-c", "ops", min=1, max=1),
        capacity=4,
        instant_evictions=False,
    )


def test_admission_wait_is_a_histogram_per_quota_with_its_namespace_and_parent() -> None:
    metrics = Metrics()
    metrics.watch(_tree())
    metrics.admitted("team-a", created=100.0, now=101.0)
    metrics.admitted("team-a", created=100.0, now=140.0)
    metrics.admitted("team-c", created=100.0, now=100.2)
    scraped = _scrape(metrics)
    a = {"quota": "team-a", "namespace": "team-a", "parent": "vision"}
    c = {"quota": "team-c", "namespace": "team-c", "parent": "ops"}
    assert scraped[("quotree_admission_wait_seconds_count", _labels(**a))] == 2
    assert scraped[("quotree_admission_wait_seconds_sum", _labels(**a))] == 41.0
    assert scraped[("quotree_admission_wait_seconds_bucket", _labels(**a, le="1.0"))] == 1
    assert scraped[("quotree_admission_wait_seconds_bucket", _labels(**a, le="60.0"))] == 2
    assert scraped[("quotree_admission_wait_seconds_bucket", _labels(**c, le="0.25"))] == 1
    # The name docs/reference/README.md's "Metrics" lists is kept: its count over all labels is
    # every admission timed.
    counts = [v for (name, _), v in scraped.items() if name.endswith("wait_seconds_count")]
    assert sum(counts) == 3
    admitted_c = _labels(node="team-c", namespace="team-c", parent="ops")
    assert scraped[("quotree_admissions_total", admitted_c)] == 1


def test_evictions_per_quota_and_reason_carry_namespace_and_parent() -> None:
    metrics = Metrics()
    metrics.watch(_tree())
    metrics.evicted("team-b", "Preempted")
    metrics.evicted("team-b", "Reclaimed")
    metrics.evicted("team-b", "Reclaimed")
    scraped = _scrape(metrics)
    b = {"node": "team-b", "namespace": "team-b", "parent": "vision"}
    assert scraped[("quotree_evictions_total", _labels(**b, reason="preempted"))] == 1
    assert scraped[("quotree_evictions_total", _labels(**b, reason="reclaimed"))] == 2


def test_a_deleted_or_moved_quota_leaves_its_per_quota_series() -> None:
    eng = _tree()
    metrics = Metrics()
    metrics.watch(eng)
    for name in ("team-a", "team-b"):
        metrics.admitted(name, created=1.0, now=2.0)
        metrics.evicted(name, "Reclaimed")
    eng.remove_config("team-a")
    moved = eng.all_configs()["team-b"]
    eng.set_config(dataclasses.replace(moved, parent="ops"))
    scraped = _scrape(metrics)
    assert not any(
        ("node", "team-a") in labels or ("quota", "team-a") in labels for _, labels in scraped
    )
    assert not any(("parent", "vision") in labels for name, labels in scraped if "total" in name)
    assert not any(("parent", "vision") in labels for name, labels in scraped if "wait" in name)
    # Counting again after the move: under the new parent.
    metrics.admitted("team-b", created=1.0, now=2.0)
    b = {"node": "team-b", "namespace": "team-b", "parent": "ops"}
    assert _scrape(metrics)[("quotree_admissions_total", _labels(**b))] == 1


def _units(metrics: Metrics) -> dict[str, float]:
    return {
        dict(labels)["node"]: v
        for (name, labels), v in _scrape(metrics).items()
        if name == "quotree_pending_units"
    }


def test_pending_units_per_quota_and_per_cohort_at_any_depth() -> None:
    eng = _tree()
    for i in range(3):
        eng.observe_pod(pod("team-a", f"a-{i}", 1))  # one fits, two wait
    eng.observe_pod(pod("team-b", "b-0", 2))  # over its max: waits
    eng.observe_pod(pod("team-c", "c-0", 1))
    eng.decide(0.0)
    metrics = Metrics()
    metrics.watch(eng)
    units = _units(metrics)
    assert units == {
        "team-a": 2,
        "team-b": 1,
        "vision": 3,
        "research": 3,
        "team-c": 0,
        "ops": 0,
    }
    labels = {
        dict(lab)["node"]: dict(lab) for name, lab in _scrape(metrics) if name.endswith("units")
    }
    assert labels["vision"] == {
        "node": "vision",
        "kind": "Cohort",
        "namespace": "",
        "parent": "research",
    }
    assert labels["team-a"]["kind"] == "ElasticQuota"
    assert labels["team-a"]["parent"] == "vision"
    # The same pods by state, now labelled with the parent too.
    pods = _labels(node="team-a", namespace="team-a", parent="vision", state="pending")
    assert _scrape(metrics)[("quotree_pods", pods)] == 2


def test_a_pod_group_waiting_is_one_pending_unit() -> None:
    eng = engine(
        cohort("top", min=6),
        quota("q", "top", min=6, max=6),
        capacity=6,
        instant_evictions=False,
    )
    for facts in gang("q", "a", 4)[:3]:  # incomplete: 3 of its 4 pods
        eng.observe_pod(facts)
    eng.observe_pod(job_pod("q", "lone", "unknown-job"))  # waits for its Job, alone
    eng.observe_pod(pod("q", "single", 1))
    eng.decide()
    report = eng.report("q")
    assert (report.pending_pods, report.pending_groups) == (4, 1)  # single is admitted
    eng.refresh()
    configs = eng.all_configs()
    reports = {name: eng.report(name) for name in configs}
    assert pending_units(eng, configs, reports) == {"q": 2, "top": 2}  # the group, lone


def _documented_labels() -> dict[str, set[str]]:
    """docs/observability.md's metrics table: metric -> its labels."""
    text = (ROOT / "docs" / "observability.md").read_text()
    out = {}
    row_pattern = r"^\| `(quotree_\w+)` \| (?:gauge|counter|histogram) \|([^|]*)\|"
    for row in re.finditer(row_pattern, text, re.M):
        column = re.sub(r"\([^)]*\)", "", row.group(2))  # "state (`admitted`, ...)"
        out[row.group(1)] = {word.strip() for word in column.split(",") if word.strip()}
    return out


def test_every_metric_has_the_labels_the_docs_state() -> None:
    metrics = Metrics()
    eng = _tree()
    eng.observe_pod(pod("team-a", "a-0", 1))
    eng.decide(0.0)
    metrics.watch(eng)
    metrics.admitted("team-a", created=1.0, now=2.0)
    metrics.evicted("team-a", "Preempted")
    metrics.webhook("pods-mutate", 0.001, error=True)
    metrics.decided(0.001)
    metrics.set_leader(True)
    metrics.status_round(1, 1)
    documented = _documented_labels()
    seen: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        name = family.name + ("_total" if family.type == "counter" else "")
        for sample in family.samples:
            assert not sample.name.endswith("_created"), sample  # no series of the client's
            seen.setdefault(name, set()).update(set(sample.labels) - {"le"})
    assert sorted(seen) == sorted(documented)
    for name, labels in seen.items():
        assert labels == documented[name], name


def test_every_quota_has_its_admission_series_at_zero_before_its_first_admission() -> None:
    """Prometheus' rate() sees no increase in a series whose first sample already counts
    the admissions: the series exist from the first scrape, so the first ones show."""
    metrics = Metrics()
    metrics.watch(_tree())
    scraped = _scrape(metrics)
    for name, parent in (("team-a", "vision"), ("team-b", "vision"), ("team-c", "ops")):
        where = {"namespace": name, "parent": parent}
        assert scraped[("quotree_admissions_total", _labels(node=name, **where))] == 0
        assert scraped[("quotree_admission_wait_seconds_count", _labels(quota=name, **where))] == 0
    assert not any(("node", "vision") in labels for n, labels in scraped if "admissions" in n)
    metrics.admitted("team-b", created=1.0, now=2.0)
    b = _labels(node="team-b", namespace="team-b", parent="vision")
    assert _scrape(metrics)[("quotree_admissions_total", b)] == 1
