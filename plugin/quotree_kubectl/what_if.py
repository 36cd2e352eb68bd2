"""`kubectl quotree what-if`: the live objects with proposed Cohorts, ElasticQuotas and
Nodes, checked by the webhook's rules and run through `quotree simulate`'s path before and
after (nothing is written). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.models import ConfigError, MemberConfig, parse_member
from quotree.rules import check_apply_forest
from quotree.simulate import Simulation, SimulationError, simulate_documents, to_json
from quotree_kubectl.cluster import ClusterState, PluginError, live_documents

__all__ = ["WhatIf", "render_what_if", "what_if"]

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

    def evicted(self) -> list[str]:
        """The running pods the proposal would evict (preempted or reclaimed), by key."""
        before, after = self.before["pods"], self.after["pods"]
        return sorted(
            key
            for key, entry in after.items()
            if entry["state"] in ("preempted", "reclaimed")
            and (before.get(key) or {}).get("state") != entry["state"]
        )


def _report(sim: Simulation) -> dict[str, Any]:
    return to_json(sim)


def what_if(state: ClusterState, proposed: Iterable[tuple[str, Mapping[str, Any]]]) -> WhatIf:
    """The live state, and the live state with `proposed` applied (nothing is written)."""
    live = live_documents(state)
    configs: dict[str, MemberConfig] = {}
    for _, doc in live:
        if doc.get("kind") in ("Cohort", "ElasticQuota"):
            try:
                config = parse_member(doc)
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
                config = parse_member(doc)
            except ConfigError as exc:
                refused.append(str(exc))
                continue
            forest: dict[str, dict[str, MemberConfig]] = {}
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
    before_members, after_members = result.before["nodes"], result.after["nodes"]
    for name in sorted(set(before_members) | set(after_members)):
        old = (before_members.get(name) or {}).get("runtime") or {}
        new = (after_members.get(name) or {}).get("runtime") or {}
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
