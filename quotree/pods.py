"""The engine's records of pods, and each quota's admitted pods and pending queue.

Why a module of its own: admission, preemption, reclaim and the reports all
read the same records; this module owns their shape, the two orders pods are
taken in (importance for admission, its reverse for eviction) and the sorted
pending queue, so that none of them keeps a copy.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from quotree.podfacts import PodFacts
from quotree.quantity import add_amounts
from quotree.standings import Standings

__all__ = [
    "Claimant",
    "Placing",
    "PodRecord",
    "PodState",
    "QuotaPods",
    "Unit",
    "least_important_first",
]


class PodState(StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"
    PREEMPTED = "preempted"
    RECLAIMED = "reclaimed"
    UNMANAGED = "unmanaged"


class Unit(Protocol):
    """What the admission check reads of a unit: a pod (`PodRecord`) or a pod group
    (`gang_admission.GroupUnit`, its pods summed)."""

    @property
    def request(self) -> dict[str, int]: ...
    @property
    def preemptible(self) -> bool: ...
    @property
    def also(self) -> tuple[str, ...]: ...
    def request_in(self, quota: str) -> dict[str, int]: ...


class Claimant(Unit, Protocol):
    """A waiting unit the eviction planner plans for (`planner.EvictionPlanner.plan`): a pod,
    or a pod group (`gang_admission.GroupUnit`: its first pod stands for it)."""

    @property
    def key(self) -> str: ...
    @property
    def quota(self) -> str | None: ...
    @property
    def facts(self) -> PodFacts: ...

    victims: frozenset[str]


@dataclass(slots=True)
class Placing:
    """The flavor look-ups for one pod that splits its request by flavor
    (`Placement.placing`), valid while its quota's configuration (`config`, by identity) and
    the ResourceFlavors (`generation`) stay as they were."""

    config: object
    generation: int
    allowed: list[str]  # the quota's flavors, in its order, that exist and the pod allows
    likeness: tuple[object, ...]  # pods alike here are placed alike (`Placement.place`)
    charges: dict[str, dict[str, int]] = field(default_factory=dict)  # per flavor tried


@dataclass(slots=True)
class PodRecord:
    """The engine's view of one non-terminal pod."""

    facts: PodFacts
    quota: str | None
    state: PodState
    arrival: int
    admitted_seq: int = 0
    evicting: bool = False
    standing: str | None = None  # in-quota or over-quota (the label STANDING_LABEL), when admitted
    reason: str = ""
    victims: frozenset[str] = frozenset()  # pods being evicted so that this one fits
    reason_key: object = None  # the numbers behind `reason`: it is formatted only when they change
    preemptible: bool = True
    #: the quotas it is charged to in the other trees (docs/reference/objects.md, "Several trees");
    #: `quota` is the first tree's, the one whose pending queue holds it
    also: tuple[str, ...] = ()
    #: The ResourceFlavor the pod is charged to (pending: the one it waits on), if any.
    flavor: str | None = None
    #: The pod's request as charged (`flavors.charge`: `<resource>@<flavor>` names, derived
    #: GPU memory; for a bound unmanaged pod, its node's flavors too); None: as requested.
    charged: dict[str, int] | None = None
    #: Its quota splits a resource it requests by flavor (it is admitted only on a flavor).
    flavor_needed: bool = False
    #: Its flavor look-ups, while it waits (`Placement.placing`).
    placing: Placing | None = None
    #: What it is charged in the quotas of other trees (`also`) whose resource names differ
    #: from its first tree's (one tree splits a resource by flavor, the other does not).
    charged_in: dict[str, dict[str, int]] | None = None
    #: The pod group it belongs to ("namespace/name"), and its place in the pending order
    #: (the group's: priority, the time it became complete, its name), `group_ledger.py`.
    group: str | None = None
    rank: tuple[int, float, str] | None = None
    #: "namespace/name" (its facts' key, which a new version of the facts keeps), read on
    #: every path: an attribute, not a property.
    key: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.preemptible = self.facts.preemptible
        self.key = self.facts.key

    @property
    def request(self) -> dict[str, int]:
        """What the pod is charged, in the tree's resource names."""
        return self.facts.request if self.charged is None else self.charged

    def request_in(self, quota: str) -> dict[str, int]:
        """What the pod is charged in quota `quota`, in the resource names of its tree."""
        others = self.charged_in
        if others is not None:
            charged = others.get(quota)
            if charged is not None:
                return charged
        return self.facts.request if self.charged is None else self.charged

    def order(self) -> tuple[int, float, str]:
        """Importance order: higher priority first, then older (a group: complete sooner),
        then by name."""
        if self.rank is not None:
            return self.rank
        return (-self.facts.priority, self.facts.created, self.facts.name)


def least_important_first(record: PodRecord) -> tuple[int, float, str]:
    """Victim order for reclaim and preemption: lowest priority, then newest."""
    return (record.facts.priority, -record.facts.created, record.facts.name)


class QuotaPods:
    """The pods of one ElasticQuota: the pending queue, the admitted, what they hold."""

    __slots__ = (
        "admitted",
        "also_pending",
        "behind",
        "evicting",
        "name",
        "non_preemptible_used",
        "pending",
        "pending_keys",
        "queued_in",
        "room",
        "standings",
    )

    def __init__(self, name: str) -> None:
        self.name = name  # the quota's
        # Room (`admission.room`: the quota's and its ancestors') when the pending pods were
        # last looked at; None: look again. No pending pod can start to fit unless some
        # room grew or a pod arrived, so quotas whose room only shrank are not rescanned.
        self.room: tuple[list[object], list[int], list[int], list[int]] | None = None
        self.pending: list[tuple[tuple[int, float, str], str]] = []  # sorted (order, key)
        self.pending_keys: set[str] = set()
        self.admitted: dict[str, PodRecord] = {}
        #: The admitted pods' in-quota / over-quota labels, kept as they come and go.
        self.standings = Standings(name)
        self.non_preemptible_used: dict[str, int] = {}
        self.evicting: dict[str, int] = {}  # requests of admitted pods being evicted
        # Pending pods charged here that wait in another tree's quota queue (PodRecord.also),
        # by key, and how many wait in each such quota: when this quota gets room, those
        # quotas look at their pending pods again.
        self.also_pending: set[str] = set()
        self.queued_in: dict[str, int] = {}
        # The other way round: the quotas of other trees that pods pending here are also
        # charged to, with how many; their room is part of this queue's `room`.
        self.behind: dict[str, int] = {}

    def add_also_pending(self, record: PodRecord) -> None:
        assert record.quota is not None
        if record.key not in self.also_pending:
            self.also_pending.add(record.key)
            self.queued_in[record.quota] = self.queued_in.get(record.quota, 0) + 1

    def remove_also_pending(self, record: PodRecord) -> None:
        if record.key in self.also_pending:
            assert record.quota is not None
            self.also_pending.discard(record.key)
            left = self.queued_in[record.quota] - 1
            if left:
                self.queued_in[record.quota] = left
            else:
                del self.queued_in[record.quota]

    def enqueue(self, record: PodRecord) -> None:
        bisect.insort(self.pending, (record.order(), record.key))
        self.pending_keys.add(record.key)
        self.room = None
        for other in record.also:
            self.behind[other] = self.behind.get(other, 0) + 1

    def unqueue(self, record: PodRecord) -> None:
        """Take the pod out of the pending queue, if it is there."""
        key = record.key
        if key in self.pending_keys:
            self.pending_keys.discard(key)
            for other in record.also:
                left = self.behind[other] - 1
                if left:
                    self.behind[other] = left
                else:
                    del self.behind[other]
            index = bisect.bisect_left(self.pending, (record.order(), key))
            if index < len(self.pending) and self.pending[index][1] == key:
                del self.pending[index]

    def add_admitted(self, record: PodRecord) -> None:
        self.unqueue(record)
        self.admitted[record.key] = record
        self.standings.add(record)
        if not record.preemptible:
            add_amounts(self.non_preemptible_used, record.request_in(self.name), 1)

    def remove_admitted(self, record: PodRecord) -> bool:
        """Forget an admitted pod; False when it was not admitted."""
        if self.admitted.pop(record.key, None) is None:
            return False
        self.standings.remove(record)
        if record.evicting:
            add_amounts(self.evicting, record.request_in(self.name), -1)
        if not record.preemptible:
            add_amounts(self.non_preemptible_used, record.request_in(self.name), -1)
        return True

    def set_evicting(self, record: PodRecord, evicting: bool) -> None:
        record.evicting = evicting
        add_amounts(self.evicting, record.request_in(self.name), 1 if evicting else -1)
