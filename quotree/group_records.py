"""The engine's record of one pod group, and the view of it the shells read.

Why a module of its own: the group ledger (`group_ledger.py`) keeps these records, the
decision loop (`gang_admission.py`) and the clocks (`group_clocks.py`) change them, the
reservation (`reservations.py`) charges what they keep; the record's shape is theirs in
common. A group's state is "incomplete", "pending" or "admitted".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from quotree.groups import GroupSpec
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord

__all__ = ["ADMITTED", "INCOMPLETE", "PENDING", "GroupRecord", "GroupView", "Groups"]

INCOMPLETE = "incomplete"
PENDING = "pending"
ADMITTED = "admitted"


@dataclass(frozen=True, slots=True)
class GroupView:
    """One pod group as the shells show it (plugin, page, `quotree simulate -o json`)."""

    key: str  # "namespace/name"
    quota: str | None
    state: str  # "incomplete", "pending" or "admitted"
    size: int
    min: int
    pods: tuple[str, ...]  # its pods' keys, by creation
    reason: str
    #: Admitted: how many of its pods ended and left their room reserved for a replacement.
    reserved: int = 0


@dataclass(slots=True)
class GroupRecord:
    """The engine's record of one pod group."""

    key: str
    spec: GroupSpec
    quota: str | None
    priority: int
    job: str | None  # the Job whose pods form it, if any
    pods: dict[str, PodFacts] = field(default_factory=dict)  # its pods, by key
    held: set[str] = field(default_factory=set)  # its pods kept here (incomplete)
    #: Only `GroupLedger.set_state` changes it (it keeps the per-quota counts).
    state: str = INCOMPLETE
    completed: float = 0.0  # when it became complete: its min-th pod's creation
    reason: str = ""
    #: `group_clocks`' clocks: since when it is incomplete, warned of it; since when
    #: admitted, all its pods bound to Nodes; requeue backoff (seconds) and its end.
    incomplete_since: float | None = None
    warned: bool = False
    #: Its held pods told why they wait in this incomplete spell; None while the spell is
    #: younger than `group_clocks.INCOMPLETE_QUIET`.
    told: set[str] | None = None
    admitted_since: float | None = None
    placed: bool = False
    backoff: float = 0.0
    not_before: float = 0.0
    evicted: bool = False  # its eviction was asked for: its pods leave
    #: The pods admitted as the unit (an elastic group's first `min`); the others joined
    #: one by one afterwards and are evicted one by one.
    core: set[str] = field(default_factory=set)
    #: The reservation: the records of its admitted pods that ended, their room still
    #: charged for replacements (`reservations.Reservations`).
    slots: list[PodRecord] = field(default_factory=list)
    core_slots: set[str] = field(default_factory=set)  # the slots of core pods, by key
    #: Its pods evicted alone (joined pods above an elastic group's min): no slot kept.
    dropped: set[str] = field(default_factory=set)

    @property
    def declaration(self) -> tuple[str | None, GroupSpec, int]:
        return (self.quota, self.spec, self.priority)

    def view(self) -> GroupView:
        pods = tuple(sorted(self.pods, key=lambda k: (self.pods[k].created, k)))
        return GroupView(
            self.key,
            self.quota,
            self.state,
            self.spec.size,
            self.spec.min,
            pods,
            self.reason,
            len(self.slots),
        )


class Groups(Mapping[str, GroupView]):
    """A read-only view of the groups, "namespace/name" -> `GroupView`."""

    def __init__(self, records: Mapping[str, GroupRecord]) -> None:
        self._records = records

    def __getitem__(self, key: str) -> GroupView:
        return self._records[key].view()

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)
