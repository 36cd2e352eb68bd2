"""Does a pending pod fit its quota, and if not, why: the numbers and the words.

Why a module of its own: the semantics' "Admission" and "In-quota and
over-quota pods" are small rules whose text users read (Pending events,
`Admitted` events, the in-quota / over-quota label). The engine asks these pure
functions; the messages are built here and nowhere else.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass

from quotree.accounts import TreeNode
from quotree.pods import PodRecord, QuotaPods, Unit
from quotree.quantity import format_quantity, is_unlimited

__all__ = [
    "IN_QUOTA",
    "OVER_QUOTA",
    "Room",
    "fit_message",
    "in_quota_order",
    "may_fit",
    "non_preemptible_shortfall",
    "reason_key",
    "room",
    "room_grew",
    "shortfall",
    "standings",
    "waiting_for_victims",
    "why_not",
]

IN_QUOTA = "in-quota"
OVER_QUOTA = "over-quota"


def shortfall(node: TreeNode, record: Unit) -> dict[str, int]:
    """By how much the pod does not fit, per governed resource (empty: it fits)."""
    short = {}
    request = record.request_in(node.name)
    for resource in node.resources:
        amount = request.get(resource, 0)
        if not amount:
            continue
        excess = node.used[resource] + amount - node.runtime[resource]
        if excess > 0:
            short[resource] = excess
    return short


def may_fit(node: TreeNode, path: list[TreeNode], request: Mapping[str, int]) -> bool:
    """Could a pod charged `request` fit the quota and the ancestors on `path`, whatever its
    demand does to their runtimes? False when used + request is above a cap (runtime never
    exceeds cap) or, at the root, above the capacity. A cheap necessary condition only."""
    for resource in node.resources:
        amount = request.get(resource, 0)
        if not amount:
            continue
        if node.used[resource] + amount > node.cap[resource]:
            return False
        for ancestor in path:
            bound = (
                ancestor.runtime[resource] if ancestor.config is None else ancestor.cap[resource]
            )
            if ancestor.used[resource] + amount > bound:
                return False
    return True


def ancestor_shortfall(
    path: list[TreeNode], node: TreeNode, record: Unit
) -> tuple[TreeNode, dict[str, int]] | None:
    """The nearest ancestor (up to the root) where `used + request > runtime`, and by how much.

    `path` is the quota's ancestors, nearest first, ending with the root (whose
    runtime is the capacity). Only the resources the quota takes part in count.
    """
    request = record.request_in(node.name)
    for ancestor in path:
        short = {}
        for resource in node.resources:
            amount = request.get(resource, 0)
            if amount:
                excess = ancestor.used[resource] + amount - ancestor.runtime[resource]
                if excess > 0:
                    short[resource] = excess
        if short:
            return ancestor, short
    return None


@dataclass(frozen=True, slots=True)
class Lender:
    """A quota below a full ancestor that holds more than its runtime: what it gives back."""

    quota: str
    resource: str
    amount: int
    seconds: float | None  # until its reclaim; None: its pods are already being evicted


def ancestor_label(ancestor: TreeNode, tree: str | None = None) -> str:
    label = "the cluster" if ancestor.config is None else ancestor.config.describe()
    return label + tree_tag(tree)


def tree_tag(tree: str | None) -> str:
    """` (tree projects)` after a node's name in a reason, when it is not the default tree's."""
    return f" (tree {tree})" if tree else ""


def why_waits(
    ancestor: TreeNode,
    request: Mapping[str, int],
    short: Mapping[str, int],
    lenders: list[Lender],
    *,
    tree: str | None = None,
) -> str:
    """The Pending reason of a pod that fits its quota but not an ancestor (lent quota);
    `request` is the pod's, in the names of the ancestor's tree; `tree` names that tree
    when it is not the default one."""
    waits = []
    for lender in lenders:
        amount = format_quantity(lender.amount, lender.resource)
        if lender.seconds is None:
            when = "being evicted"
        elif lender.seconds > 0:
            when = f"reclaimed in {math.ceil(lender.seconds)} s"
        else:  # the reclaim delay passed and no eviction would let the pod in
            when = "which reclaim cannot take: the pods it may evict would not let this one in"
        waits.append(
            f"waits for {amount} {lender.resource} lent to ElasticQuota {lender.quota}, {when}"
        )
    if not waits:
        waits.append(
            "waits until pods below it finish (held by non-preemptible pods or outside quotree)"
        )
    return ancestor_text(ancestor, request, short, tree=tree) + "; " + "; ".join(waits)


def ancestor_text(
    ancestor: TreeNode,
    request: Mapping[str, int],
    short: Mapping[str, int],
    *,
    tree: str | None = None,
) -> str:
    """`does not fit in Cohort org: cpu: used 9 + request 2 > runtime 10`: where a pod that
    fits its quota is short (an ancestor, or the cluster), with the numbers."""
    bound = "capacity" if ancestor.config is None else "runtime"
    parts = []
    for resource in sorted(short):
        used = format_quantity(ancestor.used[resource], resource)
        asked = format_quantity(request.get(resource, 0), resource)
        limit = format_quantity(ancestor.runtime[resource], resource)
        parts.append(f"{resource}: used {used} + request {asked} > {bound} {limit}")
    return f"does not fit in {ancestor_label(ancestor, tree)}: " + "; ".join(parts)


def non_preemptible_shortfall(node: TreeNode, pods: QuotaPods, record: Unit) -> dict[str, int]:
    """A non-preemptible pod also fits within the (scaled) min: by how much it does not."""
    if record.preemptible:
        return {}
    short = {}
    request = record.request_in(node.name)
    for resource in node.resources:
        amount = request.get(resource, 0)
        if not amount:
            continue
        held = pods.non_preemptible_used.get(resource, 0)
        excess = held + amount - node.guarantee[resource]
        if excess > 0:
            short[resource] = excess
    return short


#: `room`'s answer: the nodes and resource sets it was taken over (compared by identity),
#: then per resource, in that order: runtime - used, guarantee - non-preemptible used, and
#: the least runtime - used of the ancestors.
Room = tuple[list[object], list[int], list[int], list[int]]


def room(node: TreeNode, path: list[TreeNode], pods: QuotaPods) -> Room:
    """Per resource: runtime - used, guarantee - non-preemptible used, and the least
    runtime - used of the ancestors on `path`. No pending pod can start to fit unless
    one of them grew. Flat lists, not a dict per resource: it is taken twice for every
    quota the decider looks at."""
    resources = node.resources
    runtime, used, guarantee = node.runtime, node.used, node.guarantee
    own = [runtime[r] - used[r] for r in resources]
    held = pods.non_preemptible_used
    if held:
        guaranteed = [guarantee[r] - held.get(r, 0) for r in resources]
    else:
        guaranteed = [guarantee[r] for r in resources]
    least: list[int] | None = None
    for ancestor in path:
        runtime, used = ancestor.runtime, ancestor.used
        here = [runtime[r] - used[r] for r in resources]
        least = here if least is None else list(map(min, least, here))
    return [node, resources], own, guaranteed, least if least is not None else [0] * len(own)


def room_grew(room: Room, before: Room | None, *, ancestors: bool) -> bool:
    """Whether `room` may let in a pod that `before` did not: taken over other nodes or
    resources, or larger somewhere (in the ancestors' part only when `ancestors`)."""
    if before is None:
        return True
    nodes, old_nodes = room[0], before[0]
    if len(nodes) != len(old_nodes) or not all(map(operator.is_, nodes, old_nodes)):
        return True
    return not (
        all(map(int.__le__, room[1], before[1]))
        and all(map(int.__le__, room[2], before[2]))
        and (not ancestors or all(map(int.__le__, room[3], before[3])))
    )


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


def min_text(node: TreeNode, resource: str) -> str:
    """`min 4`, or `min 4, scaled 3500m` when the cluster shrank and the guarantee with it."""
    low, guarantee = node.min[resource], node.guarantee[resource]
    text = f"min {format_quantity(low, resource)}"
    return text if guarantee >= low else f"{text}, scaled {format_quantity(guarantee, resource)}"


def why_not(
    name: str,
    node: TreeNode,
    pods: QuotaPods,
    record: Unit,
    short: Mapping[str, int],
    *,
    non_preemptible: bool = False,
    tree: str | None = None,
) -> str:
    """The Pending reason of a pod that does not fit, with the numbers; `tree` names the
    quota's tree when it is not the default one."""
    parts = []
    charged = record.request_in(name)
    for resource in sorted(short):
        request = format_quantity(charged.get(resource, 0), resource)
        if non_preemptible:
            used = format_quantity(pods.non_preemptible_used.get(resource, 0), resource)
            parts.append(
                f"{resource}: non-preemptible used {used} + request {request} > "
                + min_text(node, resource)
            )
        else:
            used = format_quantity(node.used[resource], resource)
            runtime = format_quantity(node.runtime[resource], resource)
            bound = node.cap[resource]
            limit = "" if is_unlimited(bound) else f", cap {format_quantity(bound, resource)}"
            parts.append(
                f"{resource}: used {used} + request {request} > runtime {runtime}"
                f" ({min_text(node, resource)}{limit})"
            )
    return f"does not fit in ElasticQuota {name}{tree_tag(tree)}: " + "; ".join(parts)


def waiting_for_victims(record: PodRecord) -> str:
    """The reason of a unit that waits for evictions under way: its own victims, or (none
    asked for it) pods already leaving whose room is enough for it."""
    if not record.victims:
        return "waiting for pods being evicted or deleted to release their resources"
    return f"waiting for {len(record.victims)} preempted pods to release their resources"


def in_quota_order(record: PodRecord) -> tuple[int, int, str]:
    """The order in-quota labels are given in: higher priority first, then admitted earlier
    (a group's pods share its place), then by name."""
    return (-record.facts.priority, record.admitted_seq, record.key)


def standings(node: TreeNode, pods: QuotaPods) -> list[tuple[PodRecord, str]]:
    """in-quota / over-quota for every admitted pod (semantics.md): by priority, then
    admission, the pods' requests add up; a pod is in-quota while the running sum is within
    the quota's guarantee (its min, after scaling) in every resource the pod requests."""
    running: dict[str, int] = dict.fromkeys(node.resources, 0)
    guarantee = node.guarantee
    labels = []
    for record in sorted(pods.admitted.values(), key=in_quota_order):
        request = record.request_in(pods.name)
        within = True
        for resource in node.resources:
            amount = request.get(resource, 0)
            if amount:
                running[resource] += amount
                if running[resource] > guarantee[resource]:
                    within = False
        labels.append((record, IN_QUOTA if within else OVER_QUOTA))
    return labels
