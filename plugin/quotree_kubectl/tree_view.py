"""`kubectl quotree tree`: the tree from the CRDs' status (what the operator wrote), in the
report shape of `quotree simulate -o json`, so `quotree.report.render_tree` draws it; and
the operator's latest word on each pending pod (its `Pending` Events). Pure.

Which pods are quotree's: each pod's quota is worked out from its namespace and labels the
way the engine does (`quotree.resolution`, over the live ElasticQuotas), not read from the
`quotree.io/quota-name` label alone: a pod created gated before the operator knew its
quota is admitted without that label, and is charged all the same. The plugin does not
know the operator's default quota: a pod only it covers counts when it carries the label
(the webhook sets it) or the gate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from quotree.capacity import node_allocatable
from quotree.groups import (
    NO_GROUP,
    POD_GROUP_LABEL,
    POD_GROUP_MIN_ANNOTATION,
    POD_GROUP_SIZE_ANNOTATION,
)
from quotree.models import (
    ADMISSION_GATE,
    DEFAULT_TREE,
    QUOTA_LABEL,
    STANDING_LABEL,
    ConfigError,
    parse_member,
)
from quotree.native_groups import pod_group_facts, pod_group_name
from quotree.quantity import QuantityError, add_amounts, format_quantity, parse_quantity
from quotree.resolution import Coverage, never_gated
from quotree_kubectl.cluster import ClusterState

__all__ = ["pending_reasons", "pod_quotas", "tree_report"]

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


def pod_quotas(state: ClusterState) -> dict[str, str]:
    """pod key -> the quota it is charged to, for every live pod that has one (see the
    module docstring); terminal pods included, pods quotree leaves alone not."""
    coverage = Coverage(never_gated(), None)
    for obj in state.quotas:
        try:
            coverage.add(parse_member(obj))
        except ConfigError:
            continue  # an invalid quota covers nothing (its status says why)
    out: dict[str, str] = {}
    for pod in state.pods:
        metadata = pod.get("metadata") or {}
        labels = metadata.get("labels") or {}
        quota = coverage.resolve(str(metadata.get("namespace")), labels).quota
        quota = quota or labels.get(QUOTA_LABEL)
        if quota:
            out[_key(pod)] = str(quota)
    return out


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
    members: dict[str, Any] = {}
    for obj in sorted(
        [*state.cohorts, *state.quotas], key=lambda o: str(o["metadata"].get("name"))
    ):
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        problem = _condition_false(status)
        members[obj["metadata"]["name"]] = {
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
    quotas = pod_quotas(state)
    pods: dict[str, Any] = {}
    for pod in sorted(state.pods, key=lambda p: str(p["metadata"].get("creationTimestamp"))):
        labels = pod["metadata"].get("labels") or {}
        gated = any(
            g.get("name") == ADMISSION_GATE
            for g in (pod.get("spec") or {}).get("schedulingGates") or ()
        )
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        key = _key(pod)
        if key not in quotas and not gated:
            continue  # not quotree's
        pods[key] = {
            "quota": quotas.get(key),
            "state": "pending" if gated else "admitted",
            "capacity": None if gated else labels.get(STANDING_LABEL),
            "reason": reasons.get(key, "waiting for the operator") if gated else "",
        }
    return {
        "capacity": {r: format_quantity(a, r) for r, a in sorted(capacity.items())},
        "nodes": members,
        "pods": pods,
        "groups": pod_groups(state, pods),
    }


def _gangs(state: ClusterState) -> dict[str, int]:
    """The gang PodGroups by "namespace/name": their `minCount`."""
    found = {}
    for body in state.pod_groups:
        try:
            facts = pod_group_facts(body)
        except ConfigError:
            continue
        if facts.min_count is not None:
            found[facts.key] = facts.min_count
    return found


def pod_groups(state: ClusterState, pods: Mapping[str, Any]) -> dict[str, Any]:
    """The pod groups of the pods quotree manages, in `quotree simulate -o json`'s shape:
    a group is admitted when none of its pods is gated (their gates go in one round). A
    pod that names a gang PodGroup is in that group, of its `minCount`."""
    groups: dict[str, Any] = {}
    gangs = _gangs(state)
    for pod in state.pods:
        key = _key(pod)
        entry = pods.get(key)
        metadata = pod["metadata"]
        name = (metadata.get("labels") or {}).get(POD_GROUP_LABEL)
        notes = metadata.get("annotations") or {}
        size = str(notes.get(POD_GROUP_SIZE_ANNOTATION, ""))
        linked = pod_group_name(pod.get("spec") or {})
        if linked is not None:  # its PodGroup is its group (a basic one: none)
            count = gangs.get(f"{metadata.get('namespace')}/{linked}")
            name, size = (linked, str(count)) if count is not None else (None, "")
        if entry is None or not name or name == NO_GROUP:
            continue
        least = str(notes.get(POD_GROUP_MIN_ANNOTATION, size) if linked is None else size)
        group = groups.setdefault(
            f"{metadata.get('namespace')}/{name}",
            {
                "name": name,
                "quota": entry["quota"],
                "state": "admitted",
                "size": int(size) if size.isdigit() else None,
                "min": int(least) if least.isdigit() else None,
                "pods": [],
                "reason": "",
            },
        )
        group["pods"].append(key)
        if entry["state"] == "pending" and group["state"] == "admitted":
            group["state"], group["reason"] = "pending", entry["reason"]
    return dict(sorted(groups.items()))
