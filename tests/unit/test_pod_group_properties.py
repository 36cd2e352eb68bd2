"""Properties of pod groups on random trees and pod streams (the scenarios of
test_properties.py, with their pods cut into groups): a group is never partly admitted
and never partly evicted, an elastic group is admitted at its min or more, and the
incremental runtimes equal a full recomputation."""

from __future__ import annotations

import dataclasses
import random

from builders import engine, pod
from hypothesis import event, given
from hypothesis import strategies as st

from quotree.engine import Engine, PodState
from quotree.groups import GroupSpec
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
