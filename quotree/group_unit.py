"""A pod group as one unit: what the admission check and the eviction planner read of it.

Why a module of its own: `fit.check` and `planner.EvictionPlanner.plan` take units, a pod
(`pods.PodRecord`) or a group; this is the group: its pods' requests summed (in each
tree's resource names), preemptible when all its pods are, and its first pod standing for
it where the planner needs one pod (the reclaim clock, the claim on its victims' room).
"""

from __future__ import annotations

from quotree.podfacts import PodFacts
from quotree.pods import PodRecord
from quotree.quantity import add_amounts

__all__ = ["GroupUnit"]


class GroupUnit:
    """A group's pods as one unit for `fit.check` (`pods.Unit`): their requests summed."""

    __slots__ = ("_in", "also", "members", "preemptible", "request")

    def __init__(self, members: list[PodRecord]) -> None:
        self.members = members
        self.request: dict[str, int] = {}
        for member in members:
            add_amounts(self.request, member.request)
        self.preemptible = all(m.preemptible for m in members)
        self.also = members[0].also
        self._in: dict[str, dict[str, int]] = {}

    # What the eviction planner reads of the unit it plans for: the group's first pod
    # stands for it (its key holds the reclaim clock and the claim on the victims' room).

    @property
    def key(self) -> str:
        return self.members[0].key

    @property
    def quota(self) -> str | None:
        return self.members[0].quota

    @property
    def facts(self) -> PodFacts:
        return self.members[0].facts

    @property
    def victims(self) -> frozenset[str]:
        return self.members[0].victims

    @victims.setter
    def victims(self, keys: frozenset[str]) -> None:
        self.members[0].victims = keys

    def request_in(self, quota: str) -> dict[str, int]:
        summed = self._in.get(quota)
        if summed is None:
            summed = self._in[quota] = {}
            for member in self.members:
                add_amounts(summed, member.request_in(quota))
        return summed
