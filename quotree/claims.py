"""Claims: the room evictions free belongs to the unit they were asked for.

Why a module of its own: the eviction planner (`planner.py`) asks for evictions only for a
waiting unit that then fits (docs/semantics.md, "In-quota preemption (unless
`preemption.withinQuota: Never`)" and "Reclaim (getting lent quota back), and only when it
pays"). Between asking and the victims being gone, the room they free must stay that unit's:
it is looked at first in its quota's queue and in the round, other units are admitted only
when they still fit once it is in (`room_held`), and no pending pod's demand moves to
another flavor (`keeps_flavor`: runtime follows demand, and the plan counted on the runtimes
as they were). This part keeps those claims and answers those questions; the planner plans
on top of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from quotree.fit import Seats
from quotree.ledger import Ledger
from quotree.pods import Claimant, PodRecord, PodState
from quotree.reclaim import trial
from quotree.trees import Forest

__all__ = ["ClaimBook"]


class ClaimBook:
    """The units evictions were asked for, and the room their victims leave."""

    def __init__(self, ledger: Ledger, forest: Forest) -> None:
        self.ledger = ledger
        self.forest = forest
        #: unit key -> its quota, for the units whose victims are being evicted (or gone)
        self.claims: dict[str, str] = {}
        #: The quotas with a unit that fits but waits behind the evictions under way for
        #: another unit (`room_held`): looked at again, whatever their room, next round.
        self.held: set[str] = set()
        #: The quotas with a pending pod that `keeps_flavor` kept on its flavor, where it did
        #: not fit: placed again, whatever their room, once no evictions are under way.
        self.kept: set[str] = set()
        #: The units whose victims are being evicted, with those victims (`_under_way`), as
        #: of `Ledger.eviction_changes` = `_flight_at`; None: to be listed again.
        self._flight: list[tuple[PodRecord, list[PodRecord]]] | None = None
        self._flight_at = 0

    def forget_plans(self) -> None:
        """Something was admitted or evicted: what plans remember is stale (the planner's)."""

    def queue(self, quota: str, pending: Sequence[tuple[object, str]]) -> list[str]:
        """The pending units of `quota` (its sorted queue) in the order they are looked at:
        a unit that evictions were asked for first (the room its victims leave is its)."""
        keys = [key for _, key in pending]
        claimed = [key for key in keys if self.claims.get(key) == quota]
        if not claimed:
            return keys
        return claimed + [key for key in keys if key not in claimed]

    def claimants(self) -> set[str]:
        """The quotas with a unit that evictions were asked for (it goes first, so that
        nobody else takes the room its victims leave); forgets the units admitted or gone.
        Called as a round starts."""
        self.forget_plans()
        quotas = set()
        for key, quota in list(self.claims.items()):
            record = self.ledger.pods.get(key)
            if record is None or record.state is not PodState.PENDING:
                del self.claims[key]
                self._flight = None
            else:
                quotas.add(quota)
        return quotas

    def in_flight(self, record: Claimant) -> bool:
        """The unit's victims are still being evicted."""
        pods = self.ledger.pods
        return any(v in pods and pods[v].evicting for v in record.victims)

    def unclaim(self, key: str) -> None:
        """The unit is admitted or gone: its claim on its victims' room ends."""
        self.forget_plans()  # the numbers plans were made on changed
        if self.claims.pop(key, None) is not None:
            self._flight = None

    def _orphans(self, claimed: set[str]) -> list[PodRecord]:
        """The pods being evicted that no waiting unit's plan counts on (`claimed`: the unit
        they were for was admitted with other room meanwhile): their room comes back all the
        same, and every plan counts it (`Ledger.evicting`)."""
        pods = self.ledger.pods
        return [
            pods[key]
            for key in sorted(self.ledger.evicting - claimed)
            if key in pods and pods[key].state is PodState.ADMITTED
        ]

    def _under_way(self, key: str) -> Iterator[tuple[PodRecord, list[PodRecord]]]:
        """The other units whose victims are being evicted, with those victims: a plan counts
        them as gone and the units as admitted (the room those victims leave is theirs).
        Kept until a claim or an eviction changes (`Ledger.eviction_changes`)."""
        pods = self.ledger.pods
        if self._flight is None or self._flight_at != self.ledger.eviction_changes:
            self._flight_at = self.ledger.eviction_changes
            self._flight = []
            for other in self.claims:
                unit = pods.get(other)
                if unit is None:
                    continue
                victims = [pods[v] for v in unit.victims if v in pods and pods[v].evicting]
                if victims:
                    self._flight.append((unit, victims))
        for unit, victims in self._flight:
            if unit.key != key and unit.state is PodState.PENDING and pods.get(unit.key) is unit:
                yield unit, victims

    def keeps_flavor(self, record: PodRecord) -> bool:
        """Whether a pending pod already charged to a flavor stays there this time: while
        evictions are under way, no pod's demand moves to another flavor (runtime follows
        demand, and the plans under way counted on the runtimes as they were). Once the
        victims are gone, its quota is looked at again (`kept`, `released`): nothing else
        need change for it, and another flavor may have had room all along."""
        return record.flavor is not None and self.under_way()

    def released(self) -> set[str]:
        """The quotas whose pods `keeps_flavor` kept (`kept`), once no evictions are under
        way (forgotten then); none while some still are."""
        if not self.kept or self.under_way():
            return set()
        kept, self.kept = self.kept, set()
        return kept

    def under_way(self, key: str = "") -> bool:
        """Evictions are under way for a unit (other than `key`)."""
        return bool(self.claims) and next(self._under_way(key), None) is not None

    def room_held(self, record: Claimant, seats: Seats) -> str | None:
        """Why a unit that fits now must still wait: admitting it would take room that the
        evictions under way free for other units. Their victims gone, those units are
        admitted first (the ones that then fit, in the order asked), and `record` must
        still fit after them. None: it may be admitted."""
        under_way = list(self._under_way(record.key)) if self.claims else []
        if not under_way:
            return None
        with trial(self.forest) as taken:
            for _, victims in under_way:
                taken.take(victims)
            for unit, _ in under_way:
                assert unit.quota is not None
                if seats.check(unit, unit.quota, seats.seat(unit.quota)).fits:
                    taken.admit(unit, ())
            assert record.quota is not None
            fits = seats.check(record, record.quota, seats.seat(record.quota)).fits
        if fits:
            return None
        self.held.add(record.quota)
        names = ", ".join(sorted(unit.key for unit, _ in under_way))
        return f"waiting: the room it fits in is being freed for {names} (victims being evicted)"
