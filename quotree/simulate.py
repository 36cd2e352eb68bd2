"""`quotree simulate`: the operator's engine on YAML files, with no cluster.

Quotas, cohorts and nodes are loaded first, through the same configuration
rules the validating webhook applies and the same capacity rule the operator
uses (`capacity.node_allocatable`). Pods then arrive one at a time in
document order; after each, the engine admits, preempts within quotas and
reclaims (with no delay) until nothing changes, as the operator would.

Why the simulator's own engine (`SimulatedEngine`): with no cluster, an
eviction takes effect the moment it is decided, and the report lists the pods
that were evicted; both are the simulator's business, not the operator's.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from quotree.capacity import node_allocatable
from quotree.engine import Decisions, Engine, PodRecord, PodState
from quotree.models import (
    DEFAULT_TREE,
    GROUP,
    VERSION,
    ConfigError,
    NodeConfig,
    parse_flavor,
    parse_node,
    pod_facts,
)
from quotree.options import EngineOptions
from quotree.quantity import add_amounts, format_quantity
from quotree.report import render_tree
from quotree.rules import check_apply_forest, missing_flavor
from quotree.units import Units

__all__ = [
    "SimulatedEngine",
    "Simulation",
    "SimulationError",
    "load_documents",
    "render_table",
    "simulate",
    "simulate_documents",
    "table_report",
]

API_VERSION = f"{GROUP}/{VERSION}"


# libyaml's loader when PyYAML has it: ten times faster on a 100k-pod burst.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SimulationError(Exception):
    """Bad input: one line that names the object and the problem."""


@dataclass(slots=True)
class Simulation:
    """The engine after the whole input, ready to be reported."""

    engine: SimulatedEngine
    configs: list[NodeConfig]
    warnings: list[str] = field(default_factory=list)
    units: Units = field(default_factory=Units)  # the families quantities were written in


def load_documents(paths: Iterable[str | Path]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every YAML document of the files, in order, with where it came from (List kinds opened)."""
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SimulationError(f"{path}: cannot read: {exc.strerror or exc}") from None
        try:
            documents = list(yaml.load_all(text, Loader=_LOADER))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "invalid YAML"
            raise SimulationError(f"{path}{where}: {problem}") from None
        for index, doc in enumerate(documents, start=1):
            if doc is None:
                continue
            origin = f"{path} document {index}"
            if not isinstance(doc, Mapping):
                raise SimulationError(f"{origin}: expected a Kubernetes object, got {doc!r:.40}")
            if doc.get("kind") == "List":
                for item in doc.get("items") or ():
                    if not isinstance(item, Mapping):
                        raise SimulationError(f"{origin}: List item is not an object")
                    yield origin, item
            else:
                yield origin, doc


def _name(doc: Mapping[str, Any]) -> str:
    metadata = doc.get("metadata") or {}
    name = metadata.get("name", "(no name)") if isinstance(metadata, Mapping) else "(no name)"
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    return f"{doc.get('kind')} {namespace + '/' if namespace else ''}{name}"


class SimulatedEngine(Engine):
    """The engine with no cluster behind it: evictions take effect at once.

    `decide()` runs to a fixed point (an eviction frees room at once, which may
    admit or evict more), and the evicted pods are kept for the report.
    """

    def __init__(self, options: EngineOptions | None = None) -> None:
        super().__init__(reclaim_delay=0.0, options=options)
        self.finished: dict[str, PodRecord] = {}  # preempted / reclaimed, for the report

    def decide(self, now: float = 0.0) -> Decisions:
        out = Decisions()
        while self._decide_round(now, out):
            pass
        return out

    def _eviction_asked(self, record: PodRecord, kind: str, reason: str) -> None:
        # No cluster to wait for: the pod is gone at once, and its room with it.
        record.reason = reason
        self.forget_pod(record.key)
        record.state = PodState.PREEMPTED if kind == "Preempted" else PodState.RECLAIMED
        self.finished[record.key] = record

    def pod_records(self) -> Iterable[PodRecord]:
        return itertools.chain(self.pods.values(), self.finished.values())


def simulate(paths: Iterable[str | Path]) -> Simulation:
    """Run the input through the engine; raises SimulationError on bad input."""
    return simulate_documents(load_documents(paths))


def simulate_documents(documents: Iterable[tuple[str, Mapping[str, Any]]]) -> Simulation:
    """`simulate` on documents already read, each with where it came from (e.g. a cluster)."""
    engine = SimulatedEngine()
    pods: list[tuple[str, Mapping[str, Any]]] = []
    warnings: list[str] = []
    units = Units()
    for origin, doc in units.noting(documents):
        kind = doc.get("kind")
        if kind in ("Cohort", "ElasticQuota"):
            if doc.get("apiVersion") != API_VERSION:
                raise SimulationError(
                    f"{_name(doc)}: apiVersion must be {API_VERSION}, not {doc.get('apiVersion')!r}"
                )
            try:
                config = parse_node(doc)
            except ConfigError as exc:
                raise SimulationError(str(exc)) from None
            verdict = check_apply_forest(engine.tree_configs(), config)
            if not verdict.allowed:
                raise SimulationError(verdict.message)
            # Its warnings (a parent not there yet) are reported for the end state below.
            engine.set_config(config)
        elif kind == "ResourceFlavor":
            if doc.get("apiVersion") != API_VERSION:
                raise SimulationError(
                    f"{_name(doc)}: apiVersion must be {API_VERSION}, not {doc.get('apiVersion')!r}"
                )
            try:
                engine.set_flavor(parse_flavor(doc))
            except ConfigError as exc:
                raise SimulationError(str(exc)) from None
        elif kind == "Node":
            metadata = doc.get("metadata") or {}
            name = metadata.get("name") or origin
            counted = node_allocatable(doc)
            warnings.extend(counted.warnings)
            engine.set_cluster_node(str(name), counted.allocatable, metadata.get("labels") or {})
        elif kind == "Pod":
            pods.append((origin, doc))
        else:
            raise SimulationError(
                f"{origin}: unknown kind {kind!r} "
                "(want Cohort, ElasticQuota, ResourceFlavor, Node or Pod)"
            )
    for config in engine.all_configs().values():
        missing = missing_flavor(config, engine.flavors)
        if missing is not None:
            warnings.append(missing.message)
    for _, problem in sorted(engine.problems().items()):
        if problem.reason == "ParentNotFound":
            warnings.append(problem.message)
        elif problem.own:
            raise SimulationError(f"{problem.message} (rule broken: {problem.reason})")
    seen: set[str] = set()
    for index, (origin, doc) in enumerate(pods):
        try:
            facts = pod_facts(doc, default_created=float(index))
        except ConfigError as exc:
            raise SimulationError(str(exc)) from None
        if facts.key in seen:
            raise SimulationError(f"Pod {facts.key}: defined twice ({origin})")
        seen.add(facts.key)
        if facts.terminal:
            continue
        running = facts.node_name is not None or facts.phase == "Running"
        resolution = engine.resolve(facts.namespace, facts.labels)
        if resolution.error is not None:
            raise SimulationError(f"Pod {facts.key}: rejected: {resolution.error}")
        if (
            resolution.quota is not None
            and engine.tree_of(resolution.quota).config(resolution.quota) is None
        ):
            raise SimulationError(
                f"Pod {facts.key}: default quota {resolution.quota} is not defined"
            )
        facts.gated = resolution.quota is not None and not running
        if resolution.quota is None and not facts.node_name:
            # Unmanaged pods are scheduled at once: they hold capacity.
            facts.node_name = "(scheduled)"
        engine.observe_pod(facts)
        engine.decide(now=float(index))
    engine.refresh_reasons()
    return Simulation(engine, list(engine.all_configs().values()), warnings, units)


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {r: format_quantity(a, r) for r, a in sorted(amounts.items())}


def _pod_entry(record: PodRecord, engine: Engine | None = None) -> dict[str, Any]:
    """A pod's report; with several trees (`engine` given) also `quotas`: tree -> quota."""
    state = record.state
    entry: dict[str, Any] = {
        "quota": record.quota,
        "state": str(state),
        "capacity": record.capacity if state is PodState.ADMITTED else None,
        "reason": record.reason,
    }
    if record.flavor is not None:
        # The flavor it is charged to (pending: the one it waits on; docs/design.md).
        entry["flavor"] = record.flavor
    if engine is not None:
        charged = [q for q in (record.quota, *record.also) if q]
        entry["quotas"] = {_tree_of(engine, q): q for q in charged}
    return entry


def _tree_of(engine: Engine, name: str) -> str:
    config = engine.tree_of(name).config(name)
    return config.tree if config is not None else DEFAULT_TREE


def to_json(sim: Simulation) -> dict[str, Any]:
    """The stable JSON report of the API contract."""
    engine = sim.engine
    nodes: dict[str, Any] = {}
    for config in sorted(sim.configs, key=lambda c: c.name):
        report = engine.report(config.name)
        nodes[config.name] = {
            "kind": config.kind,
            "tree": config.tree,
            "namespace": config.namespace,
            "parent": config.parent,
            "min": _quantities(config.min),
            "max": _quantities(config.max),
            "request": _quantities(report.request),
            "runtime": _quantities(report.runtime),
            "used": _quantities(report.used),
            "admittedPods": report.admitted_pods,
            "pendingPods": report.pending_pods,
            "valid": report.problem is None,
            "problem": report.problem.message if report.problem else None,
        }
    forest = engine if engine.forest else None
    pods = {
        record.key: _pod_entry(record, forest)
        for record in sorted(engine.pod_records(), key=lambda r: r.arrival)
    }
    return {"capacity": _quantities(engine.tree.capacity), "nodes": nodes, "pods": pods}


def render_json(sim: Simulation) -> str:
    return json.dumps(to_json(sim), indent=2, sort_keys=False)


def table_report(sim: Simulation) -> dict[str, Any]:
    """What the table shows: the JSON report with quantities in the units they were written
    in, each scaled guarantee (`scaledMin`: below min when the cluster shrank) and what
    unmanaged pods hold (`unmanaged`, taken out of the capacity the tree shares)."""
    data = to_json(sim)
    engine = sim.engine
    for name, entry in data["nodes"].items():
        tree = engine.tree_of(name)
        node, config = tree.node(name), tree.config(name)
        scaled = {}
        if node is not None and config is not None:
            for resource, low in config.min.items():
                guarantee = node.guarantee.get(resource, low)
                if guarantee < low:
                    scaled[resource] = format_quantity(guarantee, resource)
        entry["scaledMin"] = scaled
    held: dict[str, int] = {}
    for record in engine.pod_records():
        if record.state is PodState.UNMANAGED and record.facts.node_name:
            add_amounts(held, record.request)
    capacity = engine.tree.capacity
    data["unmanaged"] = {
        r: format_quantity(held[r], r) for r in sorted(capacity) if held.get(r, 0) > 0
    }
    return sim.units.restyle_report(data)


def render_table(sim: Simulation) -> str:
    """The tree the way a person reads it (quotree/report.py, shared with `kubectl quotree`)."""
    return render_tree(table_report(sim), sim.warnings)
