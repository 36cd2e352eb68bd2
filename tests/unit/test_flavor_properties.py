"""Invariants of resource flavors over random flavors, quotas and pod streams (hypothesis)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotree.engine import Engine, PodState
from quotree.flavor_spec import FlavorConfig
from quotree.flavors import allowed_flavors, allows, charge
from quotree.models import MemberConfig, parse_member
from quotree.options import EngineOptions
from quotree.podfacts import PodFacts
from quotree.quantity import UNLIMITED
from quotree.simulate import SimulatedEngine
from tests.unit.builders import pod
from tests.unit.objects import quota_config

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GPU = "nvidia.com/gpu"
MODELS = ("a", "b", "c")
FLAVORS = {m: FlavorConfig(m, {"model": m}) for m in MODELS}


selectors = st.one_of(
    st.just(({}, ())),
    st.sampled_from(MODELS).map(lambda m: ({"model": m}, ())),
    st.sampled_from(MODELS).map(lambda m: ({}, (((("model", "NotIn", (m,)),),)))),
)


def gpu_pod(ns: str, name: str, gpus: int, selector: tuple[Any, Any], created: float) -> PodFacts:
    node_selector, affinity = selector
    return pod(ns, name, {GPU: gpus}, created=created, selector=node_selector, affinity=affinity)


@PROPERTY
@given(
    order=st.permutations(MODELS),
    maxes=st.fixed_dictionaries({m: st.one_of(st.none(), st.integers(0, 6)) for m in MODELS}),
    capacity=st.fixed_dictionaries({m: st.integers(0, 8) for m in MODELS}),
    pods=st.lists(st.tuples(st.integers(1, 3), selectors), min_size=1, max_size=15),
)
def test_charged_flavor_is_the_first_allowed_that_fits(
    order: list[str],
    maxes: dict[str, int | None],
    capacity: dict[str, int],
    pods: list[tuple[int, tuple[Any, Any]]],
) -> None:
    # One quota on its own: it fits flavor f when used + request <= min(max, capacity of f).
    entries: list[dict[str, Any]] = []
    for m in order:
        entry: dict[str, Any] = {"name": m, "min": {GPU: "0"}}  # names the resource: split
        if maxes[m] is not None:
            entry["max"] = {GPU: str(maxes[m])}
        entries.append(entry)
    eng = SimulatedEngine()
    for flavor in FLAVORS.values():
        eng.set_flavor(flavor)
    eng.set_config(quota_config("team", flavors=entries))
    for m in MODELS:
        eng.set_cluster_node(m, {GPU: capacity[m]}, {"model": m})
    limit = {m: min(UNLIMITED if maxes[m] is None else maxes[m], capacity[m]) for m in MODELS}
    eng.refresh()
    for i, (gpus, selector) in enumerate(pods):
        member = eng.tree.member("team")
        assert member is not None
        used = {m: member.used[f"{GPU}@{m}"] for m in MODELS}
        facts = gpu_pod("team", f"p{i}", gpus, selector, float(i))
        eng.observe_pod(facts)
        out = eng.decide(float(i))
        allowed = [m for m in order if allows(FLAVORS[m], facts)]
        fits = [m for m in allowed if used[m] + gpus <= limit[m]]
        record = eng.pods[f"team/p{i}"]
        if fits:
            assert record.state is PodState.ADMITTED
            assert record.flavor == fits[0]
            assert out.flavors[record.key] == (fits[0], {"model": fits[0]})
        else:
            assert record.state is PodState.PENDING
            assert record.flavor == (allowed[0] if allowed else None)
    # Every admitted pod sits on a flavor its own selector allows, charged there only.
    member = eng.tree.member("team")
    assert member is not None
    for m in MODELS:
        on_m = [r for r in eng.pods.values() if r.state is PodState.ADMITTED and r.flavor == m]
        assert member.used[f"{GPU}@{m}"] == sum(r.request[f"{GPU}@{m}"] for r in on_m)
        assert member.used[f"{GPU}@{m}"] <= limit[m]
        assert all(allows(FLAVORS[m], r.facts) for r in on_m)


@st.composite
def flavored_trees(draw: st.DrawFn) -> list[MemberConfig]:
    n = draw(st.integers(1, 4))
    configs = [
        parse_member(
            {
                "kind": "Cohort",
                "metadata": {"name": "org"},
                "spec": {
                    "flavors": [
                        {"name": m, "min": {GPU: str(draw(st.integers(4 * n, 4 * n + 4)))}}
                        for m in MODELS
                    ]
                },
            }
        )
    ]
    for q in range(n):
        entries = []
        for m in draw(st.permutations(MODELS))[: draw(st.integers(1, 3))]:
            entry: dict[str, Any] = {"name": m, "min": {GPU: str(draw(st.integers(0, 4)))}}
            if draw(st.booleans()):
                entry["max"] = {GPU: str(4 + draw(st.integers(0, 6)))}
            if draw(st.booleans()):
                entry["sharedWeight"] = {GPU: str(draw(st.integers(0, 3)))}
            entries.append(entry)
        configs.append(quota_config(f"q{q}", draw(st.sampled_from(["org", None])), flavors=entries))
    return configs


def runtimes(eng: Engine) -> dict[tuple[str, str], tuple[int, int, int]]:
    eng.tree.settle()
    return {
        (n.name, r): (n.demand[r], n.runtime[r], n.used[r])
        for n in eng.tree.live_members()
        for r in n.resources
    }


@PROPERTY
@given(
    configs=flavored_trees(),
    stream=st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 3), selectors, st.integers(0, 3)),
        min_size=1,
        max_size=30,
    ),
    rnd=st.randoms(use_true_random=False),
    simulated=st.booleans(),
    hold=st.booleans(),
)
def test_incremental_equals_full_recomputation_with_flavors(
    configs: list[MemberConfig],
    stream: list[tuple[int, int, tuple[Any, Any], int]],
    rnd: random.Random,
    simulated: bool,
    hold: bool,
) -> None:
    options = EngineOptions(holds=hold)
    eng: Engine = (
        SimulatedEngine(options) if simulated else Engine(reclaim_delay=0.0, options=options)
    )
    for flavor in FLAVORS.values():
        eng.set_flavor(flavor)
    for config in configs:
        eng.set_config(config)
    for m in MODELS:
        eng.set_cluster_node(m, {GPU: 8}, {"model": m})
    quotas = [c.name for c in configs if c.is_leaf]
    live: list[str] = []
    for i, (q, gpus, selector, priority) in enumerate(stream):
        name = quotas[q % len(quotas)]
        facts = gpu_pod(name, f"p{i}", gpus, selector, float(i))
        facts.priority = priority
        eng.observe_pod(facts)
        live.append(facts.key)
        if rnd.random() < 0.25:
            eng.forget_pod(live.pop(rnd.randrange(len(live))))
        if rnd.random() < 0.15:
            m = rnd.choice(MODELS)
            eng.set_cluster_node(m, {GPU: rnd.randrange(0, 12)}, {"model": m})
        if rnd.random() < 0.1:
            m = rnd.choice(MODELS)
            # A flavor whose nodes change: its capacity and the pods of quotas naming it.
            eng.set_flavor(FlavorConfig(m, {"model": rnd.choice(MODELS)}))
        if rnd.random() < 0.6:
            eng.decide(float(i))
            for key in [r.key for r in eng.pods.values() if r.state is PodState.ADMITTED]:
                record = eng.pods[key]
                if record.flavor is not None:
                    assert set(record.request) == {f"{GPU}@{record.flavor}"}
        check_holds(eng)
    incremental = runtimes(eng)
    eng.tree.recompute()
    assert runtimes(eng) == incremental


def check_holds(eng: Engine) -> None:
    """Every quota's hold, against its pods counted from scratch (`hold.py`): never above
    what its pending pods waiting on another flavor would take there, never taking its
    demand above its min; exactly min(P, min - charged); with holds off, none."""
    waiting: dict[tuple[str, str], int] = {}
    charged: dict[tuple[str, str], int] = {}
    for record in eng.pods.values():
        if record.quota is None:
            continue
        for resource, amount in record.request.items():
            key = (record.quota, resource)
            charged[key] = charged.get(key, 0) + amount
        config = eng.tree.config(record.quota)
        if record.state is not PodState.PENDING or config is None:
            continue
        for flavor in allowed_flavors(config, record.facts, eng.flavors):
            if flavor == record.flavor:
                continue
            for resource, amount in charge(
                config, record.facts.request, eng.flavors[flavor]
            ).items():
                if resource.endswith(f"@{flavor}"):
                    key = (record.quota, resource)
                    waiting[key] = waiting.get(key, 0) + amount
    for name, config in eng.tree.configs().items():
        held = eng.holds.held(name)
        if not eng.holds.enabled:
            assert held == {}
            continue
        for resource in set(held) | {r for q, r in waiting if q == name}:
            key = (name, resource)
            room = max(0, config.min.get(resource, 0) - charged.get(key, 0))
            assert held.get(resource, 0) <= min(waiting.get(key, 0), room)
            assert held.get(resource, 0) == min(waiting.get(key, 0), room)
            assert eng.tree.quota_request(name).get(resource, 0) == charged.get(key, 0) + held.get(
                resource, 0
            )
