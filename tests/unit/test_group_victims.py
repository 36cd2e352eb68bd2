"""Pod groups as victims (docs/reference/pods.md, "Pod groups": in-quota preemption and reclaim take
whole groups; an elastic group's joined pods are the first taken back): the choice is made on
whole groups, so the pays rule and "then fits" are judged on all of a group's pods."""

from __future__ import annotations

from builders import cohort, engine, pod, quota, states
from test_pod_groups import gang, member

from quotree.engine import Engine

GPU = "nvidia.com/gpu"


def admitted(eng: Engine) -> set[str]:
    return {k for k, s in states(eng).items() if s == "admitted"}


def test_reclaim_judges_a_group_whole_by_the_pays_rule() -> None:
    # batch borrows 8 GPUs as one group of four 2-GPU pods. Taking one pod would leave
    # batch borrowing 6 (more than team-x's 1: it would pay), but a group goes whole, and
    # taking it all leaves batch borrowing 0, less than team-x: nothing is evicted.
    eng = engine(
        cohort("org", min={GPU: 4}),
        quota("batch", "org", min={GPU: 0}, max={GPU: 8}),
        quota("team-x", "org", min={GPU: 0}, max={GPU: 8}),
        quota("owner", "org", min={GPU: 4}, max={GPU: 8}),
        capacity={GPU: 8},
        instant_evictions=False,
    )
    for facts in gang("batch", "train", 4, {GPU: 2}):
        eng.observe_pod(facts)
    eng.decide(0.0)
    assert len(admitted(eng)) == 4
    eng.observe_pod(pod("team-x", "small", {GPU: 1}))
    out = eng.decide(1.0)
    assert out.evictions == []
    assert eng.pods["team-x/small"].reason.endswith(
        "waits: taking 8 nvidia.com/gpu from ElasticQuota batch would leave it borrowing "
        "less than ElasticQuota team-x by weight (nvidia.com/gpu: batch would borrow 0 at "
        "weight 8, team-x 1 at weight 8)"
    )


def test_a_quota_within_its_guarantee_reclaims_a_whole_group() -> None:
    eng = engine(
        cohort("org", min={GPU: 4}),
        quota("batch", "org", min={GPU: 0}, max={GPU: 8}),
        quota("owner", "org", min={GPU: 4}, max={GPU: 8}),
        capacity={GPU: 8},
        instant_evictions=False,
    )
    for facts in gang("batch", "train", 4, {GPU: 2}):
        eng.observe_pod(facts)
    eng.decide(0.0)
    eng.observe_pod(pod("owner", "mine", {GPU: 1}))
    out = eng.decide(1.0)
    assert sorted(e.pod for e in out.evictions) == [f"batch/train-{i}" for i in range(4)]


def test_preemption_takes_a_joined_pod_before_a_newer_lone_pod_of_the_same_priority() -> None:
    eng = engine(quota("q", min=4, max=4), capacity=4, instant_evictions=False)
    for i in range(3):  # an elastic group at its min of 2, and one pod that joined
        eng.observe_pod(member("q", f"e-{i}", "e", 3, least=2, priority=0))
        eng.decide()
    eng.observe_pod(pod("q", "lone", 1, priority=0))  # the newest pod
    eng.decide()
    assert admitted(eng) == {"q/e-0", "q/e-1", "q/e-2", "q/lone"}
    eng.observe_pod(pod("q", "high", 1, priority=10))
    out = eng.decide()
    assert [e.pod for e in out.evictions] == ["q/e-2"]


def test_preemption_spares_a_group_when_a_lone_pod_frees_enough() -> None:
    # Fewest victims counts a group as one, but a group's core goes only whole: a lone pod
    # of the same priority that frees enough is taken instead of two of the group's pods.
    eng = engine(quota("q", min=6, max=6), capacity=6, instant_evictions=False)
    for facts in gang("q", "g", 4, 1, priority=0):
        eng.observe_pod(facts)
    eng.decide()
    eng.observe_pod(pod("q", "lone", 2, priority=0))
    eng.decide()
    eng.observe_pod(pod("q", "high", 2, priority=10))
    out = eng.decide()
    assert [e.pod for e in out.evictions] == ["q/lone"]
