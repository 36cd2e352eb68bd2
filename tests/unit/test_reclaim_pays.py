"""Reclaim is for a waiting pod, and only when it pays (docs/semantics.md, "Reclaim (getting
lent quota back), and only when it pays"; "In-quota preemption (unless
`preemption.withinQuota: Never`)", its last sentences)."""

from __future__ import annotations

from builders import arrive, cohort, engine, pod, quota, states

from quotree.accounts import TreeMember
from quotree.engine import Engine
from quotree.pods import PodState
from quotree.reclaim import borrowing_pays

GPU = "nvidia.com/gpu"


def two_borrowers(**kwargs: object) -> Engine:
    """Cohort org (min 4) over 8 GPUs: batch and team-x borrow (min 0, max 8), owner has a
    min of 4 and is idle; batch runs one 8-GPU pod."""
    eng = engine(
        cohort("org", min={GPU: 4}),
        quota("batch", "org", min={GPU: 0}, max={GPU: 8}),
        quota("team-x", "org", min={GPU: 0}, max={GPU: 8}),
        quota("owner", "org", min={GPU: 4}, max={GPU: 8}),
        capacity={GPU: 8},
        **kwargs,
    )
    arrive(eng, pod("batch", "train", {GPU: 8}))
    assert eng.pods["batch/train"].state is PodState.ADMITTED
    return eng


def test_a_borrower_does_not_evict_another_borrowers_8_gpu_pod_for_one_gpu() -> None:
    eng = two_borrowers()
    decisions = eng.decide(0.0)
    eng.observe_pod(pod("team-x", "small", {GPU: 1}))
    decisions = eng.decide(1.0)
    assert decisions.evictions == []
    assert eng.pods["batch/train"].state is PodState.ADMITTED
    assert eng.pods["team-x/small"].reason == (
        "does not fit in Cohort org: nvidia.com/gpu: used 8 + request 1 > runtime 8; "
        "waits: taking 8 nvidia.com/gpu from ElasticQuota batch would leave it borrowing "
        "less than ElasticQuota team-x by weight (nvidia.com/gpu: batch would borrow 0 at "
        "weight 8, team-x 1 at weight 8)"
    )


def test_a_quota_within_its_guarantee_always_gets_reclaim() -> None:
    eng = two_borrowers()
    arrive(eng, pod("owner", "mine", {GPU: 1}), now=1.0)
    assert states(eng) == {
        "batch/train": "reclaimed",
        "owner/mine": "admitted",
    }


def test_the_reclaim_delay_runs_per_waiting_pod() -> None:
    eng = two_borrowers(instant_evictions=False, reclaim_delay=30.0)
    eng.observe_pod(pod("owner", "mine", {GPU: 1}))
    first = eng.decide(10.0)
    assert first.evictions == []
    assert first.pending["owner/mine"] == (
        "does not fit in Cohort org: nvidia.com/gpu: used 8 + request 1 > runtime 8; "
        "waits for 1 nvidia.com/gpu lent to ElasticQuota batch, reclaimed in 30 s"
    )
    assert eng.decide(39.0).evictions == []
    decisions = eng.decide(40.0)
    assert [(e.pod, e.kind) for e in decisions.evictions] == [("batch/train", "Reclaimed")]
    assert decisions.evictions[0].reason == (
        "ElasticQuota batch is above its runtime (nvidia.com/gpu used 8 > runtime 7); "
        "lent quota is reclaimed for owner/mine (ElasticQuota owner)"
    )
    eng.forget_pod("batch/train")  # the eviction is done
    assert [key for key, _ in eng.decide(41.0).admitted] == ["owner/mine"]


def test_a_borrower_takes_from_one_that_still_borrows_more_by_weight() -> None:
    # batch runs six 1-GPU pods: taking one leaves it borrowing 5 against team-x's 1.
    eng = engine(
        cohort("org"),
        quota("batch", "org", min={GPU: 0}, max={GPU: 8}),
        quota("team-x", "org", min={GPU: 0}, max={GPU: 8}),
        capacity={GPU: 6},
    )
    arrive(eng, *(pod("batch", f"b{i}", {GPU: 1}, created=i) for i in range(6)))
    arrive(eng, pod("team-x", "small", {GPU: 1}, created=10))
    assert states(eng)["team-x/small"] == "admitted"
    # one pod only (a minimal set), the latest admitted
    assert [k for k, s in states(eng).items() if s == "reclaimed"] == ["batch/b5"]


def test_weights_decide_which_borrower_may_take_from_which() -> None:
    # team-x weighs 4 times batch. Taking batch's one 4-GPU pod would leave batch borrowing
    # 0 / 1 against team-x's 1 / 4 after the admission: it does not pay. With two 2-GPU
    # pods, one goes and batch still borrows 2 / 1 >= 1 / 4.
    for pods, expected in (([4], []), ([2, 2], ["batch/b1"])):
        eng = engine(
            cohort("org"),
            quota("batch", "org", min={GPU: 0}, max={GPU: 4}, weight={GPU: 1}),
            quota("team-x", "org", min={GPU: 0}, max={GPU: 4}, weight={GPU: 4}),
            capacity={GPU: 4},
        )
        arrive(eng, *(pod("batch", f"b{i}", {GPU: n}, created=i) for i, n in enumerate(pods)))
        arrive(eng, pod("team-x", "small", {GPU: 1}, created=10))
        assert [k for k, s in states(eng).items() if s == "reclaimed"] == expected
        assert (states(eng)["team-x/small"] == "admitted") is bool(expected)


def test_a_quota_above_its_runtime_that_nobody_waits_for_keeps_its_pods() -> None:
    # owner's demand comes back, its runtime rises and batch's falls below its use; but
    # owner's pod fits the free GPU, so nothing is evicted and batch stays above runtime.
    eng = engine(
        quota("batch", min={GPU: 0}, max={GPU: 8}),
        quota("owner", min={GPU: 4}, max={GPU: 8}),
        capacity={GPU: 9},
    )
    arrive(eng, pod("batch", "train", {GPU: 8}), pod("owner", "mine", {GPU: 1}))
    assert states(eng) == {"batch/train": "admitted", "owner/mine": "admitted"}
    eng.observe_pod(pod("owner", "more", {GPU: 1}))
    decisions = eng.decide(1.0)
    # owner/more is short at the cluster (9 + 1 > 9): within owner's guarantee, it reclaims
    assert [e.pod for e in decisions.evictions] == ["batch/train"]


def test_in_quota_preemption_evicts_nothing_when_an_ancestor_still_holds_the_pod_back() -> None:
    # q's high-priority pod would fit q after preempting its low-priority pod, but the
    # Cohort is full of b's lent quota and the reclaim delay has not passed: no eviction.
    eng = engine(
        cohort("org", min={GPU: 4}, max={GPU: 4}),
        quota("q", "org", min={GPU: 2}, max={GPU: 4}),
        quota("b", "org", min={GPU: 2}, max={GPU: 4}),
        capacity={GPU: 100},
        instant_evictions=False,
        reclaim_delay=30.0,
    )
    arrive(eng, pod("q", "low", {GPU: 1}, priority=0))
    arrive(eng, *(pod("b", f"b{i}", {GPU: 1}) for i in range(3)))
    assert eng.report("org").used == {GPU: 4}
    eng.observe_pod(pod("q", "high", {GPU: 2}, priority=9))
    decisions = eng.decide(1.0)
    assert decisions.evictions == []
    assert states(eng)["q/low"] == "admitted"
    # after the delay, one plan: q's low pod and one of b's lent GPUs go together
    decisions = eng.decide(40.0)
    assert sorted((e.pod, e.kind) for e in decisions.evictions) == [
        ("b/b2", "Reclaimed"),
        ("q/low", "Preempted"),
    ]
    eng.forget_pod("b/b2")
    eng.forget_pod("q/low")
    assert [key for key, _ in eng.decide(41.0).admitted] == ["q/high"]


def test_room_on_its_way_back_is_counted_whoever_it_was_evicted_for() -> None:
    """Two pods of b reclaim one pod of a each; the victim of the second goes first and the
    first pod, which fits then, takes its room. The second pod now fits once the first's
    victim is gone too: it waits for that eviction, and nothing more is evicted."""
    eng = engine(
        cohort("top", min={GPU: 10}, max={GPU: 10}),
        quota("a", "top", min={GPU: 4}, max={GPU: 6}),
        quota("b", "top", min={GPU: 6}, max={GPU: 8}),
        capacity={GPU: 32},
        instant_evictions=False,
        reclaim_delay=0.0,
    )
    for i in range(7):
        eng.observe_pod(pod("a", f"a{i}", {GPU: 1}, created=i))
    eng.decide(0.0)
    for i in range(6):
        eng.observe_pod(pod("b", f"b{i}", {GPU: 1}, created=10 + i))
    out = eng.decide(1.0)
    victims = {e.pod: e.reason.rsplit("for ", 1)[1].split()[0] for e in out.evictions}
    assert len(victims) == 2  # one for b4, one for b5
    second = next(v for v, unit in victims.items() if unit == "b/b5")
    first = next(v for v in victims if v != second)
    eng.forget_pod(second)  # b5's victim is gone first ...
    out = eng.decide(2.0)
    assert [key for key, _ in out.admitted] == ["b/b4"]  # ... and b4 takes its room
    assert out.evictions == []  # b5 waits for b4's victim, whose room comes back too
    assert eng.pods["b/b5"].reason.endswith("lent to ElasticQuota a, being evicted")
    eng.forget_pod(first)
    out = eng.decide(3.0)
    assert [key for key, _ in out.admitted] == ["b/b5"]
    assert out.evictions == []


def test_a_pod_that_counted_on_another_units_victims_is_planned_again_once_they_are_gone() -> None:
    """a0's victim frees 2: a0 and a1 fit then, and so would b0 alone; a1 and b0 ask for
    nothing and count on that room. a1 takes it; b0, still short, reclaims for itself."""
    eng = engine(
        quota("lender", min=0),
        quota("a", min=2),
        quota("b", min=2),
        capacity=4,
        instant_evictions=False,
        reclaim_delay=0.0,
    )
    for i in range(2):
        eng.observe_pod(pod("lender", f"l{i}", 2, created=i))
    eng.decide(0.0)
    for key in ("a/a0", "a/a1", "b/b0"):
        namespace, name = key.split("/")
        eng.observe_pod(pod(namespace, name, 1, created=10))
    out = eng.decide(1.0)
    assert [e.pod for e in out.evictions] == ["lender/l1"]
    eng.forget_pod("lender/l1")
    out = eng.decide(2.0)
    assert sorted(key for key, _ in out.admitted) == ["a/a0", "a/a1"]
    assert [e.pod for e in out.evictions] == ["lender/l0"]  # b0's guarantee, reclaimed
    eng.forget_pod("lender/l0")
    assert [key for key, _ in eng.decide(3.0).admitted] == ["b/b0"]


def test_before_the_delay_a_pod_says_reclaim_would_not_pay_rather_than_when() -> None:
    # The planner's dry run answers before the delay passes: no "reclaimed in 30 s" for
    # a reclaim that will not happen.
    eng = two_borrowers(instant_evictions=False, reclaim_delay=30.0)
    eng.observe_pod(pod("team-x", "small", {GPU: 1}))
    decisions = eng.decide(1.0)
    assert decisions.evictions == []
    assert decisions.pending["team-x/small"] == (
        "does not fit in Cohort org: nvidia.com/gpu: used 8 + request 1 > runtime 8; "
        "waits: taking 8 nvidia.com/gpu from ElasticQuota batch would leave it borrowing "
        "less than ElasticQuota team-x by weight (nvidia.com/gpu: batch would borrow 0 at "
        "weight 8, team-x 1 at weight 8)"
    )
    assert eng.decide(40.0).evictions == []


def test_the_weighted_rule_reads_a_side_without_the_resource_as_borrowing_what_it_uses() -> None:
    # Where the two sides meet, one of them may take no part in the resource the unit is
    # short of (no min, max or use of it): it has no account of it, and borrows nothing.
    mine, theirs = TreeMember("mine", None, 1), TreeMember("theirs", None, 1)
    mine.used, mine.guarantee, mine.weight = {"x": 2}, {"x": 1}, {"x": 1}
    pays, mine_borrows, theirs_borrows = borrowing_pays(mine, theirs, "x", admitted=1, freed={})
    assert (pays, mine_borrows, theirs_borrows) == (False, 2, 0)
    pays, _, _ = borrowing_pays(theirs, mine, "x", admitted=0, freed={})
    assert pays
