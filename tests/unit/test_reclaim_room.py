"""The room evictions free is the unit's they were for (docs/semantics.md, "Reclaim (getting
lent quota back), and only when it pays": evictions happen only for a waiting unit that then
fits): while its victims are being evicted, no other pod is admitted into that room and no
pod's demand moves to another flavor (which would move the runtimes the plan counted on)."""

from __future__ import annotations

import dataclasses
from typing import Any

from builders import arrive as arrive_all
from builders import engine, pod, quota
from objects import quota_config
from test_flavor_properties import FLAVORS, GPU, MODELS, gpu_pod
from test_pod_groups import gang

from quotree.engine import Engine, PodState
from quotree.models import parse_member


def flavored(capacity: dict[str, int], *quotas: Any) -> Engine:
    """An operator's engine (evictions wait for the cluster, no reclaim delay) over Cohort
    org (16 GPUs of each model: more than the cluster, so mins are scaled) and `quotas`."""
    eng = Engine(reclaim_delay=0.0)
    for flavor in FLAVORS.values():
        eng.set_flavor(flavor)
    org = {"name": "org"}, {"flavors": [{"name": m, "min": {GPU: "16"}} for m in MODELS]}
    eng.set_config(parse_member({"kind": "Cohort", "metadata": org[0], "spec": org[1]}))
    for name, parent, entries, *weight in quotas:
        flavors = [{"name": m, "min": {GPU: str(n)}} for m, n in entries]
        for entry in flavors[: len(weight)]:
            entry["sharedWeight"] = {GPU: str(weight[0])}
        eng.set_config(quota_config(name, parent, flavors=flavors))
    for m in MODELS:
        eng.set_cluster_node(m, {GPU: capacity[m]}, {"model": m})
    return eng


def arrive(eng: Engine, name: str, gpus: int, at: float) -> list[str]:
    """A pod arrives; the round's evictions (pod keys)."""
    namespace, pod_name = name.split("/")
    eng.observe_pod(gpu_pod(namespace, pod_name, gpus, ({}, ()), at))
    return [e.pod for e in eng.decide(at).evictions]


def victims_go(eng: Engine, victims: list[str], at: float) -> set[str]:
    for key in victims:
        eng.forget_pod(key)
    return {key for key, _ in eng.decide(at).admitted}


def test_a_later_pod_of_the_quota_does_not_take_the_room_freed_for_an_earlier_one() -> None:
    eng = flavored(
        {"a": 7, "b": 2, "c": 2},
        ("q0", None, [("b", 0), ("c", 0), ("a", 2)]),
        ("q1", None, [("a", 0), ("b", 0), ("c", 0)]),
        ("q2", "org", [("a", 4)], 0),
        ("q3", "org", [("a", 3), ("b", 0), ("c", 0)]),
    )
    assert arrive(eng, "q1/p0", 2, 0.0) == []
    assert arrive(eng, "q2/p1", 4, 1.0) == []
    assert arrive(eng, "q3/p2", 2, 2.0) == []
    # q2/p3 (1 GPU) fits now; q2/p1 (4) needs q1's pod gone and q2's whole runtime of 4.
    victims = arrive(eng, "q2/p3", 1, 3.0)
    assert victims == ["q1/p0"]
    assert eng.pods["q2/p3"].state is PodState.PENDING
    assert eng.pods["q2/p3"].reason == (
        "waiting: the room it fits in is being freed for q2/p1 (victims being evicted)"
    )
    assert victims_go(eng, victims, 3.0) == {"q2/p1"}


def test_no_pod_moves_to_another_flavor_while_evictions_are_under_way() -> None:
    eng = flavored(
        {"a": 2, "b": 4, "c": 4},
        ("q0", None, [("c", 0), ("b", 3)]),
        ("q1", "org", [("b", 0), ("c", 1)]),
        ("q3", "org", [("c", 0)]),
    )
    for i, gpus in enumerate((1, 3, 2)):
        assert arrive(eng, f"q0/p{i}", gpus, float(i)) == []
    assert arrive(eng, "q1/p3", 3, 3.0) == []  # waits on b: reclaim from q0 would not pay
    assert arrive(eng, "q1/p4", 1, 4.0) == []
    victims = arrive(eng, "q3/p5", 2, 5.0)  # q3 may only use c: q0's pod there goes
    assert victims == ["q0/p1"]
    # q1/p3 stays on b while q0/p1 leaves: on c its demand would shrink q3's runtime.
    assert eng.pods["q1/p3"].flavor == "b"
    assert victims_go(eng, victims, 5.0) == {"q3/p5"}


def _borrower_reclaimed_for(claimant: str, grouped: str) -> tuple[Engine, list[str]]:
    """b borrows all 10 x; `claimant`'s pod of 4 (within its min of 5) reclaims 4 of b's
    pods, which are being evicted; then a group of 2 arrives in `grouped` (min 2)."""
    eng = engine(
        quota(claimant, min=5, max=10),
        quota("b", min=0, max=10),
        quota(grouped, min=2, max=10),
        capacity=10,
        instant_evictions=False,
    )
    arrive_all(eng, *(pod("b", f"p{i}", 1) for i in range(10)))
    eng.observe_pod(pod(claimant, "want", 4))
    victims = [e.pod for e in eng.decide(1.0).evictions]
    assert len(victims) == 4
    for facts in gang(grouped, "g", 2):
        eng.observe_pod(facts)
    return eng, victims


def test_a_group_does_not_take_the_room_freed_for_another_unit() -> None:
    for claimant, grouped in (("a", "c"), ("c", "a")):  # either quota decided first
        eng, victims = _borrower_reclaimed_for(claimant, grouped)
        for key in victims[:2]:  # half the victims are gone: room for the group, not yet
            eng.forget_pod(key)  # for the pod they are evicted for
        assert not eng.decide(2.0).admitted
        assert eng.pods[f"{grouped}/g-0"].reason == (
            f"waiting: the room it fits in is being freed for {claimant}/want "
            "(victims being evicted)"
        )
        for key in victims[2:]:
            eng.forget_pod(key)
        out = eng.decide(3.0)
        assert [key for key, _ in out.admitted] == [f"{claimant}/want"]
        assert len(out.evictions) == 2  # and the group, within its min, reclaims its own


def test_a_pod_whose_victims_are_partly_gone_says_they_are_being_evicted() -> None:
    eng, victims = _borrower_reclaimed_for("a", "c")
    for key in victims[:2]:
        eng.forget_pod(key)
    eng.decide(2.0)
    reason = eng.pods["a/want"].reason
    assert reason.endswith("waits for 2 x lent to ElasticQuota b, being evicted"), reason


def test_a_pod_that_waits_for_pods_leaving_on_their_own_does_not_count_zero_victims() -> None:
    eng = engine(quota("q", min=2, max=2), capacity=2, instant_evictions=False)
    arrive_all(eng, pod("q", "p0", 1, priority=1), pod("q", "p1", 1, priority=1))
    leaving = eng.pods["q/p1"].facts
    eng.observe_pod(dataclasses.replace(leaving, deleting=True, gated=False))  # deleted by its user
    eng.observe_pod(pod("q", "p2", 1, priority=5))
    out = eng.decide(5.0)
    assert out.evictions == []  # the room of the pod being deleted is enough
    assert out.pending["q/p2"] == (
        "waiting for pods being evicted or deleted to release their resources"
    )
