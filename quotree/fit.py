"""The admission check: does a waiting unit fit, and if not, where and by how much.

Why a module of its own: docs/semantics.md's "Admission" is one rule, asked from several
places (the decision loop, flavor placement, in-quota preemption, the kubectl plugin's
`why`). It is written here once: for every quota that charges the unit (one per tree,
its first tree's first), in order, the quota must exist and be live, a non-preemptible
unit must stay within the quota's (scaled) min, the unit must fit the quota's runtime,
and every ancestor's up to the root (the cluster's capacity). The first rule broken is
the answer; callers turn it into words (`admission.why_not`, `admission.why_waits`) or
act on it (preempt, reclaim, try another flavor). A unit is a pod (`pods.PodRecord`)
or a pod group (`gang_admission.GroupUnit`): what the check reads of either is
`pods.Unit`.

The check reads the live numbers and changes nothing: callers settle runtimes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

from quotree.accounts import TreeMember
from quotree.admission import ancestor_shortfall, non_preemptible_shortfall, shortfall
from quotree.pods import QuotaPods, Unit
from quotree.trees import Forest

__all__ = ["FITS", "MISSING", "Fit", "Rule", "Seat", "Seats", "check", "check_seat"]


class Rule(Enum):
    """Which rule a unit breaks at a quota."""

    MISSING = "missing"  # the quota is not in a live tree (deleted, inactive)
    NON_PREEMPTIBLE = "non-preemptible"  # over the min left to non-preemptible units
    QUOTA = "quota"  # used + request > runtime at the quota
    ANCESTOR = "ancestor"  # used + request > runtime at an ancestor (or the cluster)


@dataclass(frozen=True, slots=True)
class Seat:
    """Where a quota stands in its tree, as the check needs it: its live member (None when
    it is not live), its ancestors nearest first ending with the root, and its pods."""

    member: TreeMember | None
    path: list[TreeMember]
    pods: QuotaPods | None


@dataclass(frozen=True, slots=True)
class Fit:
    """The check's answer: `broken is None` when the unit fits everywhere; else the quota
    where it does not (`quota`), the rule it breaks there (`broken`), the member short
    (the quota itself or an ancestor, None when missing) and the amounts by resource."""

    quota: str = ""
    broken: Rule | None = None
    member: TreeMember | None = None
    amounts: dict[str, int] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.broken is None


#: The one answer for a unit that fits (no allocation on the common path).
FITS = Fit()

#: Where the check finds a quota that is not in a live tree.
MISSING = Seat(None, [], None)


def check(unit: Unit, seats: Iterable[tuple[str, Seat]]) -> Fit:
    """The first rule of "Admission" the unit breaks at the quotas of `seats` (in order: its
    first tree's quota first), or `FITS`."""
    for name, where in seats:
        verdict = check_seat(unit, name, where)
        if verdict is not FITS:
            return verdict
    return FITS


def check_seat(unit: Unit, name: str, where: Seat) -> Fit:
    """`check` at one quota (`name`, seated `where`)."""
    member = where.member
    if member is None or where.pods is None:
        return Fit(name, Rule.MISSING)
    short = non_preemptible_shortfall(member, where.pods, unit)
    if short:
        return Fit(name, Rule.NON_PREEMPTIBLE, member, short)
    short = shortfall(member, unit)
    if short:
        return Fit(name, Rule.QUOTA, member, short)
    blocked = ancestor_shortfall(where.path, member, unit)
    if blocked is not None:
        return Fit(name, Rule.ANCESTOR, blocked[0], blocked[1])
    return FITS


class Seats:
    """The quotas as the check sees them, from the trees and each quota's pods."""

    def __init__(self, forest: Forest, quota_pods: Mapping[str, QuotaPods]) -> None:
        self._forest = forest
        self._quota_pods = quota_pods

    def seat(self, name: str) -> Seat:
        """Quota `name`, its tree's runtimes brought up to date first."""
        tree = self._forest.tree_of(name)
        tree.refresh(name)  # explicit: the check reads settled runtimes
        member = tree.member(name)
        if member is None or not member.is_quota:
            return MISSING
        return Seat(member, tree.path_up(member), self._quota_pods[name])

    def check(self, unit: Unit, name: str, here: Seat) -> Fit:
        """`check` for a unit of quota `name` (seated `here`), in every tree that charges it."""
        if not unit.also:
            return check_seat(unit, name, here)
        return check(unit, self._with_other_trees(name, here, unit))

    def broken(self, unit: Unit, name: str, here: Seat) -> list[Fit]:
        """`check` in each tree that charges the unit on its own: every quota where it
        does not fit, its first tree's first (empty: it fits everywhere)."""
        seats = self._with_other_trees(name, here, unit) if unit.also else ((name, here),)
        return [v for seat in seats if (v := check_seat(unit, *seat)) is not FITS]

    def broken_elsewhere(self, unit: Unit) -> list[Fit]:
        """`broken` in the unit's other trees only (its first tree's verdict is known)."""
        return [v for o in unit.also if (v := check_seat(unit, o, self.seat(o))) is not FITS]

    def _with_other_trees(self, name: str, here: Seat, unit: Unit) -> Iterator[tuple[str, Seat]]:
        yield name, here
        for other in unit.also:
            yield other, self.seat(other)
