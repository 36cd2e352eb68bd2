"""Does a pending pod fit its quota, and if not, why: the numbers and the words.

Why a module of its own: the semantics' "Admission" and "In-quota and
over-quota pods" are small rules whose text users read (Pending events,
`Admitted` events, the capacity label). The engine asks these pure
functions; the messages are built here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotree.accounts import TreeNode
from quotree.pods import PodRecord, QuotaPods
from quotree.quantity import format_quantity, is_unlimited

__all__ = [
    "IN_QUOTA",
    "OVER_QUOTA",
    "capacity_labels",
    "fit_message",
    "non_preemptible_shortfall",
    "reason_key",
    "room",
    "shortfall",
    "waiting_for_victims",
    "why_not",
]

IN_QUOTA = "in-quota"
OVER_QUOTA = "over-quota"


def shortfall(node: TreeNode, record: PodRecord) -> dict[str, int]:
    """By how much the pod does not fit, per governed resource (empty: it fits)."""
    short = {}
    request = record.request
    for resource in node.resources:
        amount = request.get(resource, 0)
        if not amount:
            continue
        excess = node.used[resource] + amount - node.runtime[resource]
        if excess > 0:
            short[resource] = excess
    return short


def non_preemptible_shortfall(node: TreeNode, pods: QuotaPods, record: PodRecord) -> dict[str, int]:
    """A non-preemptible pod also fits within the (scaled) min: by how much it does not."""
    if record.preemptible:
        return {}
    short = {}
    for resource in node.resources:
        amount = record.request.get(resource, 0)
        if not amount:
            continue
        held = pods.non_preemptible_used.get(resource, 0)
        excess = held + amount - node.guarantee[resource]
        if excess > 0:
            short[resource] = excess
    return short


def room(node: TreeNode, pods: QuotaPods) -> dict[str, tuple[int, int]]:
    """Per resource: runtime - used, and guarantee - non-preemptible used."""
    return {
        r: (node.runtime[r] - node.used[r], node.guarantee[r] - pods.non_preemptible_used.get(r, 0))
        for r in node.resources
    }


def reason_key(node: TreeNode, short: Mapping[str, int], *, non_preemptible: bool) -> object:
    """The numbers a Pending reason is built from: the text is redone only when they change."""
    return (
        non_preemptible,
        tuple(
            (r, short[r], node.used[r], node.runtime[r], node.guarantee[r], node.cap[r])
            for r in short
        ),
    )


def fit_message(name: str, node: TreeNode, record: PodRecord) -> str:
    parts = [
        f"{r} used {format_quantity(node.used[r], r)} of runtime "
        f"{format_quantity(node.runtime[r], r)}"
        for r in sorted(node.resources)
        if record.request.get(r, 0)
    ]
    return f"admitted to ElasticQuota {name}" + (f" ({'; '.join(parts)})" if parts else "")


def why_not(
    name: str,
    node: TreeNode,
    pods: QuotaPods,
    record: PodRecord,
    short: Mapping[str, int],
    *,
    non_preemptible: bool = False,
) -> str:
    """The Pending reason of a pod that does not fit, with the numbers."""
    parts = []
    for resource in sorted(short):
        request = format_quantity(record.request.get(resource, 0), resource)
        if non_preemptible:
            used = format_quantity(pods.non_preemptible_used.get(resource, 0), resource)
            limit = format_quantity(node.guarantee[resource], resource)
            parts.append(
                f"{resource}: non-preemptible used {used} + request {request} > min {limit}"
            )
        else:
            used = format_quantity(node.used[resource], resource)
            runtime = format_quantity(node.runtime[resource], resource)
            bound = node.cap[resource]
            limit = "" if is_unlimited(bound) else f", cap {format_quantity(bound, resource)}"
            parts.append(
                f"{resource}: used {used} + request {request} > runtime {runtime}"
                f" (min {format_quantity(node.min[resource], resource)}{limit})"
            )
    return f"does not fit in ElasticQuota {name}: " + "; ".join(parts)


def waiting_for_victims(record: PodRecord) -> str:
    return f"waiting for {len(record.victims)} preempted pods to release their resources"


def capacity_labels(node: TreeNode, pods: QuotaPods) -> dict[str, str]:
    """in-quota / over-quota for every admitted pod: by priority, then admission, within min."""
    running: dict[str, int] = dict.fromkeys(node.resources, 0)
    within = True
    labels = {}
    for record in sorted(pods.admitted.values(), key=lambda r: (-r.facts.priority, r.admitted_seq)):
        if within:
            for resource in node.resources:
                running[resource] += record.request.get(resource, 0)
                if running[resource] > node.min[resource]:
                    within = False
        labels[record.key] = IN_QUOTA if within else OVER_QUOTA
    return labels
