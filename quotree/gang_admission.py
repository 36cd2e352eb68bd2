"""Pod groups in the decision loop: admitted whole, evicted whole, requeued when unplaced.

Why a module of its own: semantics.md's "Admission" takes units, a pod or a pod group,
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
from quotree.accounts import TreeNode
from quotree.decisions import Decisions
from quotree.eviction import Eviction
from quotree.fit import Fit, Rule, Seat
from quotree.group_ledger import ADMITTED, INCOMPLETE, PENDING, GroupLedger, GroupRecord
from quotree.group_unit import GroupUnit
from quotree.pods import PodRecord, PodState
from quotree.quantity import add_amounts, format_quantity

if TYPE_CHECKING:
    from quotree.decide import Decider
    from quotree.planner import Clock
    from quotree.reclaim import Refusal

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "GangAdmission"]

#: The requeue backoff after the scheduling timeout: the first, doubling up to the last.
BACKOFF_FIRST = 60.0
BACKOFF_MAX = 3600.0


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
        node = here.node
        assert node is not None
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
            verdict = self._place(name, node, here, members, out)
            if verdict is None:
                return False
            unit = GroupUnit(members)
        else:
            verdict = self._decider.seats.check(unit, name, here)
        if verdict.fits:
            self._admit(group, name, node, members, out)
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
        if planner.worth_planning(unit, verdict, lowest):
            # The same plan as for a single pod (in-quota preemption, reclaim when it pays),
            # for the group's summed request; `finish` widens its victims to whole groups.
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
            if plan.evicted:
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
        node: TreeNode,
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
            message = admission.fit_message(name, node, member)
            decider._admitted(out, member, f"{message}, with pod group {group.key}")
        group.state, group.reason = ADMITTED, f"admitted to ElasticQuota {name}"
        group.core = {m.key for m in members}
        group.admitted_since, group.placed = None, False

    def _place(
        self, name: str, node: TreeNode, here: Seat, members: list[PodRecord], out: Decisions
    ) -> Fit | None:
        """The first flavor all the group's pods allow where the group fits (all of them
        charged there); else they wait together on the first where only an ancestor stands
        in the way, else on the first. None: no flavor allows all of them."""
        placement = self._decider.placement
        config = node.config
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
            if flavor != wait and not admission.may_fit(node, [], summed):
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
        node = here.node
        assert node is not None
        request = unit.request_in(name)
        for member in (node, *here.path):
            for resource in sorted(node.resources):
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
        if verdict.broken is Rule.MISSING or verdict.node is None:
            text = f"ElasticQuota {where} does not exist"
        elif verdict.broken is Rule.ANCESTOR:
            tree = decider.tree_of(where)
            decider.reasons.waiting_on_ancestor.add(name)
            left = decider.planner.seconds_left(name, members[0].key, decider.reasons.now)
            lenders = decider.reasons.lent(verdict.node, verdict.amounts, tree, left)
            text = admission.why_waits(
                verdict.node, unit.request_in(where), verdict.amounts, lenders
            )
            if refusal is not None:
                text = f"{text}; {refusal.words()}"
        else:
            several = decider.forest.several
            text = admission.why_not(
                where,
                verdict.node,
                decider.ledger.quota_pods[where],
                unit,
                verdict.amounts,
                non_preemptible=verdict.broken is Rule.NON_PREEMPTIBLE,
                tree=decider.forest.label(verdict.node) if several else None,
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

    def begin(self, now: float, out: Decisions) -> None:
        """The clocks: `GroupIncomplete` warnings, the scheduling timeout, backoffs ending."""
        book = self.book
        if book is None:
            return
        ledger = self._decider.ledger
        for group in list(book.groups.values()):
            if not group.pods:  # requeued, its pods gone: kept for its backoff only
                if now >= group.not_before:
                    del book.groups[group.key]
                continue
            if group.state == INCOMPLETE:
                if group.incomplete_since is None:
                    group.incomplete_since = now
                elif not group.warned and now - group.incomplete_since >= self.group_timeout:
                    group.warned = True
                    spec = group.spec
                    message = (
                        f"pod group {group.key}: {len(group.pods)} of {spec.min} pods exist "
                        f"after {self.group_timeout:g} s; they keep waiting and hold nothing"
                    )
                    for key in sorted(group.pods):
                        out.warnings.append((key, "GroupIncomplete", message))
            elif group.state == ADMITTED and not group.placed and not group.evicted:
                self._check_placed(book, group, now, out)
            elif group.state == PENDING and group.not_before and now >= group.not_before:
                group.not_before = 0.0  # its backoff is over: its quota looks again
                if group.quota is not None and group.quota in ledger.quota_pods:
                    ledger.quota_pods[group.quota].room = None
                    ledger.touched.add(group.quota)

    def _check_placed(
        self, book: GroupLedger, group: GroupRecord, now: float, out: Decisions
    ) -> None:
        admitted = [m for m in book.members(group) if m.state is PodState.ADMITTED]
        if all(m.facts.node_name for m in admitted):
            group.placed = True
            return
        if group.admitted_since is None:
            group.admitted_since = now
            return
        if now - group.admitted_since < self.scheduling_timeout:
            return
        unbound = sum(1 for m in admitted if not m.facts.node_name)
        group.backoff = min(BACKOFF_MAX, group.backoff * 2 if group.backoff else BACKOFF_FIRST)
        group.not_before = now + group.backoff
        reason = (
            f"pod group {group.key}: {unbound} of {len(admitted)} pods not scheduled to a Node "
            f"within {self.scheduling_timeout:g} s; evicted, it waits again and is tried after "
            f"a backoff of {group.backoff:g} s"
        )
        planner = self._decider.planner
        for member in admitted:
            if not member.evicting:
                planner.evict(member, "Preempted", reason, out)
                last = _named(out.evictions[-1], group)
                out.evictions[-1] = dataclasses.replace(last, kind="Requeued")
        group.evicted = True

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
            elif group is not None:
                out.evictions[index] = _named(eviction, group)
                group.evicted = True
                for member in book.members(group):
                    if member.state.value == ADMITTED and not member.evicting:
                        planner.evict(member, "Preempted", eviction.reason, out)
                        out.evictions[-1] = dataclasses.replace(
                            out.evictions[-1], kind=eviction.kind
                        )
            index += 1


def _named(eviction: Eviction, group: GroupRecord) -> Eviction:
    return dataclasses.replace(eviction, group=group.key, job=group.job)
