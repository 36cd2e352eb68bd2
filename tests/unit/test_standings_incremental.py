"""The in-quota / over-quota labels kept incrementally (`standings.Standings`) equal the
labels computed from scratch (`admission.standings`), whatever pods come and go and however
the guarantee moves; in the engine, after every decision."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from quotree.admission import standings
from quotree.groups import GroupSpec
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState, QuotaPods
from tests.unit.builders import engine, pod, quota
from tests.unit.test_pod_group_properties import grouped
from tests.unit.test_properties import (
    PROPERTY,
    Scenario,
    _decision_log,
    _scenario_engine,
    events,
    lender_stories,
    scenarios,
)

RESOURCES = ("x", "y", "z")

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.integers(0, 3),  # priority
            st.fixed_dictionaries({r: st.integers(0, 6) for r in RESOURCES}),
        ),
        st.tuples(st.just("remove"), st.integers(0, 1000), st.just({})),
        st.tuples(
            st.just("guarantee"),
            st.integers(0, 1),
            st.fixed_dictionaries({r: st.integers(0, 20) for r in RESOURCES}),
        ),
        st.tuples(st.just("govern"), st.integers(1, 7), st.just({})),
    ),
    max_size=60,
)


def _from_scratch(member: SimpleNamespace, pods: QuotaPods) -> dict[str, str]:
    return {record.key: label for record, label in standings(member, pods)}  # type: ignore[arg-type]


@PROPERTY
@given(ops)
def test_incremental_labels_equal_the_labels_from_scratch(
    steps: list[tuple[str, int, dict[str, int]]],
) -> None:
    pods = QuotaPods("q")
    member = SimpleNamespace(resources=frozenset(RESOURCES), guarantee=dict.fromkeys(RESOURCES, 8))
    pods.standings.set_guarantee(member.guarantee, member.resources)
    seq = 0
    for kind, number, amounts in steps:
        if kind == "add":
            seq += 1
            facts = pod("q", f"p{seq}", {r: a for r, a in amounts.items() if a}, priority=number)
            record = PodRecord(facts, "q", PodState.ADMITTED, seq, admitted_seq=seq)
            pods.add_admitted(record)
        elif kind == "remove" and pods.admitted:
            keys = sorted(pods.admitted)
            pods.remove_admitted(pods.admitted[keys[number % len(keys)]])
        elif kind == "guarantee":
            member.guarantee = dict(amounts)
        elif kind == "govern":
            member.resources = frozenset(r for i, r in enumerate(RESOURCES) if number >> i & 1)
            member.guarantee = {r: member.guarantee.get(r, 0) for r in RESOURCES}
        pods.standings.set_guarantee(member.guarantee, member.resources)
        changed = pods.standings.take_changed()
        expected = _from_scratch(member, pods)
        assert {key: pods.standings.label(key) for key in pods.admitted} == expected
        assert changed <= set(pods.admitted)


@PROPERTY
@given(st.one_of(scenarios(), lender_stories()), events, st.sampled_from([None, 0.0, 30.0]))
def test_every_label_the_engine_keeps_is_the_label_from_scratch(
    scenario: Scenario, stream: list[tuple[str, int]], delay: float | None
) -> None:
    """After the engine's last decision, in the simulator and in operator mode, every admitted
    pod carries the label a full recomputation gives it (its quota touched last)."""
    eng = _scenario_engine(scenario, delay)
    _decision_log(eng, scenario, stream)
    for name, pods in eng.ledger.quota_pods.items():
        eng.tree_of(name).refresh(name)
        member = eng.tree_of(name).member(name)
        if member is None or not member.is_quota:
            continue
        pods.standings.set_guarantee(member.guarantee, member.resources)
        expected = _from_scratch(member, pods)  # type: ignore[arg-type]
        assert {key: pods.standings.label(key) for key in pods.admitted} == expected


@PROPERTY
@given(grouped())
def test_a_groups_pods_take_its_place_in_the_labels_order(
    case: tuple[Scenario, list[PodFacts]],
) -> None:
    """With pod groups (admitted together, sharing the group's place in the order), the
    labels kept incrementally stay those computed from scratch after every decision."""
    scenario, arrivals = case
    eng = engine(*scenario.configs, capacity=scenario.capacity)
    for i, facts in enumerate(arrivals):
        eng.observe_pod(facts)
        eng.decide(float(i))
        for name, pods in eng.ledger.quota_pods.items():
            eng.tree_of(name).refresh(name)
            member = eng.tree_of(name).member(name)
            if member is None or not member.is_quota:
                continue
            pods.standings.set_guarantee(member.guarantee, member.resources)
            expected = _from_scratch(member, pods)  # type: ignore[arg-type]
            assert {key: pods.standings.label(key) for key in pods.admitted} == expected


def test_a_groups_pods_are_labelled_in_the_groups_place_whatever_their_names() -> None:
    """A group's pods share one place in the order (then go by name): the kept labels are
    those from scratch even when the pods' names sort apart from their admission order."""
    eng = engine(quota("a", min={"x": 1}), capacity={"x": 10})
    spec = GroupSpec("g", 3, 3)
    for i, name in enumerate(("c-0", "b-1", "a-2")):
        eng.observe_pod(dataclasses.replace(pod("a", name, {"x": 1}, created=i), group=spec))
    eng.decide(0.0)
    labels = {key: record.standing for key, record in eng.pods.items()}
    assert labels == {"a/a-2": "in-quota", "a/b-1": "over-quota", "a/c-0": "over-quota"}
    pods = eng.ledger.quota_pods["a"]
    assert {key: pods.standings.label(key) for key in pods.admitted} == labels
