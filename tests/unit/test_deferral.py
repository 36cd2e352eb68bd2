"""Deferred subtrees (`QuotaTree.lazy`, `deferral.py`) on the contended burst's shape.

A tree of Cohorts over quotas that all ask more than their min, on a cluster that holds
exactly the mins, pods of one quota arriving together (bench_engine's contended burst,
small): the decisions and their words, pod by pod, and the final runtimes are the same
whether runtimes below a shrinking Cohort are left unevaluated or not, and the lazy run
does leave subtrees unevaluated.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from builders import cohort, engine, pod, quota
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import assert_kept_sums_are_fresh

from quotree.accounts import TreeMember
from quotree.deferral import UNBOUNDED, member_margin
from quotree.engine import Engine
from quotree.models import MemberConfig
from quotree.options import EngineOptions
from quotree.runtime import QuotaTree
from quotree.sharing import water_fill

TOPS, MIDS, PER, PODS = 3, 3, 4, 10
MINS = {"x": 40, "g": 2}


def _contended_tree(*, lazy: bool = True) -> tuple[list[MemberConfig], Engine]:
    """Quotas that ask twice their min under Cohorts, on a cluster holding exactly the mins."""
    configs = []
    for t in range(TOPS):
        for m in range(MIDS):
            for q in range(PER):
                configs.append(
                    quota(
                        f"q{t}{m}{q}",
                        f"m{t}{m}",
                        min=MINS,
                        max={r: 2 * v for r, v in MINS.items()},
                    )
                )
            configs.append(cohort(f"m{t}{m}", f"t{t}", min={r: v * PER for r, v in MINS.items()}))
        configs.append(cohort(f"t{t}", min={r: v * PER * MIDS for r, v in MINS.items()}))
    eng = engine(
        *configs,
        capacity={r: v * PER * MIDS * TOPS for r, v in MINS.items()},
        options=EngineOptions(lazy_runtimes=lazy),
    )
    return configs, eng


def _arrive_in_bursts(eng: Engine) -> Iterator[int]:
    """PODS pods of each quota in turn (the burst's order); yields the clock after each."""
    now = 0
    for t in range(TOPS):
        for m in range(MIDS):
            for q in range(PER):
                for i in range(PODS):
                    now += 1
                    eng.observe_pod(pod(f"q{t}{m}{q}", f"p{i}", {"x": 6, "g": 1}, created=now))
                    yield now


def _burst(lazy: bool) -> tuple[list[object], Engine]:
    _, eng = _contended_tree(lazy=lazy)
    log: list[object] = []
    for now in _arrive_in_bursts(eng):
        out = eng.decide(float(now))
        log.append(
            (
                out.admitted,
                [(e.pod, e.kind, e.reason) for e in out.evictions],
                out.labels,
                out.pending,
            )
        )
    log.append(sorted((r.key, r.state, r.reason, r.standing) for r in eng.pod_records()))
    eng.tree.settle()
    eng.refresh()
    log.append({(n.name, r): n.runtime[r] for n in eng.tree.live_members() for r in n.resources})
    return log, eng


def test_the_contended_burst_decides_the_same_with_deferred_subtrees() -> None:
    lazy_log, lazy_eng = _burst(True)
    eager_log, eager_eng = _burst(False)
    assert lazy_eng.tree.deferrals > 0  # the lazy path was taken
    assert eager_eng.tree.deferrals == 0
    assert lazy_log == eager_log
    evictions = sum(len(entry[1]) for entry in lazy_log[:-2])  # type: ignore[index,arg-type]
    assert evictions > 0  # reclaims happened in between (the demand moved back up)


def test_the_kept_child_sums_stay_those_of_the_children_through_the_contended_burst() -> None:
    """The sums over a parent's children that deciding whether to defer reads
    (`TreeMember.margin_sums`), kept until a child's demand moves, equal the sums over
    the children as they are after every round of the burst, and are reused there."""
    _, eng = _contended_tree()
    kept = 0
    for now in _arrive_in_bursts(eng):
        eng.decide(float(now))
        kept += assert_kept_sums_are_fresh(eng.tree)
    assert eng.tree.deferrals > 0
    assert kept > 0


def test_a_tree_alone_defers_nothing_unless_asked() -> None:
    assert QuotaTree().lazy is False


def _parent(needs: list[int], weights: list[int], total: int) -> TreeMember:
    """A Cohort with children of min 0 and the given demands, as `member_margin` reads it."""
    parent = TreeMember("p", None, 1)
    children = []
    for i, (need, weight) in enumerate(zip(needs, weights, strict=True)):
        child = TreeMember(f"c{i}", None, 2)
        child.demand, child.min, child.weight = {"x": need}, {"x": 0}, {"x": weight}
        children.append(child)
    parent.children_in = {"x": children}
    parent.runtime, parent.guarantee = {"x": total}, {"x": 0}
    parent.sum_min, parent.sum_target = {"x": 0}, {"x": sum(needs)}
    return parent


def test_no_share_rises_while_the_total_falls_within_the_margin() -> None:
    """Where `member_margin` allows a fall, every step down gives no child more (checked
    against water_fill itself); with unequal weights (the Alabama paradox) it allows none
    where a share would rise."""
    cases = [
        ([2, 10, 10, 9, 12], [3] * 5),
        ([7, 10, 1, 11, 11, 4], [1] * 6),
        ([5, 5, 5], [1, 1, 1]),
        ([100, 100, 100], [6, 6, 2]),
        ([3, 8, 8, 8], [2, 2, 2, 2]),
    ]
    allowed = 0
    for needs, weights in cases:
        names = [f"c{i}" for i in range(len(needs))]
        for total in range(1, sum(needs)):
            margin = member_margin(_parent(needs, weights, total), "x")
            low = 0 if margin >= UNBOUNDED else max(total - margin, 0)
            before = water_fill(total, needs, weights, names)
            for lower in range(total - 1, low - 1, -1):
                allowed += 1
                after = water_fill(lower, needs, weights, names)
                assert all(a <= b for a, b in zip(after, before, strict=True)), (needs, lower)
                before = after
    assert allowed > 0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 12), min_size=2, max_size=7),
    st.one_of(st.just([]), st.lists(st.integers(1, 3), min_size=7, max_size=7)),
)
def test_node_margin_never_allows_a_rising_share(needs: list[int], weights: list[int]) -> None:
    """Over random needs, with one weight or several: from every total, each step down within
    `member_margin` gives no child more than the step before (water_fill itself decides)."""
    weights = weights[: len(needs)] if weights else [2] * len(needs)
    names = [f"c{i}" for i in range(len(needs))]
    for total in range(1, sum(needs)):
        margin = member_margin(_parent(needs, weights, total), "x")
        low = 0 if margin >= UNBOUNDED else max(total - margin, 0)
        before = water_fill(total, needs, weights, names)
        for lower in range(total - 1, low - 1, -1):
            after = water_fill(lower, needs, weights, names)
            assert all(a <= b for a, b in zip(after, before, strict=True)), (total, lower)
            before = after


def _two_tops(lazy: bool) -> QuotaTree:
    configs = []
    for t in range(2):
        for q in range(2):
            configs.append(quota(f"q{t}{q}", f"m{t}", min=4, max=8))
        configs.append(cohort(f"m{t}", f"t{t}", min=8))
        configs.append(cohort(f"t{t}", None, min=8))
    return _settled(configs, lazy)


def _settled(configs: list[MemberConfig], lazy: bool) -> QuotaTree:
    """The tree of `configs` on a cluster of 16 (x), lazy or not, settled once."""
    tree = engine(*configs, capacity=16).tree
    tree.set_lazy(lazy)
    tree.settle()
    return tree


def _shown(tree: QuotaTree, *names: str) -> dict[str, int]:
    """The runtimes in x as the members hold them, without bringing anything up to date
    (`QuotaTree.member` is a read that changes nothing)."""
    shown = {}
    for name in names:
        member = tree.member(name)
        assert member is not None
        shown[name] = member.runtime["x"]
    return shown


@pytest.mark.parametrize("leave", [[("q11", 1), ("q10", 3)], [("q11", 1)], [("q10", 6)]])
def test_a_deferred_subtree_whose_share_rises_back_reports_nothing_new(
    leave: list[tuple[str, int]],
) -> None:
    """t1's quotas ask more and more: t0's share falls from 10 to 8 and its subtree is
    deferred, its quotas still holding the 5 they were last reported with. Then pods of t1
    leave and t0's share rises back, part of the way or all of it. An eager tree reports
    the quotas that rose from the 4 they fell to as grown; the lazy tree reports none of
    them, since none is above what it last reported (the decider looked at their pending
    pods with at least that much room), and reading them gives the eager tree's runtimes."""
    trees = {lazy: _two_tops(lazy) for lazy in (True, False)}
    for tree in trees.values():
        for q in ["q00"] * 5 + ["q01"] * 5 + ["q10"] * 6 + ["q11"] * 2:
            tree.add_request(q, {"x": 1})
            tree.settle()
    assert trees[True].deferrals > 0
    assert _shown(trees[True], "q00", "q01") == {"q00": 5, "q01": 5}
    assert _shown(trees[False], "q00", "q01") == {"q00": 4, "q01": 4}
    for tree in trees.values():
        for q, count in leave:
            tree.add_request(q, {"x": count}, -1)
        tree.settle()
    eager = trees[False]
    assert "q00" in eager.grown_quotas  # it rose from 4 to 5
    assert not {"q00", "q01"} & trees[True].grown_quotas
    for name in ("q00", "q01"):
        trees[True].refresh(name)
    assert _shown(trees[True], "q00", "q01") == _shown(eager, "q00", "q01")


def test_a_deferred_subtree_whose_share_rises_above_what_it_shows_reports_who_grew() -> None:
    """t0's quotas ask 16 and share 12 (t1 asks 4), read and so reported at 6 each; t1 asks 2
    more, t0's share falls to 10 and its subtree is deferred at 12. Then t1's pods all
    leave: t0's share rises to 16, above the 12 its quotas were last reported at, and they
    are reported grown, as an eager tree reports them."""
    trees = {lazy: _two_tops(lazy) for lazy in (True, False)}
    for tree in trees.values():
        for q in ["q00"] * 8 + ["q01"] * 8 + ["q10"] * 4:
            tree.add_request(q, {"x": 1})
            tree.settle()
        tree.refresh("q00")  # read: t0's subtree is brought up to date (and reported) at 12
        tree.settle()
        tree.add_request("q10", {"x": 2})
        tree.settle()
    assert trees[True].deferrals > 0
    for tree in trees.values():
        tree.add_request("q10", {"x": 6}, -1)
        tree.settle()
    assert {"q00", "q01"} <= trees[False].grown_quotas
    assert {"q00", "q01"} <= trees[True].grown_quotas
    assert (
        _shown(trees[True], "q00", "q01")
        == _shown(trees[False], "q00", "q01")
        == {
            "q00": 8,
            "q01": 8,
        }
    )


def test_take_moved_names_every_runtime_a_deferred_subtree_changed() -> None:
    # The operator's status writer rewrites only the members `take_moved()` names: a runtime
    # that moved inside a deferred subtree must be named too, or its status stays stale.
    configs, eng = _contended_tree(lazy=True)
    names = sorted(c.name for c in configs)
    eng.decide(0.0)
    eng.tree.take_moved()
    shown = {n: dict(eng.report(n).runtime) for n in names}
    deferred_seen = 0
    for now in _arrive_in_bursts(eng):
        eng.decide(float(now))
        deferred_seen = max(deferred_seen, eng.tree.deferrals)
        moved = eng.tree.take_moved()
        for n in names:
            runtime = dict(eng.report(n).runtime)
            if runtime != shown[n]:
                assert moved is None or n in moved, (n, shown[n], runtime)
                shown[n] = runtime
    assert deferred_seen > 0  # subtrees were deferred along the way


def test_a_quota_admitted_into_a_deferred_subtree_is_reported_when_it_goes_over() -> None:
    """Admitting into a quota below a deferred Cohort shrinks its margin to its runtime:
    when the Cohort's runtime then falls by less than the slack it was deferred with but
    more than the quota's new margin, the quota is over its runtime and must be reported
    (the decider reclaims only from quotas it looks at). The property test found the case:
    used 4 > runtime 3 went unreported."""
    configs = []
    for t in range(2):
        for m in range(2):
            for q in range(2):
                configs.append(quota(f"q{t}{m}{q}", f"m{t}{m}", min={"x": 3}, max={"x": 6}))
            configs.append(cohort(f"m{t}{m}", f"t{t}", min={"x": 6}))
        configs.append(cohort(f"t{t}", min={"x": 12}))
    trees = []
    for lazy in (True, False):
        tree = engine(*configs, capacity={"x": 22}).tree
        tree.set_lazy(lazy)
        for name, amount in [("q000", 5), ("q001", 3), ("q010", 6), ("q100", 6)]:
            tree.add_request(name, {"x": amount})
        tree.settle()
        trees.append(tree)
    reported = []
    for step in (
        lambda t: t.add_used("q000", {"x": 2}),
        lambda t: t.add_request("q101", {"x": 3}),  # m00's share falls: deferred
        lambda t: t.add_used("q000", {"x": 2}),  # used 4 of runtime 4
        lambda t: t.add_request("q110", {"x": 3}),  # m00 falls by 1 more
    ):
        for tree in trees:
            step(tree)
        reported.append([tree.settle() for tree in trees])
    lazy_tree, eager_tree = trees
    assert lazy_tree.deferrals > 0
    q000 = eager_tree.member("q000")
    assert q000 is not None
    assert q000.used["x"] > q000.runtime["x"]
    assert "q000" in reported[-1][1]
    assert "q000" in reported[-1][0]


def _two_tops_of_two(lazy: bool) -> QuotaTree:
    """t0 and t1, each with two Cohorts of two quotas, on a cluster of 16 (x)."""
    configs = []
    for t in range(2):
        for m in range(2):
            for q in range(2):
                configs.append(quota(f"q{t}{m}{q}", f"m{t}{m}", min=2, max=8))
            configs.append(cohort(f"m{t}{m}", f"t{t}", min=4))
        configs.append(cohort(f"t{t}", None, min=8))
    return _settled(configs, lazy)


def test_reading_a_quota_below_a_deferred_cohort_leaves_its_other_cohorts_deferred() -> None:
    """t0's quotas ask 16 and hold 14 (t1 asks 2); t1 asks 2 more, t0's share falls to 12
    and its subtree is deferred. Reading q000 brings t0's distribution and m00's subtree up
    to date; m01's subtree stays as it was, deferred on its own (its share fell within
    what t0's slack allows), until q010 is read. Every value read is the eager tree's."""
    trees = {lazy: _two_tops_of_two(lazy) for lazy in (True, False)}
    for tree in trees.values():
        for q in ("q000", "q001", "q010", "q011"):
            tree.add_request(q, {"x": 4})
        tree.add_request("q100", {"x": 2})
        tree.settle()
        tree.refresh("q000")
        tree.refresh("q010")
        tree.settle()
        tree.add_request("q101", {"x": 2})
        tree.settle()
    lazy, eager = trees[True], trees[False]
    deferred = lazy.deferrals
    assert deferred > 0
    held = _shown(lazy, "q010", "q011")
    assert held != _shown(eager, "q010", "q011")  # t0's fall is not carried down yet
    lazy.refresh("q000")
    mine = ("t0", "m00", "m01", "q000", "q001")
    assert _shown(lazy, *mine) == _shown(eager, *mine)
    assert lazy.deferrals == deferred + 1  # m01, on its own
    assert _shown(lazy, "q010", "q011") == held
    lazy.refresh("q010")
    everyone = tuple(m.name for m in eager.live_members() if "x" in m.runtime)
    assert _shown(lazy, *everyone) == _shown(eager, *everyone)
