"""`kubectl quotree why`: the live objects loaded into an engine exactly as the operator
loads them (gated pods wait, the others are admitted), one decision without reclaim, and
the pod's reason with the numbers along its quota's chain of ancestors. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotree.capacity import node_allocatable
from quotree.engine import Engine, PodState
from quotree.flavor_spec import parse_flavor
from quotree.groups import job_facts
from quotree.models import STANDING_LABEL, ConfigError, parse_member
from quotree.native_groups import pod_group_facts
from quotree.podfacts import pod_facts
from quotree_kubectl.cluster import ClusterState, PluginError
from quotree_kubectl.let_in import let_in, never_fits, q

__all__ = ["live_engine", "why"]

#: Far beyond any real reclaim delay: `why` shows the state as it is, it does not reclaim.
NO_RECLAIM = 1e18


def live_engine(state: ClusterState, reclaim_delay: float = NO_RECLAIM) -> tuple[Engine, list[str]]:
    """The engine as the operator holds it: quotas, nodes, pods as they are; one decision
    (with `reclaim_delay` 0: as it is once every waiting pod's reclaim delay has passed)."""
    engine = Engine(reclaim_delay=reclaim_delay)
    notes: list[str] = []
    for flavor in state.flavors:
        try:
            engine.set_flavor(parse_flavor(flavor))
        except ConfigError as exc:
            notes.append(f"left out: {exc}")
    for node in state.nodes:
        counted = node_allocatable(node)
        notes.extend(counted.warnings)
        labels = node["metadata"].get("labels") or {}
        engine.set_cluster_node(node["metadata"]["name"], counted.allocatable, labels)
    for obj in [*state.cohorts, *state.quotas]:
        try:
            engine.set_config(parse_member(obj))
        except ConfigError as exc:
            notes.append(f"left out: {exc}")
    for job in state.jobs:  # before the pods, as the operator loads them: a Job's group
        engine.observe_job(job_facts(job))
    for body in state.pod_groups:
        try:
            pod_group = pod_group_facts(body)
        except ConfigError as exc:
            notes.append(f"left out: {exc}")
            continue
        engine.group_ledger.observe_pod_group(pod_group.key, pod_group)
    pods = sorted(state.pods, key=lambda p: str(p["metadata"].get("creationTimestamp")))
    for pod in pods:
        try:
            engine.observe_pod(pod_facts(pod))
        except ConfigError as exc:
            notes.append(f"left out: {exc}")
    engine.decide(now=0.0)
    engine.refresh()  # settled for the readers (`let_in`, the reports)
    return engine, notes


def why(state: ClusterState, namespace: str, name: str, reasons: Mapping[str, str]) -> str:
    key = f"{namespace}/{name}"
    pod = next(
        (
            p
            for p in state.pods
            if p["metadata"].get("namespace") == namespace and p["metadata"]["name"] == name
        ),
        None,
    )
    if pod is None:
        raise PluginError(f"pod {key} not found")
    engine, notes = live_engine(state)
    record = engine.pods.get(key)
    facts = pod_facts(pod)
    request = ", ".join(f"{r} {q(a, r)}" for r, a in sorted(facts.request.items())) or "nothing"
    lines = [f"Pod {key}"]
    if record is None or record.state is PodState.UNMANAGED:
        if facts.terminal:
            lines.append(f"  state:   finished ({facts.phase}): it holds no quota")
        else:
            lines.append(
                f"  state:   not managed by quotree: no ElasticQuota covers namespace "
                f"{namespace} and no default quota applies"
            )
        return "\n".join(lines)
    config = engine.tree_of(record.quota).config(record.quota) if record.quota else None
    where = f"ElasticQuota {record.quota}" if record.quota else "(none)"
    if config is not None:
        where += f" in namespace {config.namespace}"
        if config.parent:
            where += f", under Cohort {config.parent}"
    lines.append(f"  quota:   {where}")
    priority = f", priority {facts.priority}" if facts.priority else ""
    lines.append(f"  request: {request}{priority}")
    group = next((g for g in engine.groups.values() if key in g.pods), None)
    if group is not None:
        # A pod of a group waits, is admitted and is evicted with its group: the answer
        # is the group's.
        lines.append(
            f"  group:   pod group {group.key}, {group.state}: {len(group.pods)} of "
            f"{group.size} pods exist"
            + (f" (admitted at {group.min})" if group.min < group.size else "")
        )
        if facts.gated and group.state != "admitted" and group.reason:
            lines.append("  state:   pending (gated by quotree.io/admission) with its group")
            if reasons.get(key):
                lines.append(f"  operator: {reasons[key]}")
            lines.append(f"  engine:  {group.reason}")
            lines.extend(f"note: {note}" for note in notes)
            return "\n".join(lines)
    if not facts.gated:
        label = (pod["metadata"].get("labels") or {}).get(STANDING_LABEL)
        lines.append(f"  state:   admitted{f' ({label})' if label else ''}: it does not wait")
        return "\n".join(lines)
    said = reasons.get(key)
    if record.state is PodState.ADMITTED:
        lines.append("  state:   pending (gated)")
        if said:
            lines.append(f"  operator: {said}")
        lines.append(
            f"  engine:  it fits now ({record.reason}); the operator admits it at its next "
            "decision. If it stays gated, is the operator running and holding its Lease?"
        )
        return "\n".join(lines)
    lines.append("  state:   pending (gated by quotree.io/admission)")
    if said:
        lines.append(f"  operator: {said}")
    lines.append(f"  engine:  {record.reason or 'waiting'}")
    never = never_fits(engine, record)
    if never:
        lines.append("never:   it can never fit as the tree stands, whatever finishes:")
        lines.extend(f"  {line}" for line in never)
        lines.append(
            "what would let it in: a smaller request, or a higher bound (preview with "
            "`kubectl quotree what-if`; the cluster's capacity grows with Nodes)"
        )
        lines.extend(f"note: {note}" for note in notes)
        return "\n".join(lines)
    if "lent to ElasticQuota" in record.reason:
        lines.append(f"  reclaim: {reclaim_outlook(state, key)}")
    if record.quota is not None and record.reason.startswith("does not fit"):
        lines.append("what would let it in:")
        lines.extend(
            f"  {line}"
            for line in let_in(
                engine,
                record,
                "(borrowers above their runtime are evicted for it after the "
                "operator's reclaim delay, QUOTREE_RECLAIM_DELAY, when that pays)",
            )
        )
    elif record.quota is not None and record.victims:
        lines.append(
            f"what would let it in: {len(record.victims)} lower-priority pods of "
            f"{record.quota} are being preempted for it; it is admitted when they are gone"
        )
    lines.extend(f"note: {note}" for note in notes)
    return "\n".join(lines)


def reclaim_outlook(state: ClusterState, key: str) -> str:
    """What reclaim does for the pod once its reclaim delay has passed: the pods it evicts,
    or, in the engine's words, why it evicts nothing (the reason the operator then gives)."""
    engine, _ = live_engine(state, reclaim_delay=0.0)
    record = engine.pods[key]
    if record.victims:
        victims = ", ".join(sorted(record.victims))
        return f"once its reclaim delay has passed, {victims} are evicted for it"
    return f"once its reclaim delay has passed: {record.reason}"
