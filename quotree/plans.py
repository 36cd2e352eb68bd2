"""What the eviction planner (`planner.py`) works with: a unit's reclaim clock, the steps of a
plan and what planning came to, and a waiting pod's flavors.

Why a module of its own: the planner's data, apart from its logic, so that the planner
stays one decision (which pods to evict for a waiting unit) and short.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from quotree.fit import Fit
from quotree.pods import PodRecord
from quotree.reclaim import Refusal

__all__ = ["Clock", "Flavors", "Plan", "Step"]


@dataclass(slots=True)
class Plan:
    """What planning for one unit came to: `evicted` when it asked for evictions; else the
    last verdict it reached (`verdict`: where the unit waits) and, when reclaim would not
    pay, why (`refusal`)."""

    evicted: bool
    verdict: Fit
    refusal: Refusal | None = None
    #: It needs no new eviction: it fits once the evictions under way are done.
    waits_for_evictions: bool = False
    #: It asked for nothing because it fits once these pods, being evicted for other
    #: units or for none, are gone (their keys).
    counts_on: frozenset[str] = frozenset()
    #: Planned without asking (`_plan(ask=False)`): the evictions it would ask for.
    steps: list[Step] | None = None

    def cost(self) -> tuple[int, int]:
        """How many pods its evictions take, and how much they free beyond the shortfall."""
        steps = self.steps or []
        return sum(len(s.victims) for s in steps), sum(s.excess for s in steps)


@dataclass(slots=True)
class Step:
    """One step of a plan: its victims, for preemption or reclaim, with the event's reason,
    and what they free beyond what the unit was short of (summed over the resources)."""

    kind: Literal["Preempted", "Reclaimed"]
    reason: str
    victims: list[PodRecord]
    excess: int


@dataclass(slots=True)
class Flavors:
    """A waiting pod's flavor (`home`), its allowed flavors (`flavors`, its quota's order)
    and how to move its demand to one (`move`: charged there, runtimes settled): reclaim
    takes the flavor where it evicts least (`EvictionPlanner.plan`)."""

    home: str
    flavors: list[str]
    move: Callable[[str], None]


@dataclass(slots=True)
class Clock:
    """Since when a unit waits for lent quota, and whether it was planned for since its
    reclaim delay passed (the decision loop looks at its quota once more when not)."""

    since: float
    tried: bool = False
    #: The pods being evicted that its last plan counted on (`Plan.counts_on`): once one
    #: is no longer being evicted, its quota is looked at again whatever its room, since
    #: another unit that counted on the same pods may have taken the room they left.
    behind: frozenset[str] = frozenset()
    #: Before the delay, what the last dry run found (`EvictionPlanner._dry_run`): the
    #: numbers it was made on, and the refusal (None: reclaim would pay).
    dry: tuple[object, Refusal | None] | None = None

    def passed(self, now: float, delay: float) -> bool:
        """Its reclaim delay has passed (it is planned for now: `tried`)."""
        if now - self.since < delay:
            return False
        self.tried = True
        return True

    def due(self, now: float, delay: float, evicting: set[str]) -> bool:
        """Its quota is looked at again whatever its room: its delay passed and it was not
        planned for since, or a pod its last plan counted on is no longer being evicted
        (`behind`, then forgotten: it plans again)."""
        if self.behind and not self.behind <= evicting:
            self.behind = frozenset()
            return True
        return not self.tried and now - self.since >= delay
