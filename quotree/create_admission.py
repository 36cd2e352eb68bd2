"""Admission at creation: a pod that fits when it is created is admitted at once.

Why a module of its own: the mutating webhook of the replica that decides asks, for a
new single pod, whether docs/semantics.md's "Admission" lets it in now (every ancestor, every
tree, a flavor, the non-preemptible rule) with no pod of its quota waiting ahead of it in
the order (docs/webhooks.md, "Admission at creation"). If so, the pod is created without the gate,
and until the cluster shows it the engine holds its room: a reservation, named by a token the pod
carries (`RESERVATION_ANNOTATION`). The pod has no name yet (a `generateName` pod gets it
after the webhooks), so the reservation is not a pod record: it is the record's charge
(request and used, in every tree that charges the pod, on its flavor), kept apart from
the admitted pods so that no eviction ever picks it. When the pod shows up the charge is
released (`take`) and the pod itself taken in, admitted, in the same step; a pod that
does not show up in time (a later webhook refused it, the client gave up) gives its room
back (`expire`), and so does one deleted before the engine took it in (`release`).

The check is the decision loop's own for a pod in its turn (`decide.Decider`): the pod
is queued as it will be created, checked, and taken out again, whatever the answer.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from quotree import admission
from quotree.decide import Decider
from quotree.fit import Seat
from quotree.group_ledger import GroupLedger
from quotree.placement import Placed
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.quantity import add_amounts
from quotree.runtime import QuotaTree
from quotree.standings import Standings
from quotree.trees import maintenance_reason

__all__ = ["RESERVATION_ANNOTATION", "CreateAdmission", "CreateReservations"]

#: The annotation a pod admitted at creation carries: the token of its reservation.
RESERVATION_ANNOTATION = "quotree.io/admitted-at-create"

#: The place in the in-quota order a pod admitted now would take: after every other.
_LAST = sys.maxsize


@dataclass(frozen=True, slots=True)
class CreateAdmission:
    """What the webhook writes into an admitted pod, and what the operator tells of it."""

    token: str
    quota: str
    #: The Admitted event's message (as the decision loop words it).
    message: str
    #: `in-quota` or `over-quota` (the `quotree.io/capacity` label).
    standing: str
    #: The ResourceFlavor it is charged to, and the node labels that steer it there.
    flavor: str | None = None
    node_labels: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Held:
    admission: CreateAdmission
    expires: float
    #: (tree, quota, amounts) as charged: given back to the same trees, whatever moved since.
    charges: list[tuple[QuotaTree, str, dict[str, int]]]
    record: PodRecord
    preemptible: bool


class CreateReservations:
    """Reservations of pods admitted at creation, by token (see module docstring)."""

    def __init__(self, decider: Decider, groups: GroupLedger) -> None:
        self._ledger = decider.ledger
        self._forest = decider.forest
        self._holds = decider.holds
        self._decider = decider
        self._groups = groups
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, token: object) -> bool:
        return token in self._held

    def admit(self, facts: PodFacts, token: str, expires: float) -> CreateAdmission | None:
        """Admit the pod `facts` describes (gated, as it would be created) if it fits now
        and no pod of its quota waits ahead of it: its room is reserved until `expires`
        (or until `take`/`release`; reservations are made in the order of their
        `expires`). None: it is created gated and waits its turn."""
        if token in self._held or facts.key in self._ledger.pods or not facts.gated:
            return None
        record = self._groups.observe(facts)
        try:
            admitted = self._check(record) if record is not None else None
        finally:
            self._groups.forget(facts.key)
        if admitted is None or record is None:
            return None
        held = _Held(
            CreateAdmission(token, *admitted),
            expires,
            [],
            record,
            record.preemptible,
        )
        self._charge(held, 1)
        self._held[token] = held
        return held.admission

    def take(self, token: str) -> CreateAdmission | None:
        """The pod of reservation `token` is here: its room is given back, for the caller
        to take the pod itself in (`Engine.observe_pod`) at once. None: no such
        reservation (released already, or another replica's)."""
        held = self._held.pop(token, None)
        if held is None:
            return None
        self._charge(held, -1)
        return held.admission

    def release(self, token: str) -> bool:
        """The pod of reservation `token` is gone before it was taken in: its room is given
        back. False: no such reservation."""
        return self.take(token) is not None

    def expire(self, now: float) -> list[CreateAdmission]:
        """Release the reservations whose pods did not show up by their time (made in the
        order of their times: only the due ones are looked at)."""
        due: list[str] = []
        for token, held in self._held.items():
            if held.expires > now:
                break
            due.append(token)
        return [admission for token in due if (admission := self.take(token)) is not None]

    # ------------------------------------------------------------ the check

    def _check(self, record: PodRecord) -> tuple[str, str, str, str | None, dict[str, str]] | None:
        """(quota, message, standing, flavor, node labels) when the new pod is admitted now."""
        name = record.quota
        if name is None or record.state is not PodState.PENDING or record.group is not None:
            return None
        ledger, decider = self._ledger, self._decider
        pods = ledger.quota_pods[name]
        if not pods.pending or pods.pending[0][1] != record.key:
            return None  # a pod waits ahead of it: it takes precedence
        order = record.order()
        for other in record.also:
            queue = ledger.quota_pods.get(other)
            if queue is not None and queue.pending and queue.pending[0][0] < order:
                return None
        tree = self._forest.tree_of(name)
        tree.refresh(name)
        member = tree.member(name)
        if member is None or not member.is_quota:
            return None
        if maintenance_reason(decider.maintenance, tree, member) is not None:
            return None
        path = tree.path_up(member)
        seats = decider.seats
        here = Seat(member, path, pods)
        fits = False
        if record.flavor_needed:
            placed = decider.placement.place(name, member, path, record, seats.check, placed={})
            if placed is Placed.NOWHERE:
                return None
            fits = placed is Placed.FITS
        if not fits and not seats.check(record, name, here).fits:
            return None
        if decider.planner.room_held(record, seats) is not None:
            return None  # the room is being freed for another unit
        message = admission.fit_message(name, member, record)
        standing = _standing(pods.standings, record)
        flavor = decider.flavors.get(record.flavor) if record.flavor is not None else None
        labels = dict(flavor.node_labels) if flavor is not None else {}
        return name, message, standing, record.flavor, labels

    # ------------------------------------------------------------ the charge

    def _charge(self, held: _Held, sign: int) -> None:
        """Charge (1) or give back (-1) the reserved pod's request and used, as an admitted
        pod is charged, in every tree that charges it."""
        record = held.record
        assert record.quota is not None
        quotas = (record.quota, *record.also)
        if sign > 0:
            held.charges = [
                (self._forest.tree_of(q), q, dict(record.request_in(q))) for q in quotas
            ]
        names: list[str] = []
        for tree, quota, amounts in held.charges:
            tree.add_request(quota, amounts, sign)
            tree.add_used(quota, amounts, sign)
            names.extend(amounts)
            self._ledger.touched.add(quota)
            pods = self._ledger.quota_pods.get(quota)
            if pods is not None and not held.preemptible:
                add_amounts(pods.non_preemptible_used, amounts, sign)
            if sign < 0:
                if pods is not None:
                    pods.room = None  # room given back: its pending pods look again
                self._ledger.released_in.add(quota)
        if self._forest.several:
            self._forest.charge_outside(record, sign)
        self._holds.changed(quotas, names)


def _standing(standings: Standings, record: PodRecord) -> str:
    """The pod's in-quota / over-quota label were it admitted now, after every other pod
    of its place; the quota's labels are left as they were."""
    seq = record.admitted_seq
    record.admitted_seq = _LAST
    standings.add(record)
    try:
        return standings.label(record.key)
    finally:
        standings.remove(record)
        record.admitted_seq = seq
