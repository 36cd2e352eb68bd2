"""What `kubectl quotree` shows: `tree_report`, `why`, `what_if` (pure: cluster objects in).

- `tree_report`: the tree from the CRDs' status (what the operator wrote), in the report
  shape of `quotree simulate -o json`, so `quotree.report.render_tree` draws it.
- `why`: the live objects loaded into an engine exactly as the operator loads them
  (gated pods wait, the others are admitted), one decision without reclaim, and the
  pod's reason with the numbers along its quota's chain of ancestors.
- `what_if`: the live objects with proposed Cohorts, ElasticQuotas and Nodes, checked by
  the webhook's rules and run through `quotree simulate`'s path before and after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.accounts import TreeNode
from quotree.capacity import node_allocatable
from quotree.engine import Engine, PodRecord, PodState
from quotree.models import (
    ADMISSION_GATE,
    CAPACITY_LABEL,
    DEFAULT_TREE,
    QUOTA_LABEL,
    ConfigError,
    NodeConfig,
    parse_flavor,
    parse_node,
    pod_facts,
)
from quotree.quantity import (
    QuantityError,
    add_amounts,
    format_quantity,
    is_unlimited,
    parse_quantity,
)
from quotree.rules import check_apply_forest
from quotree.simulate import (
    Simulation,
    SimulationError,
    simulate_documents,
    to_json,
)
from quotree_kubectl.cluster import ClusterState, PluginError, live_documents

__all__ = ["WhatIf", "render_what_if", "tree_report", "what_if", "why"]

#: Far beyond any real reclaim delay: `why` shows the state as it is, it does not reclaim.
NO_RECLAIM = 1e18
TERMINAL = ("Succeeded", "Failed")


def _quantities(amounts: Mapping[str, Any] | None) -> dict[str, str]:
    """Spec quantities as the engine formats them ("4000m" -> "4"); unreadable ones as given."""
    out = {}
    for resource, raw in sorted((amounts or {}).items()):
        try:
            out[resource] = format_quantity(parse_quantity(raw, resource), resource)
        except QuantityError:
            out[resource] = str(raw)
    return out


def _condition_false(status: Mapping[str, Any]) -> str | None:
    for condition in status.get("conditions") or ():
        if condition.get("type") in ("Valid", "Active") and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "inactive")
    return None


def _key(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def pending_reasons(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """pod key -> the message of its latest `Pending` event (the operator's own words)."""
    latest: dict[str, tuple[str, str]] = {}
    for event in events:
        if event.get("reason") != "Pending":
            continue
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "Pod":
            continue
        key = f"{involved.get('namespace')}/{involved.get('name')}"
        when = str(
            event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
        )
        if key not in latest or when >= latest[key][0]:
            latest[key] = (when, str(event.get("message") or ""))
    return {key: message for key, (_, message) in latest.items()}


def tree_report(state: ClusterState, reasons: Mapping[str, str]) -> dict[str, Any]:
    """The tree from the CRDs' status, in `quotree simulate -o json`'s shape."""
    capacity: dict[str, int] = {}
    for node in state.nodes:
        amounts = node_allocatable(node).allocatable
        if amounts:
            add_amounts(capacity, amounts)
    nodes: dict[str, Any] = {}
    for obj in sorted(
        [*state.cohorts, *state.quotas], key=lambda o: str(o["metadata"].get("name"))
    ):
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        problem = _condition_false(status)
        nodes[obj["metadata"]["name"]] = {
            "kind": obj.get("kind"),
            "tree": spec.get("tree") or DEFAULT_TREE,
            "namespace": obj["metadata"].get("namespace"),
            "parent": spec.get("parent"),
            "min": _quantities(spec.get("min")),
            "max": _quantities(spec.get("max")),
            "request": dict(status.get("request") or {}),
            "runtime": dict(status.get("runtime") or {}),
            "used": dict(status.get("used") or {}),
            "admittedPods": status.get("admittedPods"),
            "pendingPods": status.get("pendingPods"),
            "valid": problem is None,
            "problem": problem,
        }
    pods: dict[str, Any] = {}
    for pod in sorted(state.pods, key=lambda p: str(p["metadata"].get("creationTimestamp"))):
        labels = pod["metadata"].get("labels") or {}
        gated = any(
            g.get("name") == ADMISSION_GATE
            for g in (pod.get("spec") or {}).get("schedulingGates") or ()
        )
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        if QUOTA_LABEL not in labels and not gated:
            continue  # not quotree's
        key = _key(pod)
        pods[key] = {
            "quota": labels.get(QUOTA_LABEL),
            "state": "pending" if gated else "admitted",
            "capacity": None if gated else labels.get(CAPACITY_LABEL),
            "reason": reasons.get(key, "waiting for the operator") if gated else "",
        }
    return {
        "capacity": {r: format_quantity(a, r) for r, a in sorted(capacity.items())},
        "nodes": nodes,
        "pods": pods,
    }


# ------------------------------------------------------------------ why


def live_engine(state: ClusterState) -> tuple[Engine, list[str]]:
    """The engine as the operator holds it: quotas, nodes, pods as they are; one decision."""
    engine = Engine(reclaim_delay=NO_RECLAIM)
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
            engine.set_config(parse_node(obj))
        except ConfigError as exc:
            notes.append(f"left out: {exc}")
    pods = sorted(state.pods, key=lambda p: str(p["metadata"].get("creationTimestamp")))
    for pod in pods:
        try:
            engine.observe_pod(pod_facts(pod))
        except ConfigError as exc:
            notes.append(f"left out: {exc}")
    engine.decide(now=0.0)
    return engine, notes


def _q(amount: int, resource: str) -> str:
    return "unlimited" if is_unlimited(amount) else format_quantity(amount, resource)


def _chain(engine: Engine, node: TreeNode) -> list[TreeNode]:
    """The node and its ancestors below the cluster root, nearest first."""
    return [node, *engine.tree_of(node.name).ancestors(node)]


def _borrowers(engine: Engine, top: TreeNode, resource: str, skip: str) -> list[str]:
    """ElasticQuotas under `top` that use more `resource` than their min (idle quota lent)."""
    out = []
    tree = engine.tree_of(top.name)
    for node in tree.live_nodes():
        if node.name == skip or not node.is_quota or resource not in node.resources:
            continue
        if top.name not in {a.name for a in tree.ancestors(node)}:
            continue
        above = node.used[resource] - node.min[resource]
        if above > 0:
            out.append(
                f"{node.name} uses {_q(node.used[resource], resource)}, "
                f"{_q(above, resource)} above its min {_q(node.min[resource], resource)}"
            )
    return sorted(out)


def _let_in(engine: Engine, record: PodRecord, reclaim_hint: str) -> list[str]:
    """What would let a pending pod in, per resource it is short of."""
    assert record.quota is not None
    tree = engine.tree_of(record.quota)
    node = tree.node(record.quota)
    if node is None or not node.is_quota:
        problem = tree.problems.get(record.quota)
        why = problem.message if problem else f"ElasticQuota {record.quota} does not exist"
        return [f"the quota is not part of the live tree: {why}"]
    lines: list[str] = []
    request = record.request
    for resource in sorted(node.resources):
        amount = request.get(resource, 0)
        if not amount:
            continue
        used, runtime = node.used[resource], node.runtime[resource]
        short = used + amount - runtime
        if short <= 0 and record.preemptible:
            continue
        guarantee, own_min = node.guarantee[resource], node.min[resource]
        lines.append(
            f"{resource}: {record.quota} uses {_q(used, resource)} + request "
            f"{_q(amount, resource)} against a runtime of {_q(runtime, resource)}"
            + (f": short by {_q(short, resource)}" if short > 0 else "")
        )
        capped: TreeNode | None = None
        for ancestor in _chain(engine, node):
            config = ancestor.config
            kind = "Cohort" if config is not None and not config.is_leaf else "ElasticQuota"
            at_cap = ancestor.used[resource] + amount > ancestor.cap[resource]
            if at_cap and capped is None:
                capped = ancestor
            lines.append(
                f"    {kind} {ancestor.name}: used {_q(ancestor.used[resource], resource)}, "
                f"runtime {_q(ancestor.runtime[resource], resource)}, min "
                f"{_q(ancestor.min[resource], resource)}, "
                f"cap {_q(ancestor.cap[resource], resource)}"
                + ("  (the request goes over the cap)" if at_cap else "")
            )
        if not record.preemptible:
            lines.append(
                f"  - a non-preemptible pod is admitted only within the min: raise "
                f"{record.quota}'s min {resource} to at least "
                f"{_q(used + amount, resource)} (its min is {_q(own_min, resource)})"
            )
            continue
        if capped is not None:
            lines.append(
                f"  - {capped.name} may never use more than {_q(capped.cap[resource], resource)} "
                f"{resource} (its max, or its min plus its borrowingLimit): only pods under "
                f"{capped.name} finishing, or a higher max or borrowingLimit on "
                f"{capped.name}, let this pod in (preview with `kubectl quotree what-if`)"
            )
            continue
        lines.append(
            f"  - {_q(short, resource)} freed by {record.quota}'s own admitted pods finishing"
        )
        if used + amount <= guarantee:
            lines.append(
                f"  - it is within {record.quota}'s min ({_q(own_min, resource)}): the quota "
                f"lent to others comes back by reclaim {reclaim_hint}"
            )
        else:
            lines.append(
                f"  - idle quota: it needs {_q(short, resource)} more {resource} that nobody "
                f"else in its cohorts asks for (it is above its min of "
                f"{_q(own_min, resource)}), or a min raised by that much "
                f"(preview with `kubectl quotree what-if`)"
            )
        top = _chain(engine, node)[-1]
        borrowers = _borrowers(engine, top, resource, record.quota)
        if borrowers:
            lines.append(
                "  - lent now: "
                + "; ".join(borrowers)
                + f" (reclaimed only while {record.quota} is owed its min)"
            )
    return lines


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
    request = ", ".join(f"{r} {_q(a, r)}" for r, a in sorted(facts.request.items())) or "nothing"
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
    if not facts.gated:
        label = (pod["metadata"].get("labels") or {}).get(CAPACITY_LABEL)
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
    if record.quota is not None and record.reason.startswith("does not fit"):
        lines.append("what would let it in:")
        lines.extend(
            f"  {line}"
            for line in _let_in(
                engine,
                record,
                "(borrowers above their runtime are evicted after the "
                "operator's reclaim delay, QUOTREE_RECLAIM_DELAY)",
            )
        )
    elif record.quota is not None and record.victims:
        lines.append(
            f"what would let it in: {len(record.victims)} lower-priority pods of "
            f"{record.quota} are being preempted for it; it is admitted when they are gone"
        )
    lines.extend(f"note: {note}" for note in notes)
    return "\n".join(lines)


# ------------------------------------------------------------------ what-if

ALLOWED = ("Cohort", "ElasticQuota", "Node")


def _identity(doc: Mapping[str, Any]) -> tuple[str, str | None, str]:
    metadata = doc.get("metadata") or {}
    namespace = metadata.get("namespace") if doc.get("kind") == "ElasticQuota" else None
    return str(doc.get("kind")), namespace, str(metadata.get("name"))


@dataclass
class WhatIf:
    """Before and after, and the proposed objects the webhook would refuse."""

    before: dict[str, Any]
    after: dict[str, Any]
    refused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)


def _report(sim: Simulation) -> dict[str, Any]:
    return to_json(sim)


def what_if(state: ClusterState, proposed: Iterable[tuple[str, Mapping[str, Any]]]) -> WhatIf:
    """The live state, and the live state with `proposed` applied (nothing is written)."""
    live = live_documents(state)
    configs: dict[str, NodeConfig] = {}
    for _, doc in live:
        if doc.get("kind") in ("Cohort", "ElasticQuota"):
            try:
                config = parse_node(doc)
            except ConfigError:
                continue
            configs[config.name] = config
    refused: list[str] = []
    warnings: list[str] = []
    applied: list[str] = []
    replacements: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    for origin, proposal in proposed:
        doc = dict(proposal)
        kind = doc.get("kind")
        if kind not in ALLOWED:
            raise PluginError(
                f"{origin}: what-if takes Cohort, ElasticQuota and Node objects, not {kind!r}"
            )
        identity = _identity(doc)
        described = f"{kind} {identity[1] + '/' if identity[1] else ''}{identity[2]}"
        if kind != "Node":
            try:
                config = parse_node(doc)
            except ConfigError as exc:
                refused.append(str(exc))
                continue
            forest: dict[str, dict[str, NodeConfig]] = {}
            for name, known in configs.items():
                forest.setdefault(known.tree, {})[name] = known
            verdict = check_apply_forest(forest, config)
            if not verdict.allowed:
                refused.append(verdict.message)
                continue
            warnings.extend(verdict.warnings)
            configs[config.name] = config
        replacements[identity] = doc
        applied.append(described)
    after_docs: list[tuple[str, Mapping[str, Any]]] = []
    for origin, doc in live:
        identity = _identity(doc)
        if doc.get("kind") in ALLOWED and identity in replacements:
            after_docs.append((f"proposed {identity[0]} {identity[2]}", replacements.pop(identity)))
        else:
            after_docs.append((origin, doc))
    # New objects go before the pods, in the order given.
    first_pod = next(
        (i for i, (_, d) in enumerate(after_docs) if d.get("kind") == "Pod"), len(after_docs)
    )
    after_docs[first_pod:first_pod] = [
        (f"proposed {identity[0]} {identity[2]}", doc) for identity, doc in replacements.items()
    ]
    try:
        before = _report(simulate_documents(live))
    except SimulationError as exc:
        raise PluginError(f"the live cluster cannot be simulated: {exc}") from None
    try:
        after_sim = simulate_documents(after_docs)
    except SimulationError as exc:
        raise PluginError(f"with the proposed objects: {exc}") from None
    warnings.extend(after_sim.warnings)
    return WhatIf(before, _report(after_sim), refused, warnings, applied)


VERBS = {
    "admitted": "would be admitted",
    "pending": "would wait",
    "preempted": "would be preempted",
    "reclaimed": "would be reclaimed",
}


def render_what_if(result: WhatIf) -> str:
    lines: list[str] = []
    for message in result.refused:
        lines.append(f"refused: {message}")
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    lines.append(
        "applied (not written): " + (", ".join(result.applied) if result.applied else "nothing")
    )
    lines.append("")
    lines.append(f"{'NODE':<24}{'RESOURCE':<16}{'RUNTIME BEFORE':>16}  →  AFTER")
    before_nodes, after_nodes = result.before["nodes"], result.after["nodes"]
    for name in sorted(set(before_nodes) | set(after_nodes)):
        old = (before_nodes.get(name) or {}).get("runtime") or {}
        new = (after_nodes.get(name) or {}).get("runtime") or {}
        for resource in sorted(set(old) | set(new)):
            was, now = old.get(resource, "-"), new.get(resource, "-")
            mark = "" if was == now else "  (changed)"
            lines.append(f"{name:<24}{resource:<16}{was:>16}  →  {now}{mark}")
    lines.append("")
    changes = []
    before_pods, after_pods = result.before["pods"], result.after["pods"]
    for key, entry in after_pods.items():
        was = (before_pods.get(key) or {}).get("state")
        now = entry["state"]
        if now != was and now in VERBS:
            changes.append(f"  {key:<30} {VERBS[now]:<20} {entry['reason']}")
    if changes:
        lines.append("pods:")
        lines.extend(changes)
    else:
        lines.append("pods: no change")
    return "\n".join(lines)
