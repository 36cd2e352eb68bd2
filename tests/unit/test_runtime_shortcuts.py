"""The runtime pass's kept state against a tree built afresh (hypothesis).

`QuotaTree.recompute()` redoes the runtimes on the same members, so it shares what those
members keep between events (a parent's scaled guarantees, its children's lists). These
properties compare instead with a new engine given only the end state: the same
configuration, capacity and pods.
"""

from __future__ import annotations

import random

from builders import engine, pod
from hypothesis import given
from hypothesis import strategies as st
from test_properties import PROPERTY, RESOURCES, Scenario, scenarios

from quotree.accounts import TreeMember
from quotree.engine import Engine


def numbers(eng: Engine) -> dict[tuple[str, str], tuple[int, int]]:
    """(runtime, guarantee) of every live member, per resource."""
    eng.tree.settle()
    eng.refresh()
    return {
        (n.name, r): (n.runtime[r], n.guarantee[r])
        for n in eng.tree.live_members()
        for r in n.resources
    }


@PROPERTY
@given(scenarios(), st.randoms(use_true_random=False))
def test_kept_guarantees_and_runtimes_equal_a_fresh_tree(
    scenario: Scenario, rnd: random.Random
) -> None:
    eng = engine(*scenario.configs, capacity=scenario.capacity)
    numbers(eng)  # settle once, then only incremental updates
    capacity = dict(scenario.capacity)
    live: dict[str, tuple[str, dict[str, int], int]] = {}
    for i, (q, request, priority, _) in enumerate(scenario.pods):
        eng.observe_pod(pod(q, f"p{i}", request, priority=priority))
        live[f"{q}/p{i}"] = (q, request, priority)
        if rnd.random() < 0.3:
            gone = rnd.choice(sorted(live))
            eng.forget_pod(gone)
            del live[gone]
        if rnd.random() < 0.3:
            capacity = {r: rnd.randrange(0, 150) for r in RESOURCES}
            eng.set_cluster_node("node-1", capacity)
        if rnd.random() < 0.5:
            eng.decide(float(i))
            assert_held_guarantees(eng)
    fresh = engine(*scenario.configs, capacity=capacity)
    for key in sorted(eng.pods):  # the engine's: some were evicted
        q, request, priority = live[key]
        fresh.observe_pod(pod(q, key.split("/")[1], request, priority=priority))
    assert numbers(eng) == numbers(fresh)
    # What the kept children's lists tell `sharing.water_fill`: names in order, one weight.
    for parent in (eng.tree.root, *(n for n in eng.tree.live_members() if not n.is_quota)):
        for r, lists in parent.scaled.items():
            assert lists.names == sorted(lists.names)
            assert lists.names == [c.name for c in parent.children_in[r]]
            assert lists.one_weight == (len(set(lists.weights)) <= 1)
    assert_held_guarantees(eng)


def assert_held_guarantees(eng: Engine) -> None:
    """Where a parent's kept lists say which guarantees its children hold (`ChildLists.held`,
    so that a saturated distribution does not read them again), they hold those."""
    for parent in (eng.tree.root, *(n for n in eng.tree.live_members() if not n.is_quota)):
        for r, lists in parent.scaled.items():
            if lists.held is not None:
                assert [c.guarantee[r] for c in parent.children_in[r]] == lists.held


def over_by_walking(eng: Engine, member: TreeMember) -> list[str]:
    """The quotas below `member` over their runtime somewhere, found by walking its subtree
    (every deferred runtime brought up to date first)."""
    return [
        q.name
        for q in eng.tree.quotas_below(member)
        if any(q.used[r] > q.runtime[r] for r in q.resources)
    ]


@PROPERTY
@given(scenarios(), st.randoms(use_true_random=False))
def test_the_kept_quotas_over_their_runtime_are_those_a_walk_finds(
    scenario: Scenario, rnd: random.Random
) -> None:
    """`QuotaTree.over_below`, read before anything deferred is brought up to date (the
    decider's lazy runtimes), names the quotas that a walk of the subtree finds over
    their runtime once every runtime is current. In operator mode (evictions wait for the
    cluster, reclaim after a delay), so that quotas stay over their runtime a while."""
    eng = engine(
        *scenario.configs,
        capacity=scenario.capacity,
        instant_evictions=False,
        reclaim_delay=rnd.choice([0.0, 30.0]),
    )
    for i, (q, request, priority, preemptible) in enumerate(scenario.pods):
        eng.observe_pod(pod(q, f"p{i}", request, priority=priority, preemptible=preemptible))
        if rnd.random() < 0.3 and eng.pods:
            eng.forget_pod(rnd.choice(sorted(eng.pods)))
        if rnd.random() < 0.3:
            eng.set_cluster_node("node-1", {r: rnd.randrange(0, 150) for r in RESOURCES})
        eng.decide(float(i))
        tree = eng.tree
        kept = [q.name for q in tree.over_below(tree.root)]
        assert kept == over_by_walking(eng, tree.root)
        for member in tree.live_members():
            if not member.is_quota:
                assert [q.name for q in tree.over_below(member)] == over_by_walking(eng, member)
