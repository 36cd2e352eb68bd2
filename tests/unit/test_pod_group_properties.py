"""Properties of pod groups on random trees and pod streams (the scenarios of
test_properties.py, with their pods cut into groups): a group is never partly admitted
and never partly evicted, an elastic group is admitted at its min or more, and the
incremental runtimes equal a full recomputation."""

from __future__ import annotations

import dataclasses
import random

from builders import cohort, engine, pod, quota
from hypothesis import event, given
from hypothesis import strategies as st

from quotree.engine import Engine, PodState
from quotree.groups import GroupSpec
from quotree.models import MemberConfig
from quotree.podfacts import PodFacts
from tests.unit.test_properties import PROPERTY, Scenario, runtime_map, scenarios, used_map


@st.composite
def grouped(draw: st.DrawFn) -> tuple[Scenario, list[PodFacts]]:
    """A scenario whose pods are cut, in order, into runs of 1 to 4: a run of 2 or more
    is a group (all in the first pod's quota, with its priority); some are elastic, some
    declare one pod more than arrive (they stay incomplete)."""
    scenario = draw(scenarios())
    pods: list[PodFacts] = []
    index = 0
    while index < len(scenario.pods):
        size = draw(st.integers(1, 4))
        run = scenario.pods[index : index + size]
        q, _, priority, preemptible = run[0]
        declared = len(run) + (1 if draw(st.integers(0, 5)) == 0 else 0)
        least = draw(st.integers(1, declared)) if draw(st.booleans()) else declared
        for offset, (_, request, _, _) in enumerate(run):
            i = index + offset
            facts = pod(q, f"p{i}", request, priority=priority, created=i, preemptible=preemptible)
            if len(run) > 1:
                facts = dataclasses.replace(facts, group=GroupSpec(f"g{index}", declared, least))
            pods.append(facts)
        index += size
    return scenario, pods


def admitted_by_group(eng: Engine) -> dict[str, int]:
    counts = dict.fromkeys(eng.groups, 0)
    for record in eng.pods.values():
        if record.group is not None and record.state is PodState.ADMITTED:
            counts[record.group] += 1
    return counts


@PROPERTY
@given(grouped())
def test_a_group_is_never_partly_admitted(case: tuple[Scenario, list[PodFacts]]) -> None:
    scenario, pods = case
    eng = engine(*scenario.configs, capacity=scenario.capacity)
    for i, facts in enumerate(pods):
        eng.observe_pod(facts)
        eng.decide(float(i))
        for key, count in admitted_by_group(eng).items():
            view = eng.groups[key]
            # None, or at least its min (an elastic group's others join one by one);
            # a group that is not elastic: all of it.
            assert count == 0 or count >= view.min, (key, count, view)
            if count:
                event("a group admitted")
            if view.min == view.size:
                assert count in (0, view.size), (key, count, view)


@PROPERTY
@given(grouped())
def test_a_group_is_never_partly_evicted(case: tuple[Scenario, list[PodFacts]]) -> None:
    scenario, pods = case
    eng = engine(*scenario.configs, capacity=scenario.capacity, instant_evictions=False)
    for i, facts in enumerate(pods):
        eng.observe_pod(facts)
        out = eng.decide(float(i))
        for eviction in out.evictions:
            record = eng.pods[eviction.pod]
            if eviction.group is None or eviction.job is not None:
                continue
            view = eng.groups[eviction.group]
            if view.min < view.size:
                continue  # an elastic group's joined pods go alone
            # Every admitted pod of its group is being evicted, in this round or before.
            event("a group's pods evicted")
            members = [eng.pods[k] for k in view.pods]
            assert all(m.evicting for m in members if m.state is PodState.ADMITTED), record
        for eviction in out.evictions:  # the cluster carries them out
            eng.forget_pod(eviction.pod)


@PROPERTY
@given(grouped(), st.randoms(use_true_random=False))
def test_incremental_equals_full_recomputation_with_groups(
    case: tuple[Scenario, list[PodFacts]], rnd: random.Random
) -> None:
    scenario, pods = case
    eng = engine(*scenario.configs, capacity=scenario.capacity)
    runtime_map(eng)
    live: list[str] = []
    for i, facts in enumerate(pods):
        eng.observe_pod(facts)
        live.append(facts.key)
        if rnd.random() < 0.3 and live:
            eng.forget_pod(live.pop(rnd.randrange(len(live))))
        if rnd.random() < 0.5:
            eng.decide(float(i))
    incremental = runtime_map(eng)
    used = used_map(eng)
    eng.tree.recompute()
    assert runtime_map(eng) == incremental
    assert used_map(eng) == used


@st.composite
def contested(
    draw: st.DrawFn,
) -> tuple[list[MemberConfig], int, list[list[PodFacts]], list[PodFacts]]:
    """A tree with no room to spare: low-priority groups (of quota b) fill the whole
    capacity, then a unit of quota a (a group or a pod) comes that needs some of it back.
    Either in one quota (a is b: in-quota preemption, the newcomer of higher priority), or
    in two under a Cohort where b borrows a's min (reclaim, a within its min)."""
    groups: list[list[PodFacts]] = []
    total = 0
    for g in range(draw(st.integers(1, 4))):
        size, each = draw(st.integers(2, 4)), draw(st.integers(1, 3))
        groups.append([member_pod("b", f"g{g}-{i}", f"g{g}", size, each, g) for i in range(size)])
        total += size * each
    reclaim = draw(st.booleans())
    if reclaim:
        lent = draw(st.integers(1, total - 1)) if total > 1 else 1
        configs = [
            cohort("c", min=total, max=total),
            quota("a", "c", min=lent, max=total),
            quota("b", "c", min=total - lent, max=total),
        ]
        ns, priority, bound = "a", 0, lent
    else:
        configs = [quota("b", min=total, max=total)]
        ns, priority, bound = "b", 10, total
    size = draw(st.integers(1, 3))
    each = draw(st.integers(1, max(1, bound // size)))
    if size * each > bound:
        size = 1
    newcomer = [
        member_pod(ns, f"new-{i}", "new" if size > 1 else None, size, each, 10, priority)
        for i in range(size)
    ]
    return configs, total, groups, newcomer


def member_pod(
    ns: str, name: str, group: str | None, size: int, each: int, created: int, priority: int = 0
) -> PodFacts:
    facts = pod(ns, name, {"x": each}, priority=priority, created=created)
    if group is None:
        return facts
    return dataclasses.replace(facts, group=GroupSpec(group, size, size))


@PROPERTY
@given(contested())
def test_groups_are_evicted_whole_when_room_is_taken_back(
    case: tuple[list[MemberConfig], int, list[list[PodFacts]], list[PodFacts]],
) -> None:
    configs, total, groups, newcomer = case
    eng = engine(*configs, capacity={"x": total}, instant_evictions=False)
    for i, run in enumerate(groups):
        for facts in run:
            eng.observe_pod(facts)
        eng.decide(float(i))
    assert all(r.state is PodState.ADMITTED for r in eng.pods.values())
    for facts in newcomer:
        eng.observe_pod(facts)
    evicted: set[str] = set()
    for step in range(3):
        out = eng.decide(10.0 + step)
        for eviction in out.evictions:
            assert eviction.group is not None, eviction  # b has only groups
            view = eng.groups[eviction.group]
            members = [eng.pods[k] for k in view.pods]
            assert all(m.evicting for m in members if m.state is PodState.ADMITTED), eviction
            evicted.add(eviction.group)
        for eviction in out.evictions:
            eng.forget_pod(eviction.pod)
    # b held everything and the newcomer fits in its quota: some group had to go.
    assert evicted
    event(f"groups evicted: {len(evicted)}")
    assert all(eng.pods[f.key].state is PodState.ADMITTED for f in newcomer)
    counts = recount(eng)
    for name in ("a", "b"):
        report = eng.report(name)
        assert (report.pending_groups, report.admitted_groups) == counts.get(name, (0, 0))


def recount(eng: Engine) -> dict[str, tuple[int, int]]:
    """Pending and admitted groups per quota, counted from the groups themselves."""
    counts: dict[str, tuple[int, int]] = {}
    for view in eng.groups.values():
        if view.quota is not None:
            pending, admitted = counts.get(view.quota, (0, 0))
            if view.state == "admitted":
                admitted += 1
            else:
                pending += 1
            counts[view.quota] = (pending, admitted)
    return counts


@PROPERTY
@given(grouped(), st.randoms(use_true_random=False))
def test_group_and_pending_counts_equal_a_recount(
    case: tuple[Scenario, list[PodFacts]], rnd: random.Random
) -> None:
    scenario, pods = case
    eng = engine(*scenario.configs, capacity=scenario.capacity, instant_evictions=False)
    live: list[str] = []
    quotas = [c.name for c in scenario.configs if c.is_leaf]
    for i, facts in enumerate(pods):
        eng.observe_pod(facts)
        live.append(facts.key)
        if rnd.random() < 0.3 and live:
            eng.forget_pod(live.pop(rnd.randrange(len(live))))
        out = eng.decide(float(i))
        for eviction in out.evictions:
            eng.forget_pod(eviction.pod)
            if eviction.pod in live:
                live.remove(eviction.pod)
        counts = recount(eng)
        for name in quotas:
            report = eng.report(name)
            assert (report.pending_groups, report.admitted_groups) == counts.get(name, (0, 0))
            waiting = sum(
                1
                for r in eng.pods.values()
                if r.state is PodState.PENDING
                and (r.quota or eng.resolve(r.facts.namespace, r.facts.labels).quota) == name
            )
            assert report.pending_pods == waiting, name
