"""The pod groups' clocks: the group timeout, the scheduling timeout, the requeue backoff.

Why a module of its own: docs/reference/pods.md's "Pod groups" gives a group three deadlines (a
`GroupIncomplete` warning once it has been incomplete for the group timeout; eviction
when its admitted pods are not all bound to Nodes within the scheduling timeout; the end
of a requeued group's backoff). Looking at every group at every round would cost each
event in proportion to all the groups there are; here a round looks only at the groups
whose state or pods changed since the last one (`GroupLedger.look`: their clocks start)
and at the deadlines that are due (a heap by time). An entry of the heap that no longer
applies (the group moved on, or its record went) is dropped when it comes up.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from typing import TYPE_CHECKING, Literal

from quotree.decisions import Decisions
from quotree.eviction import Eviction
from quotree.group_rebuild import INCONSISTENT
from quotree.group_records import ADMITTED, INCOMPLETE, PENDING, GroupRecord
from quotree.pods import PodState

if TYPE_CHECKING:
    from quotree.gang_admission import GangAdmission
    from quotree.group_ledger import GroupLedger

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "INCOMPLETE_QUIET", "GroupClocks", "named"]

#: The requeue backoff after the scheduling timeout: the first, doubling up to the last.
BACKOFF_FIRST = 60.0
BACKOFF_MAX = 3600.0
#: An incomplete group's pods are told why they wait (a `Pending` event each, once) when
#: it has been incomplete this long: the pods of a Job, or of any group made at once,
#: arrive within a moment of each other and need no event per pod and arrival for that.
INCOMPLETE_QUIET = 5.0

Kind = Literal["quiet", "incomplete", "placed", "backoff"]


class GroupClocks:
    """The deadlines of one engine's pod groups (see module docstring)."""

    def __init__(self, gangs: GangAdmission) -> None:
        self._gangs = gangs
        self._due: list[tuple[float, int, Kind, GroupRecord]] = []
        self._order = itertools.count()  # ties in time go in the order they were set

    def begin(self, book: GroupLedger, now: float, out: Decisions) -> None:
        """Start the clocks of the groups that changed; act on the deadlines due."""
        notes, book.rebuild.notes = book.rebuild.notes, []
        out.warnings.extend((key, INCONSISTENT, message) for key, message in notes)
        looked, book.look = book.look, {}
        for group in looked.values():
            if book.groups.get(group.key) is group:
                self._start(book, group, now, out)
        while self._due and self._due[0][0] <= now:
            _, _, kind, group = heapq.heappop(self._due)
            if book.groups.get(group.key) is not group:
                continue  # its record went
            if kind == "quiet":
                self._tell(book, group, now)
            elif kind == "incomplete":
                self._warn(group, now, out)
            elif kind == "placed":
                if group.state == ADMITTED and not group.placed and not group.evicted:
                    self._check_placed(book, group, now, out)
            else:
                self._backoff_over(book, group, now)

    def _set(self, when: float, kind: Kind, group: GroupRecord) -> None:
        heapq.heappush(self._due, (when, next(self._order), kind, group))

    def _start(self, book: GroupLedger, group: GroupRecord, now: float, out: Decisions) -> None:
        if group.state == INCOMPLETE and group.pods and group.incomplete_since is None:
            group.incomplete_since = now
            self._set(now + INCOMPLETE_QUIET, "quiet", group)
            self._set(now + self._gangs.group_timeout, "incomplete", group)
        elif group.state == ADMITTED and not group.placed and not group.evicted:
            self._check_placed(book, group, now, out)

    def _tell(self, book: GroupLedger, group: GroupRecord, now: float) -> None:
        since = group.incomplete_since
        if group.state != INCOMPLETE or group.told is not None or since is None:
            return
        if now - since < INCOMPLETE_QUIET:
            return  # an entry of an earlier spell
        group.told = set()
        book.say_incomplete(group)

    def _warn(self, group: GroupRecord, now: float, out: Decisions) -> None:
        timeout = self._gangs.group_timeout
        since = group.incomplete_since
        if group.state != INCOMPLETE or group.warned or not group.pods or since is None:
            return
        if now - since < timeout:
            return  # an entry of an earlier spell: this spell's own is still to come
        group.warned = True
        message = (
            f"pod group {group.key}: {len(group.pods)} of {group.spec.min} pods exist "
            f"after {timeout:g} s; they keep waiting and hold nothing"
        )
        for key in sorted(group.pods):
            out.warnings.append((key, "GroupIncomplete", message))

    def _backoff_over(self, book: GroupLedger, group: GroupRecord, now: float) -> None:
        if not group.not_before or now < group.not_before:
            return
        if not group.pods:  # requeued, its pods gone: it was kept for its backoff only
            book.drop(group)
            return
        group.not_before = 0.0  # its backoff is over: its quota looks again
        ledger = book.ledger
        if group.state == PENDING and group.quota in ledger.quota_pods:
            ledger.quota_pods[group.quota].room = None
            ledger.touched.add(group.quota)

    def _check_placed(
        self, book: GroupLedger, group: GroupRecord, now: float, out: Decisions
    ) -> None:
        """Are the group's admitted pods all bound to Nodes? If not within the scheduling
        timeout, the group is evicted ("Requeued") and waits a backoff."""
        timeout = self._gangs.scheduling_timeout
        admitted = [m for m in book.members(group) if m.state is PodState.ADMITTED]
        if all(m.facts.node_name for m in admitted):
            group.placed = True
            return
        if group.admitted_since is None:
            group.admitted_since = now
            self._set(now + timeout, "placed", group)
            return
        if now - group.admitted_since < timeout:
            return
        unbound = sum(1 for m in admitted if not m.facts.node_name)
        group.backoff = min(BACKOFF_MAX, group.backoff * 2 if group.backoff else BACKOFF_FIRST)
        group.not_before = now + group.backoff
        self._set(group.not_before, "backoff", group)
        reason = (
            f"pod group {group.key}: {unbound} of {len(admitted)} pods not scheduled to a Node "
            f"within {timeout:g} s; evicted, it waits again and is tried after "
            f"a backoff of {group.backoff:g} s"
        )
        planner = self._gangs.planner
        for member in admitted:
            if not member.evicting:
                planner.evict(member, "Preempted", reason, out)
                out.evictions[-1] = dataclasses.replace(
                    named(out.evictions[-1], group), kind="Requeued"
                )
        self._gangs.evicted(group)


def named(eviction: Eviction, group: GroupRecord) -> Eviction:
    """The eviction of one of `group`'s pods, naming the group and its Job."""
    return dataclasses.replace(eviction, group=group.key, job=group.job)
