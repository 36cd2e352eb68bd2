"""An admitted pod group's reservation (docs/reference/pods.md, "Pod groups"): the room of its pods
that ended is kept for their replacements until the group ends or is evicted; and the counts
a quota's status shows of its groups and of their waiting pods."""

from __future__ import annotations

import dataclasses

from builders import engine, pod, quota

from quotree.engine import Engine, PodState
from quotree.groups import JobFacts, job_facts
from quotree.podfacts import PodFacts
from tests.unit.test_pod_groups import gang, job_pod, member


def operator_engine(size: int = 4, **kw: object) -> Engine:
    """The operator's engine (evictions wait for the cluster), one quota of `size` units."""
    return engine(quota("q", min=size, max=size), capacity=size, instant_evictions=False, **kw)


def admit_group(eng: Engine, pods: list[PodFacts]) -> None:
    for facts in pods:
        eng.observe_pod(facts)
    out = eng.decide()
    assert len(out.admitted) == len(pods)


def test_a_pod_that_replaces_one_that_ended_is_admitted_at_once_and_nobody_takes_its_room() -> None:
    eng = operator_engine()
    pods = gang("q", "a", 4)
    admit_group(eng, pods)
    eng.forget_pod("q/a-0")  # it failed
    # The room it held stays the group's: used and request still count it.
    assert (eng.report("q").used, eng.report("q").request) == ({"x": 4}, {"x": 4})
    assert eng.groups["q/a"].reserved == 1
    eng.observe_pod(pod("q", "other", 1))  # a single pod, first in the queue
    assert not eng.decide(1.0).admitted
    assert eng.pods["q/other"].state is PodState.PENDING
    replacement = member("q", "a-4", "a", 4, created=5.0)
    eng.observe_pod(replacement)
    out = eng.decide(2.0)
    assert [k for k, _ in out.admitted] == ["q/a-4"]
    assert "replaces a pod of pod group q/a within the group's reservation" in out.admitted[0][1]
    assert eng.groups["q/a"].reserved == 0
    assert eng.report("q").used == {"x": 4}
    assert eng.pods["q/other"].state is PodState.PENDING


def test_a_replacement_is_part_of_the_group_evicted_whole() -> None:
    eng = operator_engine()
    admit_group(eng, gang("q", "a", 4))
    eng.forget_pod("q/a-1")
    eng.observe_pod(member("q", "a-4", "a", 4, created=5.0))
    eng.decide(1.0)
    eng.observe_pod(pod("q", "high", 1, priority=10))
    out = eng.decide(2.0)
    assert sorted(e.pod for e in out.evictions) == ["q/a-0", "q/a-2", "q/a-3", "q/a-4"]


def test_a_group_of_plain_pods_ends_with_its_last_pod_and_gives_its_room_back() -> None:
    eng = operator_engine()
    admit_group(eng, gang("q", "a", 4))
    for i in range(3):
        eng.forget_pod(f"q/a-{i}")
    assert eng.report("q").used == {"x": 4}
    eng.forget_pod("q/a-3")
    assert eng.report("q").used == {"x": 0}
    assert "q/a" not in eng.groups


def test_a_jobs_group_keeps_its_room_between_pods_until_the_job_finishes() -> None:
    eng = operator_engine()
    job = JobFacts("q", "j", "uid", parallelism=4, completions=8)
    eng.observe_job(job)
    admit_group(eng, [job_pod("q", f"j-{i}", "j") for i in range(4)])
    for i in range(4):
        eng.forget_pod(f"q/j-{i}")  # all four succeeded; the Job makes the next ones
    assert eng.groups["q/j"].reserved == 4
    assert eng.report("q").admitted_groups == 1
    eng.observe_pod(pod("q", "other", 1))
    assert not eng.decide(1.0).admitted
    eng.observe_job(dataclasses.replace(job, finished=True))
    assert "q/j" not in eng.groups
    assert eng.report("q").used == {"x": 0}
    assert [k for k, _ in eng.decide(2.0).admitted] == ["q/other"]


def test_a_deleted_job_gives_its_groups_room_back() -> None:
    eng = operator_engine()
    eng.observe_job(JobFacts("q", "j", "uid", parallelism=2, completions=2))
    admit_group(eng, [job_pod("q", f"j-{i}", "j") for i in range(2)])
    eng.forget_pod("q/j-0")
    assert eng.report("q").used == {"x": 2}
    eng.forget_job("q", "j")
    assert eng.report("q").used == {"x": 1}
    assert eng.groups["q/j"].reserved == 0


def test_an_evicted_group_keeps_no_reservation() -> None:
    eng = operator_engine()
    admit_group(eng, gang("q", "a", 4))
    eng.observe_pod(pod("q", "high", 2, priority=10))
    out = eng.decide(1.0)
    assert len(out.evictions) == 4
    for eviction in out.evictions:
        eng.forget_pod(eviction.pod)
    assert [k for k, _ in eng.decide(2.0).admitted] == ["q/high"]
    assert eng.report("q").used == {"x": 2}


def test_a_replacement_that_asks_more_than_the_room_kept_waits_like_a_joining_pod() -> None:
    eng = operator_engine(size=5)
    admit_group(eng, gang("q", "a", 4))
    eng.forget_pod("q/a-0")
    eng.observe_pod(member("q", "a-4", "a", 4, 3, created=5.0))  # 3 where the slot holds 1
    assert not eng.decide(1.0).admitted
    assert eng.groups["q/a"].reserved == 1


def test_a_job_is_finished_by_its_complete_or_failed_condition() -> None:
    body = {
        "metadata": {"namespace": "q", "name": "j"},
        "spec": {"parallelism": 2},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    assert job_facts(body).finished
    body["status"] = {"conditions": [{"type": "Failed", "status": "False"}]}
    assert not job_facts(body).finished


def test_pods_of_an_incomplete_group_count_as_pending_pods_of_their_quota() -> None:
    eng = operator_engine(size=6)
    for facts in gang("q", "a", 4)[:3]:
        eng.observe_pod(facts)
    eng.observe_pod(job_pod("q", "lone", "unknown-job"))  # waits for its Job, alone
    eng.decide()
    report = eng.report("q")
    assert (report.pending_pods, report.pending_groups, report.admitted_pods) == (4, 1, 0)
    eng.forget_pod("q/lone")
    eng.observe_pod(gang("q", "a", 4)[3])
    eng.decide()
    report = eng.report("q")
    assert (report.pending_pods, report.pending_groups, report.admitted_groups) == (0, 0, 1)


def test_a_group_that_preempts_is_named_in_the_events() -> None:
    eng = operator_engine()
    for i in range(4):
        eng.observe_pod(pod("q", f"low-{i}", 1, priority=0))
    eng.decide()
    for facts in gang("q", "big", 2, priority=10):
        eng.observe_pod(facts)
    out = eng.decide(1.0)
    assert len(out.evictions) == 2
    assert {e.reason for e in out.evictions} == {
        "preempted by pod group q/big (2 pods, priority 10) within ElasticQuota q"
    }


def test_a_group_incomplete_again_is_warned_after_a_whole_timeout_of_its_new_spell() -> None:
    eng = engine(quota("q", min=2, max=2), capacity=2, instant_evictions=False, group_timeout=60.0)
    pods = gang("q", "a", 3)  # complete, but never fits: it waits whole
    for facts in pods:
        eng.observe_pod(facts)
    assert not eng.decide(0.0).warnings
    eng.forget_pod("q/a-2")  # incomplete from 50 s
    assert not eng.decide(50.0).warnings
    assert not eng.decide(100.0).warnings
    assert [k for k, r, _ in eng.decide(110.0).warnings] == ["q/a-0", "q/a-1"]
