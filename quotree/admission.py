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

from quotree.accounts import TreeMember
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


def shortfall(member: TreeMember, record: Unit) -> dict[str, int]:
    """By how much the pod does not fit, per governed resource (empty: it fits)."""
    short = {}
    request = record.request_in(member.name)
    for resource in member.resources:
        amount = request.get(resource, 0)
        if not amount:
            continue
        excess = member.used[resource] + amount - member.runtime[resource]
        if excess > 0:
            short[resource] = excess
    return short


def may_fit(member: TreeMember, path: list[TreeMember], request: Mapping[str, int]) -> bool:
    """Could a pod charged `request` fit the quota and the ancestors on `path`, whatever its
    demand does to their runtimes? False when used + request is above a cap (runtime never
    exceeds cap) or, at the root, above the capacity. A cheap necessary condition only."""
    for resource in member.resources:
        amount = request.get(resource, 0)
        if not amount:
            continue
        if member.used[resource] + amount > member.cap[resource]:
            return False
        for ancestor in path:
            bound = (
                ancestor.runtime[resource] if ancestor.config is None else ancestor.cap[resource]
            )
            if ancestor.used[resource] + amount > bound:
                return False
    return True


def ancestor_shortfall(
    path: list[TreeMember], member: TreeMember, record: Unit
) -> tuple[TreeMember, dict[str, int]] | None:
    """The nearest ancestor (up to the root) where `used + request > runtime`, and by how much.

    `path` is the quota's ancestors, nearest first, ending with the root (whose
    runtime is the capacity). Only the resources the quota takes part in count.
    """
    request = record.request_in(member.name)
    for ancestor in path:
        short = {}
        for resource in member.resources:
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


def ancestor_label(ancestor: TreeMember, tree: str | None = None) -> str:
    label = "the cluster" if ancestor.config is None else ancestor.config.describe()
    return label + tree_tag(tree)


def tree_tag(tree: str | None) -> str:
    """` (tree projects)` after a member's name in a reason, when it is not the default tree's."""
    return f" (tree {tree})" if tree else ""


def why_waits(
    ancestor: TreeMember,
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
    ancestor: TreeMember,
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


def non_preemptible_shortfall(member: TreeMember, pods: QuotaPods, record: Unit) -> dict[str, int]:
    """A non-preemptible pod also fits within the (scaled) min: by how much it does not."""
    if record.preemptible:
        return {}
    short = {}
    request = record.request_in(member.name)
    for resource in member.resources:
        amount = request.get(resource, 0)
        if not amount:
            continue
        held = pods.non_preemptible_used.get(resource, 0)
        excess = held + amount - member.guarantee[resource]
        if excess > 0:
            short[resource] = excess
    return short


#: `room`'s answer: the members and resource sets it was taken over (compared by identity),
#: then per resource, in that order: runtime - used, guarantee - non-preemptible used, and
#: the least runtime - used of the ancestors.
Room = tuple[list[object], list[int], list[int], list[int]]


def room(member: TreeMember, path: list[TreeMember], pods: QuotaPods) -> Room:
    """Per resource: runtime - used, guarantee - non-preemptible used, and the least
    runtime - used of the ancestors on `path`. No pending pod can start to fit unless
    one of them grew. Flat lists, not a dict per resource: it is taken twice for every
    quota the decider looks at."""
    resources = member.resources
    runtime, used, guarantee = member.runtime, member.used, member.guarantee
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
    return [member, resources], own, guaranteed, least if least is not None else [0] * len(own)


def room_grew(room: Room, before: Room | None, *, ancestors: bool) -> bool:
    """Whether `room` may let in a pod that `before` did not: taken over other members or
    resources, or larger somewhere (in the ancestors' part only when `ancestors`)."""
    if before is None:
        return True
    members, old_members = room[0], before[0]
    if len(members) != len(old_members) or not all(map(operator.is_, members, old_members)):
        return True
    return not (
        all(map(int.__le__, room[1], before[1]))
        and all(map(int.__le__, room[2], before[2]))
        and (not ancestors or all(map(int.__le__, room[3], before[3])))
    )


def reason_key(member: TreeMember, short: Mapping[str, int], *, non_preemptible: bool) -> object:
    """The numbers a Pending reason is built from: the text is redone only when they change."""
    return (
        non_preemptible,
        tuple(
            (r, short[r], member.used[r], member.runtime[r], member.guarantee[r], member.cap[r])
            for r in short
        ),
    )


def fit_message(name: str, member: TreeMember, record: PodRecord) -> str:
    parts = [
        f"{r} used {format_quantity(member.used[r], r)} of runtime "
        f"{format_quantity(member.runtime[r], r)}"
        for r in sorted(member.resources)
        if record.request.get(r, 0)
    ]
    return f"admitted to ElasticQuota {name}" + (f" ({'; '.join(parts)})" if parts else "")


def min_text(member: TreeMember, resource: str) -> str:
    """`min 4`, or `min 4, scaled 3500m` when the cluster shrank and the guarantee with it."""
    low, guarantee = member.min[resource], member.guarantee[resource]
    text = f"min {format_quantity(low, resource)}"
    return text if guarantee >= low else f"{text}, scaled {format_quantity(guarantee, resource)}"


def why_not(
    name: str,
    member: TreeMember,
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
                + min_text(member, resource)
            )
        else:
            used = format_quantity(member.used[resource], resource)
            runtime = format_quantity(member.runtime[resource], resource)
            bound = member.cap[resource]
            limit = "" if is_unlimited(bound) else f", cap {format_quantity(bound, resource)}"
            parts.append(
                f"{resource}: used {used} + request {request} > runtime {runtime}"
                f" ({min_text(member, resource)}{limit})"
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


def standings(member: TreeMember, pods: QuotaPods) -> list[tuple[PodRecord, str]]:
    """in-quota / over-quota for every admitted pod (docs/semantics.md, "In-quota and
    over-quota pods"): by priority, then admission, the pods' requests add up; a pod is
    in-quota while the running sum is within the quota's guarantee (its min, after scaling)
    in every resource the pod requests."""
    running: dict[str, int] = dict.fromkeys(member.resources, 0)
    guarantee = member.guarantee
    labels = []
    for record in sorted(pods.admitted.values(), key=in_quota_order):
        request = record.request_in(pods.name)
        within = True
        for resource in member.resources:
            amount = request.get(resource, 0)
            if amount:
                running[resource] += amount
                if running[resource] > guarantee[resource]:
                    within = False
        labels.append((record, IN_QUOTA if within else OVER_QUOTA))
    return labels
