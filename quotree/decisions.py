"""What one round of decisions asks the cluster for: `Decisions`.

Why a module of its own: the decision loop (`decide.py`) fills it, the parts it calls
(`reasons.py`) add to it, and the shells carry it out; none of them owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quotree.eviction import Eviction

__all__ = ["Decisions"]


@dataclass(slots=True)
class Decisions:
    """What the cluster should be made to look like after one `decide()`."""

    admitted: list[tuple[str, str]] = field(default_factory=list)  # (pod, message)
    evictions: list[Eviction] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # pod -> in-quota / over-quota
    pending: dict[str, str] = field(default_factory=dict)  # pod -> why it waits (when it changed)
    #: pod -> (flavor, its nodeLabels) for admitted pods charged to a flavor: the operator
    #: adds the labels to the pod's nodeSelector in the patch that removes the gate.
    flavors: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    #: The quotas, in every tree, whose used or pods these decisions change (a pod admitted
    #: or asked to leave): their status is due (the operator's status writer reads it).
    quotas: set[str] = field(default_factory=set)
    #: (pod, event reason, message) for Warning events, e.g. `GroupIncomplete`.
    warnings: list[tuple[str, str, str]] = field(default_factory=list)

    def merge(self, later: Decisions) -> None:
        """Add the decisions of a later round (its words and labels win)."""
        self.admitted += later.admitted
        self.evictions += later.evictions
        self.labels.update(later.labels)
        self.pending.update(later.pending)
        self.flavors.update(later.flavors)
        self.quotas |= later.quotas
        self.warnings += later.warnings

    def __bool__(self) -> bool:
        return bool(self.admitted or self.evictions or self.labels or self.pending or self.warnings)
