"""An admitted pod group's reservation: the room of its pods that ended, kept for the pods
that replace them.

Why a module of its own: docs/reference/pods.md's "Pod groups" says an admitted group keeps its
reservation (N times its pods' request) until it ends or is evicted, and a pod that
replaces one of its pods that ended or failed is admitted at once, within N. The room is
kept the way the pod held it: when an admitted pod of the group leaves (not evicted), its
record becomes a slot and what it was charged stays charged, as used and as raw request,
in every tree that charged it (and outside the others), so no other unit takes it and
runtime does not lend it. A replacement whose request fits in a slot takes the slot's
place (`take`): the slot's charge is released and the pod admitted in the same round, on
the slot's flavor. The group's end (its pods all gone and, for a Job, the Job gone or
finished) or its eviction releases every slot (`release`).
"""

from __future__ import annotations

from quotree.group_records import GroupRecord
from quotree.hold import Holds
from quotree.ledger import Ledger
from quotree.pods import PodRecord
from quotree.trees import Forest

__all__ = ["Reservations"]


class Reservations:
    """Charging and releasing pod groups' slots (see module docstring)."""

    def __init__(self, ledger: Ledger, forest: Forest, holds: Holds) -> None:
        self._ledger = ledger
        self._forest = forest
        self._holds = holds

    def keep(self, group: GroupRecord, record: PodRecord) -> None:
        """Admitted pod `record` of `group` left (forgotten by the intake): its room is
        charged again, as a slot of the group."""
        group.slots.append(record)
        self._charge(record, 1)

    def take(
        self, group: GroupRecord, record: PodRecord, *, running: bool = False
    ) -> PodRecord | None:
        """The slot that pod `record` replaces (its charge within the slot's, in every
        quota), released; None: none fits it. A pod running already (`running`) takes the
        first slot if none fits. With flavors, `record` is charged on the group's flavor
        first (the caller's). The replacement of a core pod joins the core."""
        slot = self.slot_for(group, record)
        if slot is None and running and group.slots:
            slot = group.slots[0]
        if slot is None:
            return None
        group.slots.remove(slot)
        self._charge(slot, -1)
        if slot.key in group.core_slots:
            group.core_slots.discard(slot.key)
            group.core.add(record.key)
        return slot

    def slot_for(self, group: GroupRecord, record: PodRecord) -> PodRecord | None:
        """The first slot of `group` whose charge covers `record`'s, in every quota."""
        for slot in group.slots:
            if (slot.quota, slot.also) == (record.quota, record.also) and all(
                _within(record.request_in(q), slot.request_in(q))
                for q in (record.quota, *record.also)
                if q is not None
            ):
                return slot
        return None

    def release(self, group: GroupRecord) -> None:
        """The group ended or is evicted: every slot's room is given back."""
        for slot in group.slots:
            self._charge(slot, -1)
        group.slots.clear()
        group.core_slots.clear()

    def _charge(self, record: PodRecord, sign: int) -> None:
        assert record.quota is not None
        quotas = (record.quota, *record.also)
        names: list[str] = []
        for quota in quotas:
            amounts = record.request_in(quota)
            tree = self._forest.tree_of(quota)
            tree.add_request(quota, amounts, sign)
            tree.add_used(quota, amounts, sign)
            names.extend(amounts)
            self._ledger.touched.add(quota)
            if sign < 0:
                # Room given back: the quota and the queues behind it look again.
                pods = self._ledger.quota_pods.get(quota)
                if pods is not None:
                    pods.room = None
                self._ledger.released_in.add(quota)
        if self._forest.several:
            self._forest.charge_outside(record, sign)
        self._holds.changed(quotas, names)


def _within(amounts: dict[str, int], bound: dict[str, int]) -> bool:
    return all(amount <= bound.get(resource, 0) for resource, amount in amounts.items())
