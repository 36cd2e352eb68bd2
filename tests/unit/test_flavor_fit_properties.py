"""The flavor bound (`flavor_fit.judge`) changes no decision (hypothesis).

`Placement.place` judges a flavor a pod is not charged to by an upper bound of
the runtimes it could get there, and moves the pod's demand there only when it may fit.
Over random trees (nested Cohorts, lending and borrowing limits, weights 0, clusters
smaller than the mins), 2 or 3 flavors (some deriving GPU memory, charged under its plain
name), random pods (nodeSelector or node affinity, priorities, non-preemptible ones) and
forests (a project tree over the same namespaces), an engine with the bound takes the
same decisions and leaves every pod in the same state on the same flavor, after every
event, as one that moves the demand to every flavor it tries; and once the reasons are
refreshed, with the same words.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotree import flavor_fit
from quotree.engine import Engine
from quotree.flavor_spec import FlavorConfig
from quotree.models import GPU_MEMORY, PREEMPTIBLE_LABEL, MemberConfig
from quotree.options import EngineOptions
from quotree.podfacts import PodFacts
from quotree.simulate import SimulatedEngine
from tests.unit.objects import cohort_config, quota_config

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GPU = "nvidia.com/gpu"
MODELS = ("a", "b", "c")


@dataclass
class World:
    flavors: list[FlavorConfig]
    configs: list[MemberConfig]
    namespaces: list[str]
    capacity: dict[str, int]  # GPUs per flavor's node pool
    cpu: int


def _entry(draw: st.DrawFn, model: str, low: int) -> dict[str, Any]:
    """One `spec.flavors` entry for the GPUs on `model`, with min `low`."""
    entry: dict[str, Any] = {"name": model, "min": {GPU: str(low)}}
    if draw(st.booleans()):
        entry["max"] = {GPU: str(low + draw(st.integers(0, 5)))}
    if draw(st.integers(0, 3)) == 0:
        entry["sharedWeight"] = {GPU: str(draw(st.integers(0, 2)))}
    if draw(st.integers(0, 3)) == 0:
        entry["lendingLimit"] = {GPU: str(draw(st.integers(0, low)))}
    if draw(st.integers(0, 3)) == 0:
        entry["borrowingLimit"] = {GPU: str(draw(st.integers(0, 3)))}
    return entry


@st.composite
def _tree(
    draw: st.DrawFn, models: list[str], prefix: str, tree: str | None, memory: bool
) -> tuple[list[MemberConfig], list[str]]:
    """Cohorts (each under the root or an earlier one) and quotas under any of them; a
    Cohort's mins are its children's plus some slack (rule 5), or, sometimes, below them
    (the Cohort is then invalid: its quotas wait)."""
    cohorts = [f"{prefix}c{c}" for c in range(draw(st.integers(0, 3)))]
    parents: dict[str, str | None] = {}
    for i, name in enumerate(cohorts):
        parents[name] = draw(st.sampled_from([None, *cohorts[:i]]))
    quotas = [f"{prefix}q{q}" for q in range(draw(st.integers(1, 4)))]
    mins: dict[str, dict[str, int]] = {}
    entries: dict[str, list[dict[str, Any]]] = {}
    for name in quotas:
        parents[name] = draw(st.sampled_from([None, *cohorts]))
        chosen = draw(st.permutations(models))[: draw(st.integers(1, len(models)))]
        entries[name] = [_entry(draw, m, draw(st.integers(0, 4))) for m in chosen]
        mins[name] = {"cpu": draw(st.integers(0, 6))}
        if memory and draw(st.booleans()):
            mins[name][GPU_MEMORY] = draw(st.integers(0, 8))
    for name in reversed(cohorts):  # children come after their parent
        total: dict[str, int] = {}
        for child, parent in parents.items():
            if parent != name:
                continue
            for key, amount in mins[child].items():
                total[key] = total.get(key, 0) + amount
            for entry in entries[child]:
                key = "@" + entry["name"]
                total[key] = total.get(key, 0) + int(entry["min"][GPU])
        slack = draw(st.sampled_from([0, 0, 1, 2, -1]))
        mins[name] = {k: max(v + slack, 0) for k, v in total.items() if not k.startswith("@")}
        entries[name] = [_entry(draw, m, max(total.get("@" + m, 0) + slack, 0)) for m in models]
    configs = []
    for name in [*cohorts, *quotas]:
        spec: dict[str, Any] = {
            "flavors": entries[name],
            "min": {k: str(v) for k, v in mins[name].items()},
        }
        if tree:
            spec["tree"] = tree
        build = quota_config if name in quotas else cohort_config
        configs.append(build(name, parents[name], **spec))
    return configs, quotas


@st.composite
def worlds(draw: st.DrawFn, forest: bool) -> World:
    models = list(draw(st.permutations(MODELS))[: draw(st.integers(2, 3))])
    memory = draw(st.booleans())
    flavors = [
        FlavorConfig(
            m,
            {"model": m},
            gpu_memory_per_gpu=draw(st.sampled_from([None, 1, 2])) if memory else None,
        )
        for m in models
    ]
    configs, quotas = draw(_tree(models, "", None, memory))
    if forest:
        projects, project_quotas = draw(_tree(models, "p", "projects", memory))
        covers: dict[str, list[str]] = {q: [] for q in project_quotas}
        for namespace in quotas:
            owner = draw(st.sampled_from([None, *project_quotas]))
            if owner is not None:
                covers[owner].append(namespace)
        configs.extend(
            dataclasses.replace(c, namespaces=tuple(covers[c.name])) if c.is_leaf else c
            for c in projects
        )
    # The clusters are small against the mins: saturated parents, scaled guarantees.
    capacity = {m: draw(st.integers(0, 10)) for m in models}
    return World(flavors, configs, quotas, capacity, draw(st.integers(0, 30)))


#: A pod's nodeSelector / required node affinity over the flavors' `model` label.
selectors = st.one_of(
    st.just(({}, ())),
    st.sampled_from(MODELS).map(lambda m: ({"model": m}, ())),
    st.sampled_from(MODELS).map(lambda m: ({}, (((("model", "NotIn", (m,)),),)))),
    st.sampled_from(MODELS).map(lambda m: ({}, (((("model", "In", (m, "a")),),)))),
)

# a pod arrives: quota index, GPUs, cpu, selector, priority, non-preemptible
arrivals = st.tuples(
    st.just("pod"),
    st.integers(0, 3),
    st.integers(1, 3),
    st.integers(0, 3),
    selectors,
    st.integers(0, 2),
    st.booleans(),
)
events = st.lists(
    st.one_of(
        arrivals,
        arrivals,
        arrivals,
        st.tuples(st.just("leave"), st.integers(0, 1000)),
        st.tuples(st.just("resize"), st.integers(0, 2), st.integers(0, 10)),
        st.tuples(st.just("decide"), st.integers(0, 40)),
    ),
    min_size=20,
    max_size=60,
)


def _engine(world: World, mode: str, delay: float, options: EngineOptions | None = None) -> Engine:
    eng: Engine = (
        SimulatedEngine(options)
        if mode == "simulate"
        else Engine(reclaim_delay=delay, options=options)
    )
    for flavor in world.flavors:
        eng.set_flavor(flavor)
    for config in world.configs:
        eng.set_config(config)
    for flavor in world.flavors:
        eng.set_cluster_node(
            f"pool-{flavor.name}", {GPU: world.capacity[flavor.name]}, dict(flavor.node_labels)
        )
    eng.set_cluster_node("cpu", {"cpu": world.cpu})
    return eng


def _run(
    eng: Engine, world: World, stream: list[tuple[Any, ...]], *, words: bool = True
) -> list[object]:
    """Play the stream; the decisions and pods after every event. `words` False: without
    the Pending reasons along the way, and with every reason refreshed at the end."""
    log: list[object] = []
    now = 0.0
    keys: list[str] = []
    for i, event in enumerate(stream):
        if event[0] == "pod":
            _, q, gpus, cpu, (selector, affinity), priority, np = event
            namespace = world.namespaces[q % len(world.namespaces)]
            request = {GPU: gpus, **({"cpu": cpu} if cpu else {})}
            facts = PodFacts(
                namespace,
                f"p{i}",
                request,
                gated=True,
                created=float(i),
                priority=priority,
                node_selector=selector,
                node_affinity=affinity,
                labels={PREEMPTIBLE_LABEL: "false"} if np else {},
            )
            eng.observe_pod(facts)
            keys.append(facts.key)
        elif event[0] == "leave":
            if keys:
                eng.forget_pod(keys.pop(event[1] % len(keys)))
        elif event[0] == "resize":
            flavor = world.flavors[event[1] % len(world.flavors)]
            eng.set_cluster_node(f"pool-{flavor.name}", {GPU: event[2]}, dict(flavor.node_labels))
        else:
            now += event[1]
            decisions = eng.decide(now)
            for eviction in decisions.evictions:
                if eviction.pod in keys and event[1] % 2:
                    keys.remove(eviction.pod)
                    eng.forget_pod(eviction.pod)  # the cluster carried it out
            log.append(
                (
                    decisions.admitted,
                    [(e.pod, e.kind, e.reason) for e in decisions.evictions],
                    decisions.labels,
                    decisions.pending if words else None,
                    decisions.flavors,
                )
            )
        log.append(
            sorted((r.key, r.state, r.flavor, r.reason if words else "") for r in eng.pods.values())
        )
    log.append(eng.decide(now + 100).admitted)
    if not words:
        eng.refresh_reasons()
    log.append(sorted((r.key, r.state, r.flavor, r.reason) for r in eng.pods.values()))
    return log


def _same_decisions(
    world: World, stream: list[tuple[Any, ...]], mode: str, delay: float, hold: bool
) -> None:
    logs = []
    for bound in (True, False):
        # The bound holds whatever pending pods hold (`hold.py`).
        eng = _engine(world, mode, delay, EngineOptions(holds=hold, bound_flavors=bound))
        # The words are compared refreshed, at the end: along the way, a quota whose room
        # only shrank keeps its pods' reasons until it is looked at again
        # (`Decider._admit_pending`), and the moves of the engine without the bound make it
        # look at some quotas sooner. (Found by a random draw: same decisions and states
        # after every event, one reason older in the engine with the bound.)
        logs.append(_run(eng, world, stream, words=False))
    assert logs[0] == logs[1]


@PROPERTY
@given(
    worlds(forest=False),
    events,
    st.sampled_from(["simulate", "operator"]),
    st.sampled_from([0.0, 5.0, 30.0]),
    st.booleans(),
)
def test_the_flavor_bound_changes_no_decision(
    world: World, stream: list[tuple[Any, ...]], mode: str, delay: float, hold: bool
) -> None:
    _same_decisions(world, stream, mode, delay, hold)


@PROPERTY
@given(
    worlds(forest=True),
    events,
    st.sampled_from(["simulate", "operator"]),
    st.sampled_from([0.0, 5.0, 30.0]),
    st.booleans(),
)
def test_the_flavor_bound_changes_no_decision_in_a_forest(
    world: World, stream: list[tuple[Any, ...]], mode: str, delay: float, hold: bool
) -> None:
    _same_decisions(world, stream, mode, delay, hold)


@PROPERTY
@given(worlds(forest=False), events, st.integers(1, 6))
def test_the_bound_is_above_every_runtime_the_moved_demand_gives(
    world: World, stream: list[tuple[Any, ...]], extra: int
) -> None:
    """`flavor_fit`'s bounds hold whatever demand is added on the quota's path: the quota's
    and every ancestor's runtime, and the quota's guarantee, stay at or below them."""
    eng = _engine(world, "simulate", 0.0)
    _run(eng, world, stream)
    tree = eng.tree
    for name in world.namespaces:
        member = tree.member(name)
        if member is None:
            continue
        path = tree.path_up(member)
        for resource in sorted(member.resources):
            ancestors, runtime, guarantee = flavor_fit._path_bounds(member, path, resource)
            tree.add_request(name, {resource: extra})
            tree.member(name)  # settle
            assert member.runtime[resource] <= runtime
            assert member.guarantee[resource] <= guarantee
            for ancestor, bound in zip(path, ancestors, strict=True):
                assert ancestor.runtime[resource] <= bound
            tree.add_request(name, {resource: -extra})
            tree.member(name)
