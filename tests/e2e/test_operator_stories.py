"""The seed stories end to end: a real operator process, real Deployments and Jobs.

Pods carry the admission gate in their templates (the mutating webhook is tested on its
own). Stories whose numbers assume a small cluster run under a Cohort whose max is that
size, so the four fake nodes (32 cpu, 128Gi, 8 GPUs each) do not change the numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

RECLAIM_DELAY = "3"
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def operator(cluster: ModuleType) -> Iterator[OperatorProcess]:
    k.priority_classes()
    proc = start_operator(
        {"QUOTREE_RECLAIM_DELAY": RECLAIM_DELAY, "QUOTREE_WEBHOOKS": "0"},
        log_name="operator-stories",
    )
    yield proc
    alive = proc.alive
    proc.stop()
    assert alive, "the operator died during the stories\n" + proc.log_tail()


@pytest.fixture
def objects(cluster: ModuleType) -> Iterator[Callable[..., str]]:
    """Apply objects; namespaces and Cohorts made here are deleted after the test."""
    made: list[tuple[str, str]] = []

    def make(*docs: dict[str, Any]) -> str:
        for doc in docs:
            if doc["kind"] in ("Namespace", "Cohort"):
                made.append((doc["kind"].lower(), doc["metadata"]["name"]))
        k.apply(*docs)
        return ""

    yield make
    for kind, name in reversed(made):
        cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)


def wait(cluster: ModuleType, operator: OperatorProcess, what: str, predicate: Any) -> Any:
    try:
        return cluster.wait_until(predicate, 90, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{operator.log_tail(40)}") from None


def test_capacity_story_1_borrowing_and_reclaim_of_lent_min(
    cluster: ModuleType, operator: OperatorProcess, objects: Callable[..., str]
) -> None:
    s = k.suffix()
    ns_a, ns_b, top = f"s1a-{s}", f"s1b-{s}", f"s1-{s}"
    objects(
        k.namespace(ns_a),
        k.namespace(ns_b),
        k.cohort(top, min={GPU: "10"}, max={GPU: "10"}),
        k.quota("quota-a", ns_a, parent=top, min={GPU: "4"}, max={GPU: "6"}),
        k.quota("quota-b", ns_b, parent=top, min={GPU: "6"}, max={GPU: "8"}),
    )
    # quota-a asks for 7: 4 within its min, 2 borrowed from b's idle min, 1 over its max.
    objects(k.deployment("train", ns_a, 7, {GPU: "1"}))
    wait(
        cluster,
        operator,
        "quota-a to borrow up to its max",
        lambda: (
            (st := k.status("eq", "quota-a", ns_a)).get("admittedPods") == 6
            and st.get("pendingPods") == 1
            and st
        ),
    )
    st = k.status("eq", "quota-a", ns_a)
    assert st["used"] == {GPU: "6"}
    assert st["runtime"] == {GPU: "6"}
    assert json.loads(st["_annotations"]["quotree.io/runtime"]) == {GPU: "6"}
    labels = sorted(p["metadata"]["labels"]["quotree.io/capacity"] for p in k.admitted_pods(ns_a))
    assert labels == ["in-quota"] * 4 + ["over-quota"] * 2
    pending = k.events(ns_a, "Pending")
    assert any("does not fit in ElasticQuota quota-a" in e["message"] for e in pending)

    # quota-b now wants its min back: a's two borrowed pods are reclaimed after the delay.
    objects(k.deployment("infer", ns_b, 6, {GPU: "1"}))  # kwok completes Job pods at once
    wait(
        cluster,
        operator,
        "quota-b to get its min back",
        lambda: k.status("eq", "quota-b", ns_b).get("admittedPods") == 6,
    )
    st_a = k.status("eq", "quota-a", ns_a)
    assert st_a["runtime"] == {GPU: "4"}
    # b got 4 at once and its last 2 once a's borrowed pods were reclaimed (after the
    # delay): the Cohort never held more than its max of 10.
    wait(cluster, operator, "quota-a reclaimed to 4", lambda: len(k.admitted_pods(ns_a)) == 4)
    reclaimed = k.events(ns_a, "Reclaimed")
    assert len({e["involvedObject"]["name"] for e in reclaimed}) == 2
    assert all("lent quota is reclaimed" in e["message"] for e in reclaimed)
    # The Deployment replaced the reclaimed pods; they wait (gated) for quota.
    wait(
        cluster,
        operator,
        "quota-a's status after reclaim",
        lambda: (
            (st := k.status("eq", "quota-a", ns_a))["used"] == {GPU: "4"}
            and st.get("pendingPods") == 3
        ),
    )


def test_capacity_story_2_preemption_by_priority_within_a_quota(
    cluster: ModuleType, operator: OperatorProcess, objects: Callable[..., str]
) -> None:
    s = k.suffix()
    ns = f"s2-{s}"
    objects(
        k.namespace(ns),
        k.quota("team", ns, min={GPU: "4"}, max={GPU: "4"}),
        k.deployment("batch", ns, 4, {GPU: "1"}, priority_class=k.LOW),
    )
    wait(
        cluster,
        operator,
        "4 low-priority pods admitted",
        lambda: len(k.admitted_pods(ns, "app=batch")) == 4,
    )
    objects(k.pod("urgent", ns, {GPU: "1"}, priority_class=k.HIGH))
    wait(
        cluster,
        operator,
        "the high-priority pod admitted after preempting one low-priority pod",
        lambda: any(p["metadata"]["name"] == "urgent" for p in k.admitted_pods(ns)),
    )
    preempted = k.events(ns, "Preempted")
    assert len(preempted) == 1
    assert "preempted by" in preempted[0]["message"]
    assert "urgent" in preempted[0]["message"]
    assert preempted[0]["involvedObject"]["name"].startswith("batch-")
    admitted = [e["involvedObject"]["name"] for e in k.events(ns, "Admitted")]
    assert "urgent" in admitted
    wait(
        cluster,
        operator,
        "status after preemption",
        lambda: (
            (st := k.status("eq", "team", ns))["used"] == {GPU: "4"}
            and st.get("admittedPods") == 4
            and st.get("pendingPods") == 1
        ),
    )


def test_koordinator_runtime_example(
    cluster: ModuleType, operator: OperatorProcess, objects: Callable[..., str]
) -> None:
    # docs/semantics.md's "Example 1 (the Koordinator proposal's example, completed)" in
    # millicores: total 100m, runtimes 5m / 20m / 35m / 40m. The quotas and their pods come
    # first, under a Cohort that does not exist yet (so the pods wait); creating the Cohort
    # then activates all four at once. Were the pods to arrive one by one into live quotas,
    # c's 40m pod would fit before d's request is seen and be reclaimed only after the
    # delay: a different (also correct) history.
    s = k.suffix()
    top = f"koord-{s}"
    rows = {"a": ("10m", "5m", "40"), "b": ("15m", "20m", "60"), "c": ("20m", "40m", "50")}
    rows["d"] = ("15m", "70m", "80")
    docs: list[dict[str, Any]] = []
    for name, (low, request, weight) in rows.items():
        ns = f"koord-{name}-{s}"
        docs += [
            k.namespace(ns),
            k.quota(
                f"koord-{name}",
                ns,
                parent=top,
                min={"cpu": low},
                max={"cpu": "100m"},
                sharedWeight={"cpu": weight},
            ),
            k.pod("job", ns, {"cpu": request}),
        ]
    objects(*docs)
    for name in rows:
        wait(
            cluster,
            operator,
            f"koord-{name}'s pod waiting for the missing Cohort",
            lambda name=name: [
                e
                for e in k.events(f"koord-{name}-{s}", "Pending")
                if f"{top} does not exist" in e["message"]
            ],
        )
    objects(k.cohort(top, min={"cpu": "100m"}, max={"cpu": "100m"}))
    expected = {"a": "5m", "b": "20m", "c": "35m", "d": "40m"}

    def runtimes() -> tuple[dict[str, str], dict[str, str]]:
        """Runtimes in status and in the annotation (two writes: they may differ briefly)."""
        shown, annotated = {}, {}
        for name in rows:
            st = k.status("eq", f"koord-{name}", f"koord-{name}-{s}")
            shown[name] = (st.get("runtime") or {}).get("cpu", "")
            annotation = json.loads(st["_annotations"].get("quotree.io/runtime", "{}"))
            annotated[name] = annotation.get("cpu", "")
        return shown, annotated

    wait(
        cluster,
        operator,
        f"runtimes {expected} in status and annotations",
        lambda: runtimes() == (expected, expected),
    )
    st = k.status("coh", top)
    assert st["runtime"] == {"cpu": "100m"}
    assert st["request"] == {"cpu": "100m"}
    # a and b fit their runtimes; c (40m > 35m) and d (70m > 40m) wait, with the numbers.
    summaries = {"a": "cpu 5m/5m/10m/100m", "b": "cpu 20m/20m/15m/100m"}
    summaries |= {"c": "cpu 0/35m/20m/100m", "d": "cpu 0/40m/15m/100m"}
    wait(
        cluster,
        operator,
        f"summaries {summaries}",
        lambda: (
            {
                name: k.status("eq", f"koord-{name}", f"koord-{name}-{s}").get("summary")
                for name in rows
            }
            == summaries
        ),
    )
    for name, admitted in (("a", 1), ("b", 1), ("c", 0), ("d", 0)):
        assert len(k.admitted_pods(f"koord-{name}-{s}")) == admitted, name
    wait(
        cluster,
        operator,
        "c's pod told why it waits",
        lambda: [
            e
            for e in k.events(f"koord-c-{s}", "Pending")
            if "used 0 + request 40m > runtime 35m" in e["message"]
        ],
    )
    # Nothing was admitted early and reclaimed: c and d never ran.
    assert not k.events(f"koord-c-{s}", "Reclaimed")
    assert not k.events(f"koord-d-{s}", "Admitted")


def test_kueue_hierarchical_cohort_with_borrowing_limit_zero(
    cluster: ModuleType, operator: OperatorProcess, objects: Callable[..., str]
) -> None:
    s = k.suffix()
    org, research, prod = f"org-{s}", f"research-{s}", f"prod-{s}"
    ns_r, ns_p = f"kr-{s}", f"kp-{s}"
    objects(
        k.namespace(ns_r),
        k.namespace(ns_p),
        k.cohort(org, min={"cpu": "100m"}, max={"cpu": "100m"}),
        k.cohort(research, parent=org, min={"cpu": "50m"}, borrowingLimit={"cpu": "0"}),
        k.cohort(prod, parent=org, min={"cpu": "50m"}),
        k.quota("ml", ns_r, parent=research, min={"cpu": "50m"}),
        k.quota("batch", ns_p, parent=prod, min={"cpu": "20m"}),
        k.pod("train-1", ns_r, {"cpu": "40m"}),
    )
    wait(cluster, operator, "train-1 admitted", lambda: len(k.admitted_pods(ns_r)) == 1)
    # research may not borrow: train-2 waits although 60m are idle.
    objects(k.pod("train-2", ns_r, {"cpu": "40m"}))
    wait(
        cluster,
        operator,
        "a Pending event for train-2",
        lambda: [
            e
            for e in k.events(ns_r, "Pending")
            if e["involvedObject"]["name"] == "train-2" and "runtime 50m" in e["message"]
        ],
    )
    # production borrows research's idle min.
    objects(k.pod("etl-1", ns_p, {"cpu": "45m"}))
    wait(cluster, operator, "etl-1 admitted", lambda: len(k.admitted_pods(ns_p)) == 1)
    assert len(k.admitted_pods(ns_r)) == 1
    wait(
        cluster,
        operator,
        "research runtime 50m, batch runtime 45m",
        lambda: (
            k.status("coh", research).get("runtime") == {"cpu": "50m"}
            and k.status("eq", "batch", ns_p).get("runtime") == {"cpu": "45m"}
        ),
    )
