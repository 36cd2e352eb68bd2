"""The operator's metrics and tree page data, from an engine (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from builders import engine as build_engine
from builders import pod, quota
from prometheus_client.parser import text_string_to_metric_families

from quotree.simulate import simulate, to_json
from quotree_operator.metrics import Metrics, tree_samples
from quotree_operator.page import PAGE, metrics_app, tree_json

TREE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "10", memory: 8Gi}}
---
apiVersion: quotree.io/v1alpha1
kind: Cohort
metadata: {name: research}
spec: {min: {cpu: "6"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-a, namespace: ns-a}
spec: {parent: research, min: {cpu: "4"}, max: {cpu: "5", memory: 4Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: a-1, namespace: ns-a}
spec: {containers: [{name: c, resources: {requests: {cpu: 1500m, memory: 1Gi}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: a-2, namespace: ns-a}
spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}
"""


def _engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "tree.yaml"
    path.write_text(TREE)
    return simulate([path])


def _scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _labels(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def test_tree_gauges_equal_the_report(tmp_path: Path) -> None:
    sim = _engine(tmp_path)
    report = to_json(sim)["nodes"]["team-a"]
    assert report["used"] == {"cpu": "1500m", "memory": "1Gi"}
    metrics = Metrics()
    metrics.watch(sim.engine)
    scraped = _scrape(metrics)
    a = {"node": "team-a", "kind": "ElasticQuota", "namespace": "ns-a", "parent": "research"}
    assert scraped[("quotree_used", _labels(**a, resource="cpu"))] == 1.5  # cores
    assert scraped[("quotree_used", _labels(**a, resource="memory"))] == 2**30
    assert report["request"]["cpu"] == "5"  # demand, up to the max
    assert scraped[("quotree_request", _labels(**a, resource="cpu"))] == 5
    assert scraped[("quotree_max", _labels(**a, resource="cpu"))] == 5
    assert scraped[("quotree_min", _labels(**a, resource="memory"))] == 0
    runtime = float(report["runtime"]["cpu"].removesuffix("m")) / (
        1000 if report["runtime"]["cpu"].endswith("m") else 1
    )
    assert scraped[("quotree_runtime", _labels(**a, resource="cpu"))] == runtime
    pods = {"node": "team-a", "namespace": "ns-a", "parent": "research"}
    assert scraped[("quotree_pods", _labels(**pods, state="admitted"))] == 1
    assert scraped[("quotree_pods", _labels(**pods, state="pending"))] == 1
    # An unlimited max has no series; a Cohort has no pods series.
    r = {"node": "research", "kind": "Cohort", "namespace": "", "parent": ""}
    assert ("quotree_max", _labels(**r, resource="cpu")) not in scraped
    assert scraped[("quotree_min", _labels(**r, resource="cpu"))] == 6
    assert not any(name == "quotree_pods" and ("node", "research") in lab for name, lab in scraped)


def test_no_pod_labels_anywhere(tmp_path: Path) -> None:
    metrics = Metrics()
    metrics.watch(_engine(tmp_path).engine)
    metrics.admitted("team-a", created=100.0, now=103.0)
    metrics.evicted("team-a", "Reclaimed")
    metrics.webhook("pods-mutate", 0.002, error=True)
    metrics.decided(0.001)
    metrics.set_leader(True)
    scraped = _scrape(metrics)
    allowed = {"node", "kind", "namespace", "parent", "resource", "state", "reason", "webhook"}
    allowed.add("quota")  # the admission wait histogram's name for its node
    for _, labels in scraped:
        assert {k for k, _ in labels} <= allowed | {"le"}
    assert scraped[("quotree_leader", ())] == 1
    where = {"namespace": "ns-a", "parent": "research"}
    assert scraped[("quotree_admissions_total", _labels(node="team-a", **where))] == 1
    evicted = _labels(node="team-a", **where, reason="reclaimed")
    assert scraped[("quotree_evictions_total", evicted)] == 1
    wait = {"quota": "team-a", **where}
    assert scraped[("quotree_admission_wait_seconds_count", _labels(**wait))] == 1
    assert scraped[("quotree_admission_wait_seconds_sum", _labels(**wait))] == 3.0
    assert scraped[("quotree_admission_wait_seconds_bucket", _labels(**wait, le="5.0"))] == 1
    assert scraped[("quotree_admission_wait_seconds_bucket", _labels(**wait, le="2.5"))] == 0
    assert scraped[("quotree_webhook_errors_total", _labels(webhook="pods-mutate"))] == 1
    assert scraped[("quotree_webhook_duration_seconds_count", _labels(webhook="pods-mutate"))] == 1
    assert scraped[("quotree_decision_seconds_count", ())] == 1


def test_a_deleted_node_leaves_the_scrape(tmp_path: Path) -> None:
    sim = _engine(tmp_path)
    metrics = Metrics()
    metrics.watch(sim.engine)
    assert any(("node", "team-a") in labels for _, labels in _scrape(metrics))
    sim.engine.remove_config("team-a")
    assert not any(("node", "team-a") in labels for _, labels in _scrape(metrics))


def test_samples_are_pure(tmp_path: Path) -> None:
    engine = _engine(tmp_path).engine
    assert tree_samples(engine) == tree_samples(engine)


def test_page_data_equals_the_status(tmp_path: Path) -> None:
    sim = _engine(tmp_path)
    data = tree_json(sim.engine, leading=True, identity="op-0")
    report = to_json(sim)
    names = [n["name"] for n in data["nodes"]]
    assert names == ["research", "team-a"]  # parents first
    by_name = {n["name"]: n for n in data["nodes"]}
    for name in names:
        for key in ("request", "runtime", "used"):
            assert by_name[name][key] == report["nodes"][name][key]
    assert by_name["team-a"]["depth"] == 1
    assert by_name["team-a"]["max"] == {"cpu": "5", "memory": "4Gi"}
    assert by_name["research"]["max"] == {}
    assert data["pendingCount"] == 1
    assert data["pending"][0]["pod"] == "ns-a/a-2"
    assert data["pending"][0]["reason"].startswith("does not fit in ElasticQuota team-a")
    # The engine's order and positions (`Engine.waiting`), as `kubectl quotree pending`.
    assert data["pending"][0]["order"] == 1
    assert data["pending"][0]["positions"] == [["team-a", 1], ["research", 1]]
    assert data["pending"][0]["kind"] == "Pod"


async def test_the_server_answers_metrics_page_and_json(tmp_path: Path) -> None:
    sim = _engine(tmp_path)
    metrics = Metrics()
    metrics.watch(sim.engine)
    app = metrics_app(metrics, lambda: tree_json(sim.engine))
    async with TestClient(TestServer(app)) as client:
        scrape = await client.get("/metrics")
        assert scrape.status == 200
        assert "text/plain" in scrape.headers["Content-Type"]
        assert 'quotree_used{kind="ElasticQuota"' in await scrape.text()
        page = await client.get("/")
        assert page.status == 200
        assert "api/tree" in await page.text()
        data = await (await client.get("/api/tree")).json()
        assert data["nodes"][1]["used"] == {"cpu": "1500m", "memory": "1Gi"}
        # Read-only: nothing answers a write.
        assert (await client.post("/api/tree", data="{}")).status == 405


def test_webhook_answers_that_count_as_errors() -> None:
    from quotree_webhooks.fastpath import answer_is_error  # noqa: PLC0415

    def review(code: int | None) -> bytes:
        response: dict[str, object] = {"uid": "u", "allowed": code is None}
        if code is not None:
            response["status"] = {"code": code, "message": "m"}
        return json.dumps({"kind": "AdmissionReview", "response": response}).encode()

    assert not answer_is_error(200, review(None))  # allowed
    assert not answer_is_error(200, review(403))  # a denial is a decision
    assert answer_is_error(200, review(400))  # malformed request
    assert answer_is_error(200, review(500))  # the handler failed
    assert answer_is_error(200, review(503))  # not ready
    assert answer_is_error(500, None)


GROUPS = """
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-g, namespace: ns-g}
spec: {min: {cpu: "4"}, max: {cpu: "4"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "16"}}
"""


def _group_pod(group: str, index: int) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {group}-{index}
  namespace: ns-g
  labels: {{quotree.io/pod-group: {group}}}
  annotations: {{quotree.io/pod-group-size: "2"}}
spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "2"}}}}}}]}}
"""


def test_pod_groups_per_quota_in_the_metrics_and_the_page(tmp_path: Path) -> None:
    path = tmp_path / "groups.yaml"
    path.write_text(GROUPS + "".join(_group_pod(g, i) for g in ("fits", "waits") for i in (0, 1)))
    sim = simulate([path])
    metrics = Metrics()
    metrics.watch(sim.engine)
    scraped = _scrape(metrics)
    where = {"node": "team-g", "namespace": "ns-g", "parent": ""}
    assert scraped[("quotree_pod_groups", _labels(**where, state="admitted"))] == 1
    assert scraped[("quotree_pod_groups", _labels(**where, state="pending"))] == 1
    member = {n["name"]: n for n in tree_json(sim.engine)["nodes"]}["team-g"]
    assert (member["admittedGroups"], member["pendingGroups"]) == (1, 1)


def test_reclaim_overdue_counts_a_pod_waiting_for_lent_quota_past_the_delay() -> None:
    """`quotree_reclaim_overdue_seconds`: 0 while the pod waits within its reclaim delay
    and for a quota above its runtime that nobody waits for; then the time past it."""
    gpu = "nvidia.com/gpu"
    eng = build_engine(
        quota("batch", min={gpu: 0}, max={gpu: 8}),
        quota("team-x", min={gpu: 0}, max={gpu: 8}),
        capacity={gpu: 8},
        instant_evictions=False,
        reclaim_delay=30.0,
    )
    eng.observe_pod(pod("batch", "train", {gpu: 8}))
    eng.decide(0.0)
    eng.observe_pod(pod("team-x", "small", {gpu: 1}))
    eng.decide(100.0)  # it waits for lent quota from now on; reclaim would not pay

    def overdue(now: float) -> dict[str, float]:
        return {
            dict(s.labels)["node"]: s.value
            for s in tree_samples(eng, now)
            if s.metric == "reclaim_overdue_seconds"
        }

    assert overdue(110.0) == {"batch": 0.0, "team-x": 0.0}
    assert eng.decide(200.0).evictions == []
    assert overdue(200.0) == {"batch": 0.0, "team-x": 70.0}


def test_the_page_marks_a_pod_overdue_for_lent_quota_not_a_quota_above_its_runtime() -> None:
    gpu = "nvidia.com/gpu"
    eng = build_engine(
        quota("batch", min={gpu: 0}, max={gpu: 8}),
        quota("team-x", min={gpu: 0}, max={gpu: 8}),
        capacity={gpu: 8},
        instant_evictions=False,
        reclaim_delay=0.0,
    )
    eng.observe_pod(pod("batch", "train", {gpu: 8}))
    eng.decide(0.0)
    eng.observe_pod(pod("team-x", "small", {gpu: 1}))
    eng.decide(0.0)  # the engine's clock starts at 0: the page's now is far past it
    members = {n["name"]: n for n in tree_json(eng)["nodes"]}
    assert members["batch"]["used"] == {gpu: "8"}  # above its runtime of 7, nobody's business
    assert members["batch"]["reclaimOverdue"] == 0.0
    assert members["team-x"]["reclaimOverdue"] > 0
    assert "used above" in PAGE
    assert "used over" not in PAGE
