"""Pod groups in the decision loop: admitted whole, evicted whole, requeued when unplaced.

Why a module of its own: docs/semantics.md's "Admission" takes units, a pod or a pod group,
and the decision loop (`decide.Decider`) was written for pods. For a group it hands
over here when its scan meets the group's first pod: the group's request is its pods'
summed (its `min` pods, for an elastic group), checked by the same `fit.check` in every
tree, on one flavor for all of them, and all its pods are admitted in that one round or
none is. After each round, the evictions the planner asked for are widened to whole
groups (its victims are pods; all of a group's pods go, or none). Before each round the
clocks are read: a group incomplete for the group timeout gets a `GroupIncomplete`
warning; an admitted group whose pods are not all bound to a Node within the scheduling
timeout is evicted ("Requeued") and waits again after a backoff (1 min, doubling, at
most 1 h). Once a group is admitted, its pods that were not part of it (an elastic
group's pods above `min`, replacements) are admitted one by one like single pods.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING

from quotree import admission
from quotree.accounts import TreeMember
from quotree.decisions import Decisions
from quotree.fit import Fit, Rule, Seat
from quotree.group_clocks import BACKOFF_FIRST, BACKOFF_MAX, GroupClocks, named
from quotree.group_ledger import GroupLedger
from quotree.group_records import ADMITTED, PENDING, GroupRecord
from quotree.group_unit import GroupUnit
from quotree.planner import EvictionPlanner
from quotree.pods import PodRecord, PodState
from quotree.quantity import add_amounts, format_quantity

if TYPE_CHECKING:
    from quotree.decide import Decider
    from quotree.planner import Clock
    from quotree.reclaim import Refusal

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "GangAdmission"]


class GangAdmission:
    """The decision loop's pod groups (see module docstring)."""

    def __init__(
        self, decider: Decider, *, group_timeout: float, scheduling_timeout: float
    ) -> None:
        self._decider = decider
        self.book: GroupLedger | None = None  # set by the engine once its intake exists
        self.group_timeout = group_timeout
        self.scheduling_timeout = scheduling_timeout
        self._seat: Seat | None = None  # the scan under way, and the groups it decided
        self._done: set[str] = set()
        #: The group timeout, the scheduling timeout and the backoff (`group_clocks.py`).
        self.clocks = GroupClocks(self)

    # ------------------------------------------------------------ the scan

    def scan(
        self,
        name: str,
        here: Seat,
        record: PodRecord,
        out: Decisions,
        *,
        lowest: dict[str, int],
        clocks: dict[str, Clock],
    ) -> bool | None:
        """Decide the group of pending pod `record` (met first in quota `name`'s scan `here`).

        None: the pod is the decider's, as a single pod (its group is admitted, and it
        was not part of it). Else True when it evicted (in-quota preemption)."""
        book = self.book
        group = book.groups.get(record.group or "") if book is not None else None
        if book is None or group is None or group.state == ADMITTED:
            return None
        if self._seat is not here:
            self._seat, self._done = here, set()
        if group.key in self._done:
            return False
        self._done.add(group.key)
        members = [m for m in book.members(group) if m.state is PodState.PENDING]
        members = members[: group.spec.min if group.spec.elastic else group.spec.size]
        member = here.member
        assert member is not None
        assert group.state == PENDING
        now = self._decider.reasons.now
        if now < group.not_before:
            self._say(
                group,
                members,
                f"waiting: pod group {group.key} was requeued (its pods were not all scheduled "
                f"to a Node within {self.scheduling_timeout:g} s); it tries again in "
                f"{group.not_before - now:g} s",
                out,
            )
            return False
        unit = GroupUnit(members)
        if any(m.flavor_needed for m in members):
            verdict = self._place(name, member, here, members, out)
            if verdict is None:
                return False
            unit = GroupUnit(members)
        else:
            verdict = self._decider.seats.check(unit, name, here)
        if verdict.fits:
            held = self._decider.planner.room_held(unit, self._decider.seats)
            if held is None:
                self._admit(group, name, member, members, out)
            else:  # the room is being freed for another unit: looked at again next round
                self._say(group, members, held, out)
                self._decider.reasons.waiting_on_ancestor.add(name)
            return False
        never = self._never_fits(group, name, here, unit)
        if never is not None:
            self._say(group, members, never, out)
            return False
        lead = members[0]
        decider = self._decider
        planner = decider.planner
        if planner.in_flight(lead):
            self._say(group, members, admission.waiting_for_victims(lead), out)
            return False
        refusal = None
        if planner.worth_planning(
            unit, verdict, lowest, partial(decider.seats.broken_elsewhere, unit)
        ):
            # The same plan as for a single pod (in-quota preemption, reclaim when it pays),
            # for the group's summed request; `finish` widens its victims to whole groups.
            start = len(out.evictions)
            plan = planner.plan(
                unit,
                verdict,
                check=partial(decider.seats.broken, unit, name, here),
                lenders=decider.reasons.holders,
                clock=partial(planner.waits, name, lead.key, now, clocks),
                lowest=lowest,
                now=now,
                out=out,
            )
            if plan.waits_for_evictions:
                self._say(group, members, admission.waiting_for_victims(lead), out)
                return False
            if plan.evicted:
                # The events name the group that preempts, not its first pod.
                reason = (
                    f"preempted by pod group {group.key} ({len(members)} pods, priority "
                    f"{group.priority}) within ElasticQuota {verdict.quota}"
                )
                for index in range(start, len(out.evictions)):
                    if out.evictions[index].kind == "Preempted":
                        out.evictions[index] = dataclasses.replace(
                            out.evictions[index], reason=reason
                        )
                self._say(group, members, admission.waiting_for_victims(lead), out)
                decider.evicted_for()
                return True
            refusal = plan.refusal
        self._explain(
            group, name=name, members=members, unit=unit, verdict=verdict, out=out, refusal=refusal
        )
        return False

    def _admit(
        self,
        group: GroupRecord,
        name: str,
        tree_member: TreeMember,
        members: list[PodRecord],
        out: Decisions,
    ) -> None:
        """All the group's pods in this one round, the same flavor, together in the order."""
        decider = self._decider
        seq = 0
        for member in members:  # the group's place in the in-quota order, together
            decider.admit(
                member, f"fits in ElasticQuota {name} with pod group {group.key}", seq=seq
            )
            seq = seq or member.admitted_seq
        for member in members:
            message = admission.fit_message(name, tree_member, member)
            decider._admitted(out, member, f"{message}, with pod group {group.key}")
        assert self.book is not None
        self.book.set_state(group, ADMITTED)
        group.reason = f"admitted to ElasticQuota {name}"
        group.core = {m.key for m in members}
        group.admitted_since, group.placed = None, False

    def _place(
        self,
        name: str,
        tree_member: TreeMember,
        here: Seat,
        members: list[PodRecord],
        out: Decisions,
    ) -> Fit | None:
        """The first flavor all the group's pods allow where the group fits (all of them
        charged there); else they wait together on the first where only an ancestor stands
        in the way, else on the first. None: no flavor allows all of them."""
        placement = self._decider.placement
        config = tree_member.config
        assert config is not None
        flavored = [m for m in members if m.flavor_needed]
        allowed = [placement.placing(m, config).allowed for m in flavored]
        common = [f for f in allowed[0] if all(f in a for a in allowed[1:])]
        group = self._group(members[0])
        if not common:
            self._say(
                group,
                members,
                f"waiting: no flavor of ElasticQuota {name} ({', '.join(config.flavors)}) is "
                f"allowed by every pod of pod group {group.key}",
                out,
            )
            return None
        tree = self._decider.tree_of(name)
        wait: str | None = None
        verdict: Fit | None = None
        for flavor in common:
            summed: dict[str, int] = {}
            for member in members:
                charged = (
                    placement.charge_on(member, config, flavor)
                    if member.flavor_needed
                    else member.request
                )
                add_amounts(summed, charged)
            if flavor != wait and not admission.may_fit(tree_member, [], summed):
                continue
            for member in flavored:
                placement.charge_to(member, flavor)
            tree.refresh()
            verdict = self._decider.seats.check(GroupUnit(members), name, here)
            if verdict.fits:
                return verdict
            if wait is None and verdict.quota == name and verdict.broken is Rule.ANCESTOR:
                wait = flavor
        target = wait or common[0]
        for member in flavored:
            placement.charge_to(member, target)
        tree.refresh()
        return self._decider.seats.check(GroupUnit(members), name, here)

    def _never_fits(self, group: GroupRecord, name: str, here: Seat, unit: GroupUnit) -> str | None:
        """The reason of a group whose total is over its quota's max (cap), an ancestor's or
        the cluster's capacity: it can never fit as things stand."""
        tree_member = here.member
        assert tree_member is not None
        request = unit.request_in(name)
        for member in (tree_member, *here.path):
            for resource in sorted(tree_member.resources):
                amount = request.get(resource, 0)
                bound = member.runtime[resource] if member.config is None else member.cap[resource]
                if amount > bound:
                    if member.config is None:
                        where = f"the cluster's capacity {format_quantity(bound, resource)}"
                    else:
                        where = (
                            f"{member.config.describe()}'s max {format_quantity(bound, resource)}"
                        )
                    return (
                        f"waiting: pod group {group.key} can never fit: its "
                        f"{len(unit.members)} pods request {resource} "
                        f"{format_quantity(amount, resource)} in all, over {where}"
                    )
        return None

    def _explain(
        self,
        group: GroupRecord,
        *,
        name: str,
        members: list[PodRecord],
        unit: GroupUnit,
        verdict: Fit,
        out: Decisions,
        refusal: Refusal | None = None,
    ) -> None:
        decider = self._decider
        where = verdict.quota
        if verdict.broken is Rule.MISSING or verdict.member is None:
            text = f"ElasticQuota {where} does not exist"
        elif verdict.broken is Rule.ANCESTOR:
            tree = decider.tree_of(where)
            decider.reasons.waiting_on_ancestor.add(name)
            left = decider.planner.seconds_left(name, members[0].key, decider.reasons.now)
            lenders = decider.reasons.lent(verdict.member, verdict.amounts, tree, left)
            text = admission.why_waits(
                verdict.member, unit.request_in(where), verdict.amounts, lenders
            )
            if refusal is not None:
                text = f"{text}; {refusal.words()}"
        else:
            several = decider.forest.several
            text = admission.why_not(
                where,
                verdict.member,
                decider.ledger.quota_pods[where],
                unit,
                verdict.amounts,
                non_preemptible=verdict.broken is Rule.NON_PREEMPTIBLE,
                tree=decider.forest.label(verdict.member) if several else None,
            )
        self._say(group, members, f"pod group {group.key} ({len(members)} pods) {text}", out)

    def _say(self, group: GroupRecord, members: list[PodRecord], text: str, out: Decisions) -> None:
        group.reason = text
        for member in members:
            self._decider.reasons.set(member, text, out)

    def _group(self, record: PodRecord) -> GroupRecord:
        assert self.book is not None
        assert record.group is not None
        return self.book.groups[record.group]

    # ------------------------------------------------------------ around a round

    @property
    def planner(self) -> EvictionPlanner:
        return self._decider.planner

    def begin(self, now: float, out: Decisions) -> None:
        """The clocks (`group_clocks`), then the pods that replace pods of admitted groups."""
        book = self.book
        if book is None:
            return
        self.clocks.begin(book, now, out)
        if book.replacing:
            replacing, book.replacing = book.replacing, set()
            for key in sorted(replacing):
                self._replace(book, key, out)

    def _replace(self, book: GroupLedger, key: str, out: Decisions) -> None:
        """Pending pod `key` of an admitted group takes a slot of its reservation: admitted
        at once, on the group's flavor, in the group's place in the in-quota order."""
        decider = self._decider
        record = decider.ledger.pods.get(key)
        group = book.groups.get(record.group or "") if record is not None else None
        if record is None or group is None or record.state is not PodState.PENDING:
            return
        if group.state != ADMITTED or group.evicted or not group.slots:
            return
        flavor = group.slots[0].flavor
        if record.flavor_needed and flavor is not None:
            decider.placement.charge_to(record, flavor)
        slot = book.reservations.take(group, record)
        if slot is None:
            return  # it asks more than a slot holds: it waits as a pod that joins
        assert record.quota is not None
        seq = slot.admitted_seq if record.key in group.core else 0
        text = (
            f"fits in ElasticQuota {record.quota}: it replaces a pod of pod group "
            f"{group.key} within the group's reservation"
        )
        decider.admit(record, text, seq=seq)
        decider._admitted(out, record, f"admitted: {text}")

    def evicted(self, group: GroupRecord) -> None:
        """The group's eviction was asked for: its reservation goes now."""
        group.evicted = True
        assert self.book is not None
        self.book.reservations.release(group)

    def finish(self, out: Decisions, start: int) -> None:
        """Widen the evictions asked for since `start` to whole groups (their other admitted
        pods go in the same round), each naming its group and Job."""
        book = self.book
        if book is None or len(out.evictions) == start:
            return
        planner = self._decider.planner
        ledger = self._decider.ledger
        index = start
        while index < len(out.evictions):
            eviction = out.evictions[index]
            record = ledger.pods.get(eviction.pod)
            group = book.groups.get(record.group or "") if record is not None else None
            if group is not None and eviction.pod not in group.core:
                # A pod that joined an admitted group (above an elastic group's min) goes alone.
                out.evictions[index] = dataclasses.replace(eviction, group=group.key)
                group.dropped.add(eviction.pod)
            elif group is not None:
                out.evictions[index] = named(eviction, group)
                self.evicted(group)
                for member in book.members(group):
                    if member.state.value == ADMITTED and not member.evicting:
                        planner.evict(member, "Preempted", eviction.reason, out)
                        out.evictions[-1] = dataclasses.replace(
                            out.evictions[-1], kind=eviction.kind
                        )
            index += 1
