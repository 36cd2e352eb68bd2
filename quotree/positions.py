"""Where each waiting unit stands: its place in its quota's queue and under each ancestor.

Why a module of its own: the shells show a queue (`kubectl quotree pending`, the tree
page, a quota's status) and must not guess it; this reads the engine's own order and
numbers. Pure, no clock; as of the last `refresh()`.

- In a quota: the order its scan takes the units (`ClaimBook.queue`'s, read lazily: a
  unit that evictions were asked for first, then priority, the time it became complete
  (a pod: its creation), name); a pod group is one unit, at its first pod.
- Under a Cohort (and across the top of a tree): the order in which the Cohort's sharing
  ("Runtime: how a parent's total is shared" in docs/semantics.md) brings its children's runtimes
  to them as room appears under it. A unit of child c needs c's runtime to reach `need` = c's used
  plus the requests of c's units up to and including it, in c's order (for a Cohort child, its own
  merged order); the sharing gives c `min(need, guarantee + level * sharedWeight)`, so the unit is
  reached at the level `(need - guarantee - 1/2) / sharedWeight` (the half unit is the rounding to
  whole units: a child gets a unit once its exact share is past the half), the highest over the
  resources it requests. Units are taken by that level, ties by the child's name (the rounding's
  order), each child's units keeping their order. A unit whose need is over a cap on the way (max,
  min plus borrowingLimit) or whose quota's weight is 0 is reached by no level: it comes after the
  others, in their order.

The level order is exact for two children and follows the rounding closely for more (two
neighbours of different quotas may be admitted the other way round when several quotas'
shares round in the same step). A small unit behind a large one of the same quota may be
admitted first when the room for it alone appears ("a unit that does not fit does not
block smaller ones behind it"): positions are the order of the queue, not a promise.

Everything is read lazily (the quotas' queues, then a merge per Cohort), so the first n
units of a tree cost about n steps per level plus one per quota that has waiting units.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice

from quotree.accounts import TreeMember
from quotree.group_records import PENDING, GroupRecord
from quotree.pods import PodRecord, PodState, QuotaPods
from quotree.quantity import add_amounts
from quotree.runtime import QuotaTree

__all__ = ["Book", "Waiting", "quota_stream", "scan_order", "waiting_units"]

#: The level of a unit no room under the parent ever reaches.
NEVER = math.inf


@dataclass(slots=True)
class Waiting:
    """One waiting unit (a pod, or a pod group) and where it stands."""

    key: str  # "namespace/name" of the pod or of the group
    group: bool
    quota: str
    pods: tuple[str, ...]  # its pods' keys (one for a pod)
    priority: int
    since: float  # a pod's creation, a group's completion (seconds since the epoch)
    request: dict[str, int]  # charged in its quota, base units
    reason: str
    #: (tree member, 1-based position under it), from its quota up to the top of its tree.
    positions: list[tuple[str, int]] = field(default_factory=list)
    #: Its place over the whole tree (every quota, every Cohort), 1-based.
    order: int = 0


@dataclass(frozen=True, slots=True)
class Book:
    """What the order is read from: the pods' records, the claims (`ClaimBook.claims`) and
    the pod groups."""

    records: Mapping[str, PodRecord]
    claims: Mapping[str, str]
    groups: Mapping[str, GroupRecord]
    members: Callable[[GroupRecord], list[PodRecord]]


def scan_order(
    name: str, pods: QuotaPods, claims: Mapping[str, str], records: Mapping[str, PodRecord]
) -> Iterator[str]:
    """Quota `name`'s pending keys in the order its scan looks at them (`ClaimBook.queue`),
    lazily: the units evictions were asked for first, then the queue."""
    claimed = sorted(
        (records[key].order(), key)
        for key, quota in claims.items()
        if quota == name and key in pods.pending_keys
    )
    first = {key for _, key in claimed}
    yield from (key for _, key in claimed)
    yield from (key for _, key in pods.pending if key not in first)


def quota_stream(name: str, pods: QuotaPods, book: Book) -> Iterator[Waiting]:
    """Quota `name`'s waiting units in its scan's order, each with its position in the
    quota, made as they are read."""
    seen: set[str] = set()
    position = 0
    for key in scan_order(name, pods, book.claims, book.records):
        record = book.records.get(key)
        if record is None or record.state is not PodState.PENDING:
            continue
        group = book.groups.get(record.group or "")
        if group is not None and group.state == PENDING:
            if group.key in seen:
                continue
            seen.add(group.key)
            unit = _group_unit(name, group, book.members)
        else:
            facts = record.facts
            request = dict(record.request_in(name))
            unit = Waiting(
                key, False, name, (key,), facts.priority, facts.created, request, record.reason
            )
        position += 1
        unit.positions.append((name, position))
        yield unit


def _group_unit(
    name: str, group: GroupRecord, members: Callable[[GroupRecord], list[PodRecord]]
) -> Waiting:
    """A pending group as one unit: the pods admitted with it (an elastic group's first
    `min`), their requests summed."""
    mine = [m for m in members(group) if m.state is PodState.PENDING]
    mine = mine[: group.spec.min if group.spec.elastic else group.spec.size]
    request: dict[str, int] = {}
    for member in mine:
        add_amounts(request, member.request_in(name))
    return Waiting(
        group.key,
        True,
        name,
        tuple(m.key for m in mine),
        group.priority,
        group.completed,
        request,
        group.reason,
    )


def _level(member: TreeMember, need: Mapping[str, int]) -> float:
    """The parent's sharing level at which `member`'s runtime reaches `need`."""
    level = -NEVER
    for resource, amount in need.items():
        if resource not in member.resources:
            continue
        if amount > member.cap[resource]:
            return NEVER
        above = amount - member.guarantee[resource]
        weight = member.weight[resource]
        if weight <= 0:
            if above > 0:
                return NEVER
            continue
        # Exact enough: a division of integers is correctly rounded, so equal levels tie.
        level = max(level, (2 * above - 1) / (2 * weight))
    return level


def _ordered(
    member: TreeMember,
    below: Mapping[str, list[TreeMember]],
    streams: Mapping[str, Iterator[Waiting]],
) -> Iterator[Waiting]:
    """The units under `member` in the order room under it reaches them, each given its
    position under `member` as it is read (a quota's: its queue's order). A child's units
    keep their order and their levels grow along it, so the children's streams merge
    lazily: reading the first n under a member reads about n of its children's."""
    if member.is_quota:
        yield from streams.get(member.name, ())
        return
    merged = heapq.merge(
        *(_levelled(child, below, streams) for child in below.get(member.name, ())),
        key=lambda item: item[:3],
    )
    for position, (*_, unit) in enumerate(merged, 1):
        if member.config is not None:
            unit.positions.append((member.name, position))
        yield unit


def _levelled(
    child: TreeMember,
    below: Mapping[str, list[TreeMember]],
    streams: Mapping[str, Iterator[Waiting]],
) -> Iterator[tuple[float, str, int, Waiting]]:
    """`child`'s units with the level at which its parent's sharing reaches each."""
    need = dict(child.used)
    for index, unit in enumerate(_ordered(child, below, streams)):
        add_amounts(need, unit.request)
        yield (_level(child, need), child.name, index, unit)


def waiting_units(
    trees: Iterable[QuotaTree],
    quota_pods: Mapping[str, QuotaPods],
    book: Book,
    limit: int | None = None,
) -> list[Waiting]:
    """The waiting units of the live quotas, tree by tree (the default tree first), in the
    order the engine takes them (see the module docstring), with their positions; the
    first `limit` of each tree (None: all), whose positions are exact all the same."""
    out: list[Waiting] = []
    for tree in trees:
        below: dict[str, list[TreeMember]] = {}
        streams: dict[str, Iterator[Waiting]] = {}
        for member in tree.live_members():
            if member.config is None:
                continue
            below.setdefault(tree.path_up(member)[0].name, []).append(member)
            pods = quota_pods.get(member.name)
            if member.is_quota and pods is not None and pods.pending:
                streams[member.name] = quota_stream(member.name, pods, book)
        for children in below.values():
            children.sort(key=lambda child: child.name)
        if streams:
            out.extend(islice(_ordered(tree.root, below, streams), limit))
    for order, unit in enumerate(out, 1):
        unit.order = order
    return out
