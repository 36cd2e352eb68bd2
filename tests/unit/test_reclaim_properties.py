"""Reclaim that pays, over random trees and arrivals (hypothesis): docs/semantics.md, "Reclaim
(getting lent quota back), and only when it pays" and "In-quota preemption (unless
`preemption.withinQuota: Never`)".

The engine is the operator's (evictions wait for the cluster): the test carries each
round's evictions out itself, so it can look between the eviction and the next round.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any
from unittest import mock

from builders import engine, pod
from hypothesis import assume, event, given
from hypothesis import strategies as st
from test_flavor_properties import FLAVORS, GPU, MODELS, flavored_trees, gpu_pod, selectors
from test_forest_properties import Forest, forest_engine, forests
from test_pod_group_properties import grouped
from test_properties import PROPERTY, RESOURCES, Scenario, overcommitted, scenarios

from quotree import planner
from quotree.accounts import TreeMember
from quotree.decisions import Decisions
from quotree.engine import Engine
from quotree.gang_admission import GangAdmission
from quotree.models import MemberConfig
from quotree.options import EngineOptions
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState, QuotaPods
from quotree.reclaim import Refusal, reclaim_choice
from quotree.runtime import QuotaTree


@st.composite
def tight_scenarios(draw: st.DrawFn) -> Scenario:
    """A random scenario made to reclaim: the cluster holds just the top-level mins and the
    pods arrive quota by quota, so the first quotas borrow what the later ones then want."""
    scenario = draw(scenarios())
    top = [c for c in scenario.configs if c.parent is None]
    capacity = {r: max(1, sum(c.min.get(r, 0) for c in top)) for r in RESOURCES}
    pods = sorted(scenario.pods, key=lambda p: p[0])
    return Scenario(scenario.configs, capacity, pods)


#: Random trees as `test_properties` draws them, and ones made to reclaim.
trees = st.one_of(scenarios(), tight_scenarios())


def operator_engine(scenario: Scenario, delay: float = 0.0) -> Engine:
    return engine(
        *scenario.configs,
        capacity=scenario.capacity,
        instant_evictions=False,
        reclaim_delay=delay,
    )


def claims_of(eng: Engine, evicted: Iterable[str]) -> dict[str, frozenset[str]]:
    """The pending units the round's evictions were for, with their victims."""
    gone = set(evicted)
    return {
        key: record.victims
        for key, record in eng.pods.items()
        if record.state is PodState.PENDING and record.victims & gone
    }


def carry_out(eng: Engine, evicted: Iterable[str]) -> None:
    for key in evicted:
        eng.forget_pod(key)


@PROPERTY
@given(trees)
def test_every_eviction_is_followed_by_the_admission_of_the_unit_it_was_for(
    scenario: Scenario,
) -> None:
    """(a) Once the victims of a round are gone, the next round admits every unit they were
    for (nothing else arrives in between): no eviction is for nothing."""
    eng = operator_engine(scenario)
    for i, (q, request, priority, preemptible) in enumerate(scenario.pods):
        eng.observe_pod(
            pod(q, f"p{i}", request, priority=priority, created=i, preemptible=preemptible)
        )
        now = float(i)
        decisions = eng.decide(now)
        while decisions.evictions:
            evicted = [e.pod for e in decisions.evictions]
            claims = claims_of(eng, evicted)
            assert claims, f"evictions {evicted} for no waiting unit"
            assert set(evicted) <= set().union(*claims.values())
            carry_out(eng, evicted)
            decisions = eng.decide(now)
            admitted = {key for key, _ in decisions.admitted}
            assert set(claims) <= admitted, (claims, eng.pods[next(iter(claims))].reason)


def home(tree: QuotaTree, record: PodRecord) -> TreeMember:
    """The pod's quota in `tree`."""
    for name in (record.quota, *record.also):
        tree.refresh(name or None)
        member = tree.member(name) if name else None
        if member is not None and member.is_quota:
            return member
    raise AssertionError(f"{record.key} has no quota in this tree")


def borrows(member: TreeMember, resource: str, delta: int) -> int:
    return member.used[resource] + delta - member.guarantee.get(resource, 0)


def sides(tree: QuotaTree, mine: TreeMember, theirs: TreeMember) -> tuple[TreeMember, TreeMember]:
    """The children of the lowest common member above both (computed here from the names)."""
    up_mine = [mine, *tree.path_up(mine)]
    up_theirs = [theirs, *tree.path_up(theirs)]
    names = [n.name for n in up_theirs]
    for i, member in enumerate(up_mine):
        if member.name in names and i > 0:
            return up_mine[i - 1], up_theirs[names.index(member.name) - 1]
    raise AssertionError("no common ancestor")


def weighted_checker(broken: list[str]) -> Callable[..., tuple[list[PodRecord], Refusal | None]]:
    """`reclaim_choice`, noting in `broken` every victim whose side, where it meets the
    unit's, would borrow less than the unit's by weight afterwards (the unit's quota
    borrowing)."""

    def checked(
        tree: QuotaTree,
        unit: PodRecord,
        quota: TreeMember,
        short: Mapping[str, int],
        lenders: Iterable[tuple[TreeMember, QuotaPods]],
        **kwargs: Any,
    ) -> tuple[list[PodRecord], Refusal | None]:
        victims, refusal = reclaim_choice(tree, unit, quota, short, lenders, **kwargs)
        request = unit.request_in(quota.name)
        if victims and not all(
            quota.used[r] + request.get(r, 0) <= quota.guarantee.get(r, 0) for r in short
        ):
            for victim in victims:
                v = home(tree, victim)
                mine, theirs = sides(tree, quota, v)
                for r in short:
                    freed = {
                        side.name: sum(
                            x.request_in(home(tree, x).name).get(r, 0)
                            for x in victims
                            if side in (home(tree, x), *tree.path_up(home(tree, x)))
                        )
                        for side in (mine, theirs)
                    }
                    a = borrows(mine, r, request.get(r, 0) - freed[mine.name])
                    b = borrows(theirs, r, -freed[theirs.name])
                    if b * mine.weight[r] < a * theirs.weight[r]:
                        broken.append(f"{victim.key} for {unit.key}: {r} {b} vs {a}")
        return victims, refusal

    return checked


@PROPERTY
@given(trees)
def test_no_reclaim_breaks_the_weighted_rule(scenario: Scenario) -> None:
    """(b) Every set of reclaim victims chosen for a unit whose quota would borrow leaves each
    victim's side, where it meets the unit's, borrowing at least as much by weight."""
    broken: list[str] = []
    with mock.patch.object(planner, "reclaim_choice", weighted_checker(broken)):
        eng = operator_engine(scenario)
        for i, (q, request, priority, preemptible) in enumerate(scenario.pods):
            eng.observe_pod(
                pod(q, f"p{i}", request, priority=priority, created=i, preemptible=preemptible)
            )
            decisions = eng.decide(float(i))
            carry_out(eng, [e.pod for e in decisions.evictions])
    assert broken == []


@st.composite
def tight_grouped(draw: st.DrawFn) -> tuple[Scenario, list[PodFacts]]:
    """`test_pod_group_properties.grouped`, made to reclaim as `tight_scenarios` is (one
    time in two): the cluster holds the top-level mins, the pods come quota by quota."""
    scenario, pods = draw(grouped())
    if draw(st.booleans()):
        top = [c for c in scenario.configs if c.parent is None]
        capacity = {r: max(1, sum(c.min.get(r, 0) for c in top)) for r in RESOURCES}
        scenario = Scenario(scenario.configs, capacity, scenario.pods)
        pods = sorted(pods, key=lambda p: p.namespace)  # a group's pods stay together
    return scenario, pods


@PROPERTY
@given(tight_grouped())
def test_with_pod_groups_victims_are_whole_groups_and_keep_the_weighted_rule(
    case: tuple[Scenario, list[PodFacts]],
) -> None:
    """(b) with pod groups, and a group is never partly evicted: the planner itself takes a
    group's admitted core pods all or none (checked before `GangAdmission.finish` names the
    groups), and the weighted rule holds for the whole group's pods."""
    scenario, pods = case
    broken: list[str] = []
    partly: list[str] = []
    finish = GangAdmission.finish

    def checked_finish(self: GangAdmission, out: Decisions, start: int) -> None:
        evicted = {e.pod for e in out.evictions[start:]}
        book = self.book
        assert book is not None
        for group in book.groups.values():
            core = {m.key for m in book.members(group) if m.key in group.core}
            if core & evicted and not core <= evicted | {
                k for k in core if eng.pods[k].state is not PodState.ADMITTED
            }:
                partly.append(f"{group.key}: {sorted(core & evicted)} of {sorted(core)}")
        finish(self, out, start)

    with (
        mock.patch.object(planner, "reclaim_choice", weighted_checker(broken)),
        mock.patch.object(GangAdmission, "finish", checked_finish),
    ):
        eng = operator_engine(scenario)
        for i, facts in enumerate(pods):
            eng.observe_pod(facts)
            decisions = eng.decide(float(i))
            if decisions.evictions:
                event("evicted")
            carry_out(eng, [e.pod for e in decisions.evictions])
    assert broken == []
    assert partly == []


@PROPERTY
@given(trees, st.data())
def test_a_quota_asking_within_its_guarantee_is_admitted_after_the_delay(
    scenario: Scenario, data: st.DataObject
) -> None:
    """(c) A unit whose quota asks for no more than its guarantee is admitted once the
    reclaim delay has passed and the victims are gone, however the others borrowed."""
    eng = operator_engine(scenario, delay=30.0)
    quotas = [c.name for c in scenario.configs if c.is_leaf]
    target = data.draw(st.sampled_from(quotas))
    for i, (q, request, priority, preemptible) in enumerate(scenario.pods):
        if q == target:
            continue  # the target quota asks only for the unit below
        eng.observe_pod(
            pod(q, f"p{i}", request, priority=priority, created=i, preemptible=preemptible)
        )
        decisions = eng.decide(0.0)
        carry_out(eng, [e.pod for e in decisions.evictions])
    eng.tree.settle()
    eng.tree.refresh(target)
    member = eng.tree.member(target)
    assume(member is not None)
    assert member is not None
    assume(not any(overcommitted(eng, r) for r in RESOURCES))
    request = {
        r: data.draw(st.integers(0, member.guarantee.get(r, 0)))
        for r in RESOURCES
        if r in member.resources
    }
    assume(any(request.values()))
    eng.observe_pod(pod(target, "mine", request, created=1000))
    now = 1.0
    for _ in range(6):
        decisions = eng.decide(now)
        carry_out(eng, [e.pod for e in decisions.evictions])
        if eng.pods[f"{target}/mine"].state is PodState.ADMITTED:
            break
        now += 31.0
    record = eng.pods[f"{target}/mine"]
    assert record.state is PodState.ADMITTED, record.reason


@st.composite
def flavored_stories(
    draw: st.DrawFn,
) -> tuple[list[MemberConfig], dict[str, int], list[tuple[int, int, Any, int]]]:
    """Flavored trees (`test_flavor_properties.flavored_trees`), each flavor's members holding
    just about the Cohort's min of it, and GPU pods (quota, GPUs, selector, priority)
    arriving quota by quota, so the first quotas borrow what the later ones then want."""
    configs = draw(flavored_trees())
    capacity = {m: draw(st.integers(2, 8)) for m in MODELS}
    stream = draw(
        st.lists(
            st.tuples(st.integers(0, 3), st.integers(1, 4), selectors, st.integers(0, 3)),
            min_size=1,
            max_size=25,
        )
    )
    if draw(st.booleans()):
        stream.sort(key=lambda p: p[0])
    return configs, capacity, stream


@PROPERTY
@given(flavored_stories(), st.booleans())
def test_every_eviction_is_followed_by_the_admission_of_the_unit_it_was_for_with_flavors(
    story: tuple[list[MemberConfig], dict[str, int], list[tuple[int, int, Any, int]]],
    holds: bool,
) -> None:
    """(a) with flavors: the unit the evictions were for is admitted once they are gone, on
    the flavor they made room on (it is not placed elsewhere and planned for again)."""
    configs, capacity, stream = story
    eng = Engine(reclaim_delay=0.0, options=EngineOptions(holds=holds))
    for flavor in FLAVORS.values():
        eng.set_flavor(flavor)
    for config in configs:
        eng.set_config(config)
    for m in MODELS:
        eng.set_cluster_node(m, {GPU: capacity[m]}, {"model": m})
    quotas = [c.name for c in configs if c.is_leaf]
    for i, (q, gpus, selector, priority) in enumerate(stream):
        facts = gpu_pod(quotas[q % len(quotas)], f"p{i}", gpus, selector, float(i))
        facts.priority = priority
        eng.observe_pod(facts)
        now = float(i)
        decisions = eng.decide(now)
        while decisions.evictions:
            event("evicted")
            evicted = [e.pod for e in decisions.evictions]
            claims = claims_of(eng, evicted)
            assert claims, f"evictions {evicted} for no waiting unit"
            assert set(evicted) <= set().union(*claims.values())
            carry_out(eng, evicted)
            decisions = eng.decide(now)
            admitted = {key for key, _ in decisions.admitted}
            assert set(claims) <= admitted, (claims, eng.pods[next(iter(claims))].reason)


@st.composite
def tight_forests(draw: st.DrawFn) -> Forest:
    """Two trees over the same namespaces (`test_forest_properties.forests`), the cluster
    holding just the default tree's top-level mins, the pods arriving quota by quota."""
    forest = draw(forests())
    if draw(st.booleans()):
        top = [c for c in forest.org.configs if c.parent is None]
        capacity = {r: max(1, sum(c.min.get(r, 0) for c in top)) for r in RESOURCES}
        pods = sorted(forest.org.pods, key=lambda p: p[0])
        forest = Forest(Scenario(forest.org.configs, capacity, pods), forest.projects)
    return forest


@PROPERTY
@given(tight_forests())
def test_every_eviction_is_followed_by_the_admission_of_the_unit_it_was_for_in_several_trees(
    forest: Forest,
) -> None:
    """(a) with two trees: a unit short in both is let in once the victims are gone, in
    every tree that charges it."""
    eng = forest_engine(forest, Engine(reclaim_delay=0.0))
    for i, (q, request, priority, preemptible) in enumerate(forest.org.pods):
        eng.observe_pod(
            pod(q, f"p{i}", request, priority=priority, created=i, preemptible=preemptible)
        )
        now = float(i)
        decisions = eng.decide(now)
        while decisions.evictions:
            event("evicted")
            evicted = [e.pod for e in decisions.evictions]
            claims = claims_of(eng, evicted)
            assert claims, f"evictions {evicted} for no waiting unit"
            assert set(evicted) <= set().union(*claims.values())
            carry_out(eng, evicted)
            decisions = eng.decide(now)
            admitted = {key for key, _ in decisions.admitted}
            assert set(claims) <= admitted, (claims, eng.pods[next(iter(claims))].reason)
