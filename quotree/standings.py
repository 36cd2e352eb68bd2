"""The in-quota / over-quota labels of one quota's admitted pods, kept incrementally.

Why a module of its own: docs/semantics.md's "In-quota and over-quota pods" is a running sum
(admitted pods by priority, then admission; a pod is in-quota while the sum is within the
quota's guarantee in every governed resource it requests). Recomputing it walks every
admitted pod of the quota (`admission.standings`, the reference the property tests hold
this to), so each arrival would cost as much as the quota is full. Here each resource
keeps its pods in that order and a cut: the longest prefix whose sum is within the
guarantee. An arrival or a departure moves the cut only over the pods whose label
changes (plus a binary search and a list insertion, done in C), so the cost per pod does
not grow with how many pods the quota holds.

A pod is over-quota in as many resources as it sits past the cut of; its label is
in-quota when that count is 0. `changed` collects the pods whose label may have moved;
the decision loop reads and clears it (`take_changed`).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pods.py holds one Standings per quota
    from quotree.pods import PodRecord

__all__ = ["IN_QUOTA", "OVER_QUOTA", "Standings"]

IN_QUOTA = "in-quota"
OVER_QUOTA = "over-quota"

#: A pod's place in the order: higher priority first, then admitted earlier (then name,
#: so that two places never tie).
Place = tuple[int, int, str]


def place(record: PodRecord) -> Place:
    return (-record.facts.priority, record.admitted_seq, record.key)


class _Line:
    """One resource: the pods that request it, in order, and the cut."""

    __slots__ = ("amounts", "cut", "places", "records", "within")

    def __init__(self) -> None:
        self.places: list[Place] = []
        self.records: list[PodRecord] = []
        self.amounts: list[int] = []
        self.cut = 0  # places[:cut] add up within the guarantee
        self.within = 0  # their sum


class Standings:
    """The labels of one quota's admitted pods (see the module docstring)."""

    __slots__ = ("_governed", "_guarantee", "_lines", "_over", "_places", "changed", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._lines: dict[str, _Line] = {}
        self._places: dict[str, Place] = {}  # pod -> its place when it came in
        self._over: dict[str, int] = {}  # pod -> governed resources it is past the cut of
        self._governed: frozenset[str] = frozenset()
        self._guarantee: dict[str, int] = {}
        self.changed: set[str] = set()

    def label(self, key: str) -> str:
        return OVER_QUOTA if self._over.get(key, 0) else IN_QUOTA

    def add(self, record: PodRecord) -> None:
        key = record.key
        where = self._places[key] = place(record)
        self._over[key] = 0
        self.changed.add(key)
        for resource, amount in record.request_in(self.name).items():
            if amount <= 0:
                continue
            line = self._lines.get(resource)
            if line is None:
                line = self._lines[resource] = _Line()
            index = bisect.bisect_left(line.places, where)
            line.places.insert(index, where)
            line.records.insert(index, record)
            line.amounts.insert(index, amount)
            if index < line.cut:
                line.cut += 1
                line.within += amount
            elif resource in self._governed:
                self._over[key] += 1
            if resource in self._governed:
                self._settle(line, resource)

    def remove(self, record: PodRecord) -> None:
        key = record.key
        where = self._places.pop(key, None)
        if where is None:
            return
        self._over.pop(key, None)
        self.changed.discard(key)
        for resource, line in self._lines.items():
            index = bisect.bisect_left(line.places, where)
            if index >= len(line.places) or line.places[index] != where:
                continue
            amount = line.amounts[index]
            del line.places[index], line.records[index], line.amounts[index]
            if index < line.cut:
                line.cut -= 1
                line.within -= amount
            if resource in self._governed:
                self._settle(line, resource)

    def moved(self, record: PodRecord) -> None:
        """The pod's place in the order changed (its admission time was restored)."""
        if record.key in self._places:
            self.remove(record)
            self.add(record)

    def set_guarantee(self, guarantee: Mapping[str, int], governed: Collection[str]) -> None:
        """The quota's guarantee (its scaled min) and the resources it governs, as they
        stand now: the cuts move where they changed."""
        if frozenset(governed) != self._governed:
            self._governed = frozenset(governed)
            self._guarantee = {r: guarantee[r] for r in self._governed}
            self._rebuild()
            return
        for resource in self._governed:
            amount = guarantee[resource]
            if amount != self._guarantee[resource]:
                self._guarantee[resource] = amount
                line = self._lines.get(resource)
                if line is not None:
                    self._settle(line, resource)

    def relabel(
        self,
        guarantee: Mapping[str, int],
        governed: Collection[str],
        admitted: Mapping[str, PodRecord],
        labels: dict[str, str],
    ) -> None:
        """Bring the labels up to date with the guarantee and governed resources as they
        stand now, and put in `labels` the pods (of this quota as their first tree's) whose
        label changed: only the pods whose label moved are looked at."""
        self.set_guarantee(guarantee, governed)
        if not self.changed:
            return
        for key in self.take_changed():
            record = admitted.get(key)
            if record is None or record.quota != self.name:
                continue
            label = self.label(key)
            if record.standing != label:
                record.standing = label
                labels[key] = label

    def take_changed(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed

    # ------------------------------------------------------------ the cuts

    def _settle(self, line: _Line, resource: str) -> None:
        """Move the cut to the longest prefix within the guarantee."""
        bound = self._guarantee.get(resource, 0)
        over, changed = self._over, self.changed
        while line.cut and line.within > bound:
            line.cut -= 1
            line.within -= line.amounts[line.cut]
            key = line.records[line.cut].key
            over[key] += 1
            if over[key] == 1:
                changed.add(key)
        size = len(line.amounts)
        while line.cut < size and line.within + line.amounts[line.cut] <= bound:
            line.within += line.amounts[line.cut]
            key = line.records[line.cut].key
            line.cut += 1
            over[key] -= 1
            if over[key] == 0:
                changed.add(key)

    def _rebuild(self) -> None:
        """Every cut from the start (the governed resources changed)."""
        for key in self._over:
            self._over[key] = 0
            self.changed.add(key)
        for resource, line in self._lines.items():
            line.cut, line.within = 0, 0
            if resource in self._governed:
                for record in line.records:
                    self._over[record.key] += 1
                self._settle(line, resource)
