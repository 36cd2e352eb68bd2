"""Invariants of the engine over random trees and pod streams (hypothesis).

Each property runs a few hundred random cases (settings below), in CI too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from builders import cohort, engine, pod, quota
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotree.accounts import TreeNode
from quotree.engine import Engine
from quotree.models import NodeConfig

RESOURCES = ("x", "y")
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Scenario:
    configs: list[NodeConfig]
    capacity: dict[str, int]
    pods: list[tuple[str, dict[str, int], int, bool]]  # quota, request, priority, preemptible


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n_cohorts = draw(st.integers(0, 4))
    n_quotas = draw(st.integers(1, 7))
    names = [f"c{i}" for i in range(n_cohorts)] + [f"q{i}" for i in range(n_quotas)]
    parents: dict[str, str | None] = {}
    for i, name in enumerate(names):
        cohorts_before = [n for n in names[: min(i, n_cohorts)] if n.startswith("c")]
        parents[name] = draw(st.sampled_from([None, *cohorts_before]))
    amount = st.integers(0, 40)
    mins: dict[str, dict[str, int]] = {}
    for name in reversed(names):  # children before parents (they come later in names)
        mine = {r: draw(amount) for r in RESOURCES if draw(st.booleans())}
        children = [c for c in names if parents[c] == name]
        for r in RESOURCES:
            need = sum(mins[c].get(r, 0) for c in children)
            if need:
                mine[r] = max(mine.get(r, 0), need + draw(st.integers(0, 10)))
        mins[name] = mine
    configs = []
    for name in names:
        low = mins[name]
        high = {
            r: low.get(r, 0) + draw(st.integers(0, 60)) for r in RESOURCES if draw(st.booleans())
        }
        weight = {r: draw(st.integers(0, 5)) for r in RESOURCES if draw(st.integers(0, 3)) == 0}
        lending = {r: draw(amount) for r in RESOURCES if draw(st.integers(0, 3)) == 0}
        borrowing = {r: draw(amount) for r in RESOURCES if draw(st.integers(0, 3)) == 0}
        make = cohort if name.startswith("c") else quota
        configs.append(
            make(
                name,
                parents[name],
                min=low,
                max=high,
                weight=weight,
                lending=lending,
                borrowing=borrowing,
            )
        )
    capacity = {r: draw(st.integers(0, 150)) for r in RESOURCES}
    quotas = [n for n in names if n.startswith("q")]
    pods = draw(
        st.lists(
            st.tuples(
                st.sampled_from(quotas),
                st.fixed_dictionaries({r: st.integers(0, 15) for r in RESOURCES}),
                st.integers(0, 3),
                st.booleans(),
            ),
            max_size=25,
        )
    )
    return Scenario(configs, capacity, pods)


def build(scenario: Scenario, order: list[NodeConfig] | None = None) -> Engine:
    return engine(*(order or scenario.configs), capacity=scenario.capacity)


def arrive_all(eng: Engine, scenario: Scenario) -> None:
    for i, (q, request, priority, preemptible) in enumerate(scenario.pods):
        eng.observe_pod(
            pod(q, f"p{i}", request, priority=priority, created=i, preemptible=preemptible)
        )
        eng.decide(float(i))


def parents_of(eng: Engine) -> list[TreeNode]:
    return [eng.tree.root, *(n for n in eng.tree.live_nodes() if not n.is_quota)]


def runtime_map(eng: Engine) -> dict[tuple[str, str], int]:
    eng.tree.settle()
    return {(n.name, r): n.runtime[r] for n in eng.tree.live_nodes() for r in n.resources}


@PROPERTY
@given(scenarios())
def test_shares_add_up_to_what_the_parent_distributes(scenario: Scenario) -> None:
    eng = build(scenario)
    arrive_all(eng, scenario)
    eng.tree.settle()
    for parent in parents_of(eng):
        for r, kids in parent.children_in.items():
            total = parent.runtime[r]
            reachable = sum(
                k.demand[r] if k.weight[r] > 0 else min(k.demand[r], k.guarantee[r]) for k in kids
            )
            assert sum(k.runtime[r] for k in kids) == min(total, reachable)


@PROPERTY
@given(scenarios())
def test_runtime_bounds_guarantees_weight_zero_and_lending_floors(scenario: Scenario) -> None:
    eng = build(scenario)
    arrive_all(eng, scenario)
    for node in eng.tree.live_nodes():
        for r in node.resources:
            runtime, demand = node.runtime[r], node.demand[r]
            assert runtime <= demand <= node.cap[r]
            assert runtime >= min(demand, node.guarantee[r])
            if node.weight[r] == 0:
                assert runtime == min(demand, node.guarantee[r])
            assert demand >= min(node.floor[r], node.cap[r])
            assert runtime >= min(node.floor[r], node.guarantee[r])


def overcommitted(eng: Engine, resource: str) -> bool:
    """The top-level mins add up to more than the cluster holds (guarantees get scaled)."""
    root = eng.tree.root
    return root.sum_min.get(resource, 0) > root.runtime.get(resource, 0)


@PROPERTY
@given(scenarios())
def test_admitted_usage_within_runtime_and_non_preemptible_within_min(scenario: Scenario) -> None:
    eng = build(scenario)
    arrive_all(eng, scenario)
    eng.tree.settle()
    np_used: dict[tuple[str, str], int] = {}
    for record in eng.pods.values():
        if record.state == "admitted" and not record.facts.preemptible and record.quota:
            for r, amount in record.request.items():
                key = (record.quota, r)
                np_used[key] = np_used.get(key, 0) + amount
    for node in eng.tree.live_nodes():
        if not node.is_quota:
            continue
        for r in node.resources:
            pinned = np_used.get((node.name, r), 0)
            if overcommitted(eng, r):
                # Min scaling can shrink a guarantee below what non-preemptible pods
                # already hold; those are never evicted, everything else is.
                assert node.used[r] <= max(node.runtime[r], pinned), (node.name, r)
            else:
                assert node.used[r] <= node.runtime[r], (node.name, r)
                assert pinned <= node.guarantee[r], (node.name, r)


@PROPERTY
@given(scenarios(), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_listing_order(scenario: Scenario, rnd: random.Random) -> None:
    first = build(scenario)
    shuffled = list(scenario.configs)
    rnd.shuffle(shuffled)
    second = build(scenario, shuffled)
    for eng in (first, second):
        for i, (q, request, priority, _) in enumerate(scenario.pods):
            eng.observe_pod(pod(q, f"p{i}", request, priority=priority, created=i))
    assert runtime_map(first) == runtime_map(second)


@PROPERTY
@given(scenarios(), st.randoms(use_true_random=False))
def test_incremental_equals_full_recomputation(scenario: Scenario, rnd: random.Random) -> None:
    eng = build(scenario)
    runtime_map(eng)  # settle once, then only incremental updates
    live: list[str] = []
    for i, (q, request, priority, preemptible) in enumerate(scenario.pods):
        eng.observe_pod(pod(q, f"p{i}", request, priority=priority, preemptible=preemptible))
        live.append(f"{q}/p{i}")
        if rnd.random() < 0.3 and live:
            eng.forget_pod(live.pop(rnd.randrange(len(live))))
        if rnd.random() < 0.2:
            eng.set_cluster_node("node-1", {r: rnd.randrange(0, 150) for r in RESOURCES})
        if rnd.random() < 0.5:
            eng.decide(float(i))
    incremental = runtime_map(eng)
    eng.tree.recompute()
    assert runtime_map(eng) == incremental
