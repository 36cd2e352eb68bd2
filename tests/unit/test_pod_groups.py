"""Pod groups in the engine (docs/reference/pods.md, "Pod groups"; docs/semantics.md,
"Admission", "In-quota preemption (unless `preemption.withinQuota: Never`)", "Reclaim
(getting lent quota back), and only when it pays"): admitted whole or not at all, held
while incomplete, evicted whole, requeued when the Nodes do not place them."""

from __future__ import annotations

import dataclasses

from builders import arrive, cohort, engine, pod, quota, states

from quotree.engine import Engine
from quotree.group_clocks import INCOMPLETE_QUIET
from quotree.groups import GroupSpec, JobFacts
from quotree.podfacts import PodFacts
from tests.unit.objects import quota_config as eq
from tests.unit.test_flavors import TWO_FLAVORS, cluster, gpu_pod
from tests.unit.test_forests import org_and_projects


def member(
    ns: str, name: str, group: str, size: int, amount: int = 1, *, least: int | None = None, **kw
) -> PodFacts:
    facts = pod(ns, name, amount, **kw)
    return dataclasses.replace(
        facts, group=GroupSpec(group, size, size if least is None else least)
    )


def gang(ns: str, group: str, size: int, amount: int = 1, **kw: object) -> list[PodFacts]:
    return [member(ns, f"{group}-{i}", group, size, amount, **kw) for i in range(size)]  # type: ignore[arg-type]


def admitted(eng: Engine) -> set[str]:
    return {k for k, s in states(eng).items() if s == "admitted"}


def test_an_incomplete_group_holds_nothing_and_says_how_many_pods_exist() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    arrive(eng, *gang("q", "a", 4)[:3])
    assert admitted(eng) == set()
    assert eng.report("q").request == {"x": 0}  # no demand while incomplete
    view = eng.groups["q/a"]
    assert view.state == "incomplete"
    assert "3 of 4 pods exist" in view.reason
    assert eng.pods["q/a-0"].reason == view.reason


def test_a_complete_group_is_admitted_in_one_round_with_all_its_pods() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6, instant_evictions=False)
    pods = gang("q", "a", 4)
    for facts in pods[:3]:
        eng.observe_pod(facts)
        assert not eng.decide().admitted
    eng.observe_pod(pods[3])
    out = eng.decide()
    assert sorted(k for k, _ in out.admitted) == [f"q/a-{i}" for i in range(4)]
    assert eng.groups["q/a"].state == "admitted"
    assert eng.report("q").admitted_groups == 1


def test_two_groups_in_six_one_runs_whole_and_the_other_waits_whole() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    arrive(eng, *gang("q", "a", 4), *gang("q", "b", 4))
    assert admitted(eng) == {f"q/a-{i}" for i in range(4)}
    view = eng.groups["q/b"]
    assert view.state == "pending"
    assert view.reason == (
        "pod group q/b (4 pods) does not fit in ElasticQuota q: x: used 4 + request 4 > "
        "runtime 6 (min 6, cap 6)"
    )
    # A waiting complete group counts whole in its quota's raw request.
    assert eng.report("q").request == {"x": 6}  # 8 asked, capped at max 6
    assert (eng.report("q").pending_groups, eng.report("q").admitted_groups) == (1, 1)


def test_a_group_over_its_quotas_max_is_told_at_once_with_the_numbers() -> None:
    eng = engine(quota("q", min=3, max=3), capacity=10)
    arrive(eng, *gang("q", "a", 4))
    assert admitted(eng) == set()
    assert eng.groups["q/a"].reason == (
        "waiting: pod group q/a can never fit: its 4 pods request x 4 in all, "
        "over ElasticQuota q's max 3"
    )


def test_a_group_over_the_capacity_is_told_so() -> None:
    eng = engine(quota("q", min=3, max=30), capacity=3)
    arrive(eng, *gang("q", "a", 2, 2))
    assert "over the cluster's capacity 3" in eng.groups["q/a"].reason


def test_a_group_waits_for_the_room_and_is_admitted_when_the_quota_grows() -> None:
    eng = engine(quota("q", min=3, max=3), capacity=10)
    arrive(eng, *gang("q", "a", 4))
    eng.set_config(quota("q", min=4, max=4))
    eng.decide()
    assert admitted(eng) == {f"q/a-{i}" for i in range(4)}


def test_a_pod_that_disagrees_with_its_group_waits_alone() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    arrive(eng, member("q", "a-0", "a", 2), member("q", "a-1", "a", 3))
    assert eng.pods["q/a-1"].reason == (
        "waiting: pod group q/a: this pod's size is 3, but the group's other pods have size 2"
    )
    assert eng.groups["q/a"].pods == ("q/a-0",)
    assert eng.group_declaration("q", "a") == ("q", GroupSpec("a", 2, 2), 0)
    assert eng.group_declaration("q", "nope") is None


def job_pod(ns: str, name: str, job: str) -> PodFacts:
    return dataclasses.replace(pod(ns, name, 1), owner_job=job)


def test_a_jobs_pods_wait_for_the_job_then_form_its_group() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    arrive(eng, job_pod("q", "j-a", "j"), job_pod("q", "j-b", "j"))
    assert "its Job q/j is not known to quotree yet" in eng.pods["q/j-a"].reason
    assert admitted(eng) == set()
    eng.observe_job(JobFacts("q", "j", "uid", parallelism=2, completions=2))
    eng.decide()
    assert admitted(eng) == {"q/j-a", "q/j-b"}
    assert eng.groups["q/j"].state == "admitted"


def test_a_job_of_parallelism_one_has_single_pods() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    eng.observe_job(JobFacts("q", "j", "uid", parallelism=1, completions=3))
    arrive(eng, job_pod("q", "j-a", "j"))
    assert admitted(eng) == {"q/j-a"}
    assert dict(eng.groups) == {}


def test_in_quota_preemption_evicts_a_whole_group() -> None:
    eng = engine(quota("q", min=4, max=4), capacity=4, instant_evictions=False)
    for facts in gang("q", "low", 4, priority=0):
        eng.observe_pod(facts)
    eng.decide()
    eng.observe_pod(pod("q", "high", 1, priority=10))
    out = eng.decide()
    assert sorted(e.pod for e in out.evictions) == [f"q/low-{i}" for i in range(4)]
    assert {(e.group, e.kind) for e in out.evictions} == {("q/low", "Preempted")}


def test_reclaim_evicts_a_borrowing_jobs_whole_group_and_names_the_job() -> None:
    eng = engine(
        cohort("c", min=8, max=8),
        quota("a", "c", min=4, max=8),
        quota("b", "c", min=4, max=8),
        capacity=8,
        instant_evictions=False,
    )
    eng.observe_job(JobFacts("b", "train", "uid", parallelism=6, completions=6))
    for i in range(6):
        eng.observe_pod(job_pod("b", f"train-{i}", "train"))
    eng.decide()
    assert len(admitted(eng)) == 6
    eng.observe_pod(pod("a", "mine", 4))
    out = eng.decide()
    assert sorted(e.pod for e in out.evictions) == [f"b/train-{i}" for i in range(6)]
    assert {(e.group, e.job, e.kind) for e in out.evictions} == {("b/train", "train", "Reclaimed")}


def test_group_incomplete_warning_after_the_group_timeout_once() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6, instant_evictions=False, group_timeout=60.0)
    for facts in gang("q", "a", 3)[:2]:
        eng.observe_pod(facts)
    assert not eng.decide(0.0).warnings
    assert not eng.decide(59.0).warnings
    out = eng.decide(60.0)
    assert [(k, r) for k, r, _ in out.warnings] == [
        ("q/a-0", "GroupIncomplete"),
        ("q/a-1", "GroupIncomplete"),
    ]
    assert "2 of 3 pods exist" in out.warnings[0][2]
    assert not eng.decide(120.0).warnings


def test_a_group_not_placed_within_the_scheduling_timeout_is_requeued_with_backoff() -> None:
    eng = engine(
        quota("q", min=6, max=6), capacity=6, instant_evictions=False, scheduling_timeout=30.0
    )
    pods = gang("q", "a", 2)
    for facts in pods:
        eng.observe_pod(facts)
    assert len(eng.decide(0.0).admitted) == 2
    eng.observe_pod(dataclasses.replace(pods[0], gated=False, node_name="n1"))  # one bound
    assert not eng.decide(10.0).evictions
    out = eng.decide(40.0)
    assert [(e.pod, e.kind, e.group) for e in out.evictions] == [
        ("q/a-0", "Requeued", "q/a"),
        ("q/a-1", "Requeued", "q/a"),
    ]
    assert "1 of 2 pods not scheduled to a Node within 30 s" in out.evictions[0].reason
    assert "backoff of 60 s" in out.evictions[0].reason
    for facts in pods:
        eng.forget_pod(facts.key)
    for facts in pods:  # the group's pods come back (their controller made them again)
        eng.observe_pod(facts)
    out = eng.decide(50.0)
    assert not out.admitted
    assert "it tries again in 50 s" in eng.groups["q/a"].reason
    assert not eng.decide(99.0).admitted
    assert len(eng.decide(100.0).admitted) == 2  # 40 s + the 60 s backoff


def test_an_elastic_group_is_admitted_at_min_and_the_rest_join_one_by_one() -> None:
    eng = engine(quota("q", min=3, max=3), capacity=10)
    pods = [member("q", f"e-{i}", "e", 5, least=2) for i in range(5)]
    arrive(eng, pods[0])
    assert admitted(eng) == set()
    arrive(eng, pods[1])
    assert admitted(eng) == {"q/e-0", "q/e-1"}
    arrive(eng, *pods[2:])
    assert admitted(eng) == {"q/e-0", "q/e-1", "q/e-2"}  # room for one more only


def test_a_pod_that_joined_an_elastic_group_is_evicted_alone() -> None:
    eng = engine(quota("q", min=3, max=3), capacity=3, instant_evictions=False)
    for facts in [member("q", f"e-{i}", "e", 3, least=2, priority=0) for i in range(3)]:
        eng.observe_pod(facts)
        eng.decide()
    assert len(admitted(eng)) == 3
    eng.observe_pod(pod("q", "high", 1, priority=10))
    out = eng.decide()
    assert [(e.pod, e.group) for e in out.evictions] == [("q/e-2", "q/e")]


def test_with_flavors_all_pods_of_a_group_go_on_one_flavor() -> None:
    # a100 has room for 2 of the 3 pods, h100 for all: pod by pod they would split.
    eng = cluster(eq("team", **TWO_FLAVORS), simulated=False)
    pods = [
        dataclasses.replace(gpu_pod("team", f"g-{i}"), group=GroupSpec("g", 3, 3)) for i in range(3)
    ]
    for facts in pods:
        eng.observe_pod(facts)
    out = eng.decide()
    assert sorted(k for k, _ in out.admitted) == ["team/g-0", "team/g-1", "team/g-2"]
    assert {flavor for flavor, _ in out.flavors.values()} == {"h100"}
    assert len(out.flavors) == 3


def test_in_a_forest_a_group_fits_in_every_tree_or_waits_whole() -> None:
    eng = engine(*org_and_projects(), capacity=20)
    arrive(eng, *gang("team-a", "big", 4, 2))  # 8 fits team-a (min 10), not proj-x (max 6)
    assert admitted(eng) == set()
    assert eng.groups["team-a/big"].reason == (
        "pod group team-a/big (4 pods) does not fit in ElasticQuota proj-x (tree projects): "
        "x: used 0 + request 8 > runtime 6 (min 0, cap 6)"
    )
    arrive(eng, *gang("team-a", "small", 3, 2))
    assert admitted(eng) == {f"team-a/small-{i}" for i in range(3)}
    assert eng.report("proj-x").used == {"x": 6}


def test_a_group_whose_pods_arrive_together_tells_none_of_them_it_is_incomplete() -> None:
    """Pods of a group made together (a Job's, say) wait a moment for each other: no
    Pending event per pod and per arrival for that."""
    eng = engine(quota("q", min=6, max=6), capacity=6, instant_evictions=False)
    told: dict[str, str] = {}
    for i, facts in enumerate(gang("q", "a", 4)):
        eng.observe_pod(facts)
        told.update(eng.decide(0.5 * i).pending)
    assert admitted(eng) == {f"q/a-{i}" for i in range(4)}
    assert told == {}


def test_an_incomplete_group_tells_each_pod_once_after_the_quiet_spell() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6, instant_evictions=False)
    pods = gang("q", "a", 4)
    for facts in pods[:2]:
        eng.observe_pod(facts)
    assert not eng.decide(0.0).pending
    assert not eng.decide(INCOMPLETE_QUIET - 1).pending
    out = eng.decide(INCOMPLETE_QUIET)
    assert sorted(out.pending) == ["q/a-0", "q/a-1"]
    assert "2 of 4 pods exist" in out.pending["q/a-0"]
    eng.observe_pod(pods[2])
    out = eng.decide(INCOMPLETE_QUIET + 1)
    assert sorted(out.pending) == ["q/a-2"]  # the others were told already
    assert "3 of 4 pods exist" in out.pending["q/a-2"]
    assert "3 of 4 pods exist" in eng.pods["q/a-0"].reason  # `why` stays current
    eng.observe_pod(pods[3])
    assert not eng.decide(INCOMPLETE_QUIET + 2).pending
    assert admitted(eng) == {f"q/a-{i}" for i in range(4)}
