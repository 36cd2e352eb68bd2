"""`quotree simulate`: the operator's engine on YAML files, with no cluster.

The input is read as `kubectl apply -f` reads it (`quotree.manifests`) and each
document's shape is checked before anything reads it (`quotree.schemas`): bad
input is one line that names the file, the document, the object and the field.
Namespaces are noted and skipped; PriorityClasses give pods their priority
(`quotree.priority_classes`); Deployments, ReplicaSets, StatefulSets and Jobs
become the pods their controllers would create, and a CronJob the Job it would
create next (`quotree.workloads`); Kubernetes' PodGroups (with the Workloads whose
templates they name) group the pods that name them (`quotree.native_groups`). Kinds the
simulator does not read are skipped and named once in a note (`quotree.documents`); the
quota objects of Kueue, capacity scheduling and Koordinator are converted as `kubectl
quotree import` converts them (`quotree.importer`), and the conversion noted; a document
without `apiVersion`, `kind` or `metadata.name` is refused, as kubectl refuses it.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from quotree.capacity import node_allocatable
from quotree.documents import Handling, Skipped, classify
from quotree.engine import Decisions, Engine, PodRecord, PodState
from quotree.flavor_spec import parse_flavor
from quotree.groups import job_facts
from quotree.importer import convert
from quotree.manifests import InputError as SimulationError
from quotree.manifests import load_documents
from quotree.models import DEFAULT_TREE, ConfigError, MemberConfig, parse_member
from quotree.native_groups import label_disagreement, read_documents
from quotree.options import EngineOptions
from quotree.podfacts import pod_facts
from quotree.priority_classes import PriorityClasses, PriorityError
from quotree.quantity import add_amounts, format_quantity
from quotree.report import render_tree
from quotree.rules import check_apply_forest, missing_flavor
from quotree.units import Units
from quotree.workloads import (
    JobPods,
    cronjob_job,
    deployment_pods,
    job_pods,
    replicaset_pods,
    statefulset_pods,
)

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

_WORKLOADS = {
    "Deployment": deployment_pods,
    "ReplicaSet": replicaset_pods,
    "StatefulSet": statefulset_pods,
}


@dataclass(slots=True)
class Simulation:
    """The engine after the whole input, ready to be reported."""

    engine: SimulatedEngine
    configs: list[MemberConfig]
    warnings: list[str] = field(default_factory=list)
    units: Units = field(default_factory=Units)  # the families quantities were written in
    #: The Namespace objects given (noted: a pod's namespace need not be among them).
    namespaces: list[str] = field(default_factory=list)
    #: The Jobs given, with the pods each runs at once.
    jobs: list[JobPods] = field(default_factory=list)
    #: What the input held that is not simulated as written: the objects converted from
    #: other quota systems, the fields they lose, the kinds skipped (standard error).
    notes: list[str] = field(default_factory=list)


class SimulatedEngine(Engine):
    """The engine with no cluster behind it: evictions take effect at once.

    `decide()` decides, carries out the evictions it asked for (the pods are gone, with
    their room), and decides again, as the operator does with a cluster behind it, until
    nothing more is evicted; the evicted pods are kept for the report.
    """

    def __init__(self, options: EngineOptions | None = None) -> None:
        super().__init__(reclaim_delay=0.0, options=options)
        self.finished: dict[str, PodRecord] = {}  # preempted / reclaimed, for the report

    def decide(self, now: float = 0.0) -> Decisions:
        """Decide, carry the evictions out, decide again, until nothing is evicted."""
        out = Decisions()
        while True:
            step = self.decider.decide(now)
            out.merge(step)
            if not step.evictions:
                return out
            for eviction in step.evictions:
                record = self.ledger.pods.get(eviction.pod)
                if record is not None:
                    self._gone(record, eviction.kind, eviction.reason)

    def _gone(self, record: PodRecord, kind: str, reason: str) -> None:
        # No cluster to wait for: the pod is gone at once, and its room with it.
        record.reason = reason
        self.forget_pod(record.key)
        record.state = PodState.PREEMPTED if kind == "Preempted" else PodState.RECLAIMED
        self.finished[record.key] = record

    def pod_records(self) -> Iterable[PodRecord]:
        return itertools.chain(self.pods.values(), self.finished.values())


def simulate(
    paths: Iterable[str | Path], *, recursive: bool = False, stdin: BinaryIO | None = None
) -> Simulation:
    """Run the input (files, directories, `-`) through the engine; SimulationError on bad input."""
    return simulate_documents(load_documents(paths, recursive=recursive, stdin=stdin))


def _configure(
    engine: SimulatedEngine, origin: str, kind: str, doc: Mapping[str, Any], warnings: list[str]
) -> None:
    """A Cohort, ElasticQuota, ResourceFlavor or Node into the engine."""
    try:
        if kind == "ResourceFlavor":
            engine.set_flavor(parse_flavor(doc))
            return
        if kind == "Node":
            metadata = doc.get("metadata") or {}
            counted = node_allocatable(doc)
            warnings.extend(counted.warnings)
            name = str(metadata.get("name") or origin)
            engine.set_cluster_node(name, counted.allocatable, metadata.get("labels") or {})
            return
        config = parse_member(doc)
    except ConfigError as exc:
        raise SimulationError(f"{origin}: {exc}") from None
    verdict = check_apply_forest(engine.tree_configs(), config)
    if not verdict.allowed:
        raise SimulationError(f"{origin}: {verdict.message}")
    # Its warnings (a parent not there yet) are reported for the end state, once.
    engine.set_config(config)


def simulate_documents(documents: Iterable[tuple[str, Mapping[str, Any]]]) -> Simulation:
    """`simulate` on documents already read, each with where it came from (e.g. a cluster)."""
    engine = SimulatedEngine()
    sim = Simulation(engine, [])
    pods: list[tuple[str, Mapping[str, Any]]] = []
    native: list[tuple[str, Mapping[str, Any]]] = []  # PodGroups and Workloads
    classes = PriorityClasses()
    skipped, foreign = Skipped(), []
    for origin, given in sim.units.noting(documents):
        handling = classify(origin, given)
        if handling is Handling.SKIP:
            skipped.add(given)
            continue
        if handling is Handling.CONVERT:
            foreign.append((origin, given))
            continue
        kind, doc = str(given["kind"]), given
        if kind == "CronJob":
            kind, doc = "Job", cronjob_job(given)
        try:
            if kind == "Pod":
                pods.append((origin, doc))
            elif kind in _WORKLOADS:
                pods.extend((origin, pod) for pod in _WORKLOADS[kind](doc))
            elif kind == "Job":
                job = job_pods(doc)
                sim.jobs.append(job)
                # A Job's pods form a group (docs/reference/pods.md, "Pod groups").
                engine.observe_job(job_facts(doc))
                pods.extend((origin, pod) for pod in job.pods)
            elif kind in ("PodGroup", "Workload"):
                native.append((origin, doc))
            elif kind == "PriorityClass":
                classes.add(doc)
            elif kind == "Namespace":
                sim.namespaces.append(str((doc.get("metadata") or {}).get("name")))
            else:
                _configure(engine, origin, kind, doc, sim.warnings)
        except PriorityError as exc:
            raise SimulationError(f"{origin}: {exc}") from None
    if foreign:
        conversion = convert(foreign)
        sim.notes += [*conversion.summary(), *conversion.notes]
        for origin, doc in conversion.documents():
            _configure(engine, origin, str(doc["kind"]), doc, sim.warnings)
    note = skipped.note()
    if note is not None:
        sim.notes.append(note)
    for config in engine.all_configs().values():
        missing = missing_flavor(config, engine.flavors)
        if missing is not None:
            sim.warnings.append(missing.message)
    engine.refresh()  # the explicit step before reading the trees
    for _, problem in sorted(engine.problems().items()):
        if problem.reason == "ParentNotFound":
            sim.warnings.append(problem.message)
        elif problem.own:
            raise SimulationError(f"{problem.message} (rule broken: {problem.reason})")
    try:
        for pod_group in read_documents(native):
            engine.group_ledger.observe_pod_group(pod_group.key, pod_group)
    except ConfigError as exc:
        raise SimulationError(str(exc)) from None
    _arrive(engine, pods, classes)
    engine.refresh_reasons()
    sim.configs = list(engine.all_configs().values())
    return sim


def _arrive(
    engine: SimulatedEngine, pods: list[tuple[str, Mapping[str, Any]]], classes: PriorityClasses
) -> None:
    """The pods, one at a time in order, each followed by the engine's decisions."""
    seen: set[str] = set()
    for index, (origin, doc) in enumerate(pods):
        try:
            facts = pod_facts(doc, default_created=float(index))
            priority = classes.resolve(doc, facts.key)
            facts.never_preempts = classes.preemption_policy(doc, facts.key) == "Never"
        except (ConfigError, PriorityError) as exc:
            raise SimulationError(f"{origin}: {exc}") from None
        if priority is not None:
            facts.priority = priority
        if facts.key in seen:
            raise SimulationError(f"{origin}: Pod {facts.key}: defined twice")
        if facts.pod_group is not None:  # the webhook refuses such a pod (native_groups.py)
            why = label_disagreement(facts.labels, facts.pod_group, f"Pod {facts.key}")
            if why is not None:
                raise SimulationError(f"{origin}: rejected: {why}")
        seen.add(facts.key)
        if facts.terminal:
            continue
        running = facts.node_name is not None or facts.phase == "Running"
        resolution = engine.resolve(facts.namespace, facts.labels)
        if resolution.error is not None:
            raise SimulationError(f"{origin}: Pod {facts.key}: rejected: {resolution.error}")
        if (
            resolution.quota is not None
            and engine.tree_of(resolution.quota).config(resolution.quota) is None
        ):
            raise SimulationError(
                f"{origin}: Pod {facts.key}: default quota {resolution.quota} is not defined"
            )
        facts.gated = resolution.quota is not None and not running
        if resolution.quota is None and not facts.node_name:
            # Unmanaged pods are scheduled at once: they hold capacity.
            facts.node_name = "(scheduled)"
        engine.observe_pod(facts)
        engine.decide(now=float(index))


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {r: format_quantity(a, r) for r, a in sorted(amounts.items())}


def _pod_entry(record: PodRecord, engine: Engine | None = None) -> dict[str, Any]:
    """A pod's report; with several trees (`engine` given) also `quotas`: tree -> quota."""
    state = record.state
    entry: dict[str, Any] = {
        "quota": record.quota,
        "state": str(state),
        "capacity": record.standing if state is PodState.ADMITTED else None,
        "reason": record.reason,
    }
    if record.flavor is not None:
        # The flavor it is charged to (pending: the one it waits on; docs/design/flavors.md).
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
    engine.refresh()  # the explicit step before reading the trees
    members: dict[str, Any] = {}
    for config in sorted(sim.configs, key=lambda c: c.name):
        report = engine.report(config.name)
        members[config.name] = {
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
    forest = engine if engine.forest.several else None
    pods = {
        record.key: _pod_entry(record, forest)
        for record in sorted(engine.pod_records(), key=lambda r: r.arrival)
    }
    groups = {
        key: {
            "name": view.key.partition("/")[2],
            "quota": view.quota,
            "state": view.state,
            "size": view.size,
            "min": view.min,
            "pods": list(view.pods),
            "reason": view.reason,
        }
        for key, view in sorted(engine.groups.items())
    }
    return {
        "capacity": _quantities(engine.tree.capacity),
        "nodes": members,
        "pods": pods,
        "groups": groups,
    }


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
        member, config = tree.member(name), tree.config(name)
        scaled = {}
        if member is not None and config is not None:
            for resource, low in config.min.items():
                guarantee = member.guarantee.get(resource, low)
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
