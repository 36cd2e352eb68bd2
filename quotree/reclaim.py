"""Reclaim that pays: the victims that let one waiting unit in, and only trades that pay.

Why a module of its own: docs/semantics.md's "Reclaim (getting lent quota back), and only when it
pays" is a rule about one waiting unit and the quotas that hold more than their runtime below the
member where it is short. This part answers two questions for it: which admitted pods to take
(over-quota before in-quota, then lowest priority; within that, the fewest pods that free
the shortfall, leaving least of it idle, then the latest admitted; a minimal set)
and whether taking them pays (a quota that stays within its guarantee always gets
reclaim; a borrower takes from another borrower only while, where the two meet, the
victim's side still borrows at least as much by weight afterwards). `Trial` takes pods out
of the trees' `used` for as long as the admission check (`fit.check`) is asked whether the
unit then fits, and puts them back. A unit is a pod today: its request in the quota's
tree (`request_in`) is all this part reads of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING

from quotree.accounts import TreeMember
from quotree.admission import IN_QUOTA, OVER_QUOTA, in_quota_order, standings
from quotree.pods import Claimant, PodRecord, QuotaPods
from quotree.quantity import format_quantity
from quotree.runtime import QuotaTree
from quotree.trees import Forest
from quotree.victims import Candidates

if TYPE_CHECKING:
    from quotree.group_ledger import GroupLedger

__all__ = ["Refusal", "Trial", "borrowing_pays", "meet", "reclaim_choice", "within_guarantee"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why taking a pod of quota `victim` does not pay: where the waiting unit's side `mine`
    and the victim's side `theirs` meet, afterwards `theirs` would borrow less than `mine`
    by weight in `resource` (the borrowed amounts and weights afterwards)."""

    victim: str
    resource: str
    taken: int
    mine: TreeMember
    theirs: TreeMember
    mine_borrows: int
    theirs_borrows: int

    def words(self) -> str:
        r = self.resource
        mine, theirs = self.mine, self.theirs
        assert mine.config is not None
        assert theirs.config is not None
        who = "it" if theirs.name == self.victim else theirs.config.describe()
        return (
            f"waits: taking {format_quantity(self.taken, r)} {r} from ElasticQuota "
            f"{self.victim} would leave {who} borrowing less than {mine.config.describe()} "
            f"by weight ({r}: {theirs.name} would borrow "
            f"{format_quantity(self.theirs_borrows, r)} at weight {theirs.weight.get(r, 1)}, "
            f"{mine.name} {format_quantity(self.mine_borrows, r)} at weight "
            f"{mine.weight.get(r, 1)})"
        )


def meet(tree: QuotaTree, mine: TreeMember, theirs: TreeMember) -> tuple[TreeMember, TreeMember]:
    """The children of the lowest Cohort (or the root) above both quotas: (mine's side,
    theirs' side)."""
    up_mine = [mine, *tree.path_up(mine)]
    up_theirs = [theirs, *tree.path_up(theirs)]
    seen = {member.name: index for index, member in enumerate(up_theirs)}
    for index, member in enumerate(up_mine):
        at = seen.get(member.name)
        if at is not None and index > 0 and at > 0:
            return up_mine[index - 1], up_theirs[at - 1]
    raise ValueError(f"{mine.name} and {theirs.name} share no tree")  # not reached: one root


def borrowing_pays(
    mine: TreeMember,
    theirs: TreeMember,
    resource: str,
    *,
    admitted: int,
    freed: Mapping[str, Mapping[str, int]],
) -> tuple[bool, int, int]:
    """The weighted rule at one meeting point: after `admitted` more on `mine`'s side and
    the `freed` amounts (member name -> resource -> amount) on both, does `theirs` still borrow
    at least as much as `mine`, by weight? Also the two borrowed amounts afterwards.
    Compared cross-multiplied, in integers; a weight of 0 never borrows ahead of anyone."""
    # A side that does not govern the resource (no account of it) borrows what it uses.
    mine_borrows = (
        mine.used.get(resource, 0)
        + admitted
        - freed.get(mine.name, {}).get(resource, 0)
        - mine.guarantee.get(resource, 0)
    )
    theirs_borrows = (
        theirs.used.get(resource, 0)
        - freed.get(theirs.name, {}).get(resource, 0)
        - theirs.guarantee.get(resource, 0)
    )
    pays = theirs_borrows * mine.weight.get(resource, 1) >= mine_borrows * theirs.weight.get(
        resource, 1
    )
    return pays, mine_borrows, theirs_borrows


def _freed(
    tree: QuotaTree, victims: Iterable[PodRecord], members: Mapping[str, TreeMember]
) -> dict[str, dict[str, int]]:
    """What `victims` free at every member above them (name -> resource -> amount)."""
    freed: dict[str, dict[str, int]] = {}
    for victim in victims:
        quota = members[victim.key]
        request = victim.request_in(quota.name)
        for member in (quota, *tree.path_up(quota)):
            at = freed.setdefault(member.name, {})
            for resource, amount in request.items():
                at[resource] = at.get(resource, 0) + amount
    return freed


def within_guarantee(unit: Claimant, quota: TreeMember, short: Mapping[str, int]) -> bool:
    """The unit's quota stays within its guarantee after admitting it, in every resource
    the unit is short of: reclaim for it always pays."""
    request = unit.request_in(quota.name)
    return all(quota.used[r] + request.get(r, 0) <= quota.guarantee.get(r, 0) for r in short)


def reclaim_choice(
    tree: QuotaTree,
    unit: Claimant,
    quota: TreeMember,
    short: Mapping[str, int],
    lenders: Iterable[tuple[TreeMember, QuotaPods]],
    *,
    taken: set[str],
    book: GroupLedger | None = None,
) -> tuple[list[PodRecord], Refusal | None]:
    """The victims among the admitted preemptible pods of `lenders` (quotas above their
    runtime below the member where `unit`, of quota `quota` in `tree`, is short by `short`)
    whose eviction frees `short` and pays; ([], why) when no set does. A pod group's core
    pods go all or none, judged together (`book`: the groups, `victims.Candidates`). `taken`: pods
    already chosen for this unit, never chosen again. The trees' `used` is read as the
    planner's `Trial` left it (the pods being evicted already out)."""
    request = unit.request_in(quota.name)
    within = within_guarantee(unit, quota, short)
    labels: dict[str, str] = {}
    where: dict[str, TreeMember] = {}
    candidates: list[PodRecord] = []
    whole = Candidates(book)  # pod groups whole, their joined pods first
    for member, pods in lenders:
        if member is quota or not any(
            member.used[r] > member.runtime[r] for r in short if r in member.resources
        ):
            continue
        ranked = standings(member, pods)
        label_of = {record.key: label for record, label in ranked}
        may_go = {
            record.key
            for record, _ in ranked
            if record.preemptible and not record.evicting and record.key not in taken
        }
        for record in whole.whole((record for record, _ in ranked), may_go):
            if any(record.request_in(member.name).get(r, 0) > 0 for r in short):
                members = whole.members.get(record.key, (record,))
                over = any(label_of[m.key] == OVER_QUOTA for m in members)
                labels[record.key] = OVER_QUOTA if over else IN_QUOTA
                where[record.key] = member
                candidates.append(record)

    def rank(r: PodRecord) -> tuple[bool, int, bool]:
        """The order of docs/semantics.md, "Reclaim (getting lent quota back), and only when it
        pays": over-quota first, lowest priority, joined pods first."""
        return labels[r.key] != OVER_QUOTA, r.facts.priority, r.key not in whole.joined

    candidates.sort(key=lambda r: (*rank(r), -r.admitted_seq))

    def refusal(chosen: list[PodRecord]) -> Refusal | None:
        if within:
            return None
        freed = _freed(tree, chosen, where)
        for victim in chosen:
            mine, theirs = meet(tree, quota, where[victim.key])
            for r in sorted(short):
                pays, mine_borrows, theirs_borrows = borrowing_pays(
                    mine, theirs, r, admitted=request.get(r, 0), freed=freed
                )
                if not pays:
                    taken_here = sum(
                        v.request_in(where[v.key].name).get(r, 0)
                        for v in chosen
                        if where[v.key] is where[victim.key]
                    )
                    return Refusal(
                        where[victim.key].name, r, taken_here, mine, theirs,
                        mine_borrows, theirs_borrows,
                    )  # fmt: skip
        return None

    def missing(chosen: list[PodRecord]) -> bool:
        return any(
            sum(v.request_in(where[v.key].name).get(r, 0) for v in chosen) < amount
            for r, amount in short.items()
        )

    # One rank after the other (the order of docs/semantics.md, "Reclaim (getting lent quota
    # back), and only when it pays"); within a rank, the fewest pods that free the
    # shortfall, leaving least of it idle (`_best_fit`), the latest admitted among equals. A
    # pod whose taking would not pay is passed over.
    chosen: list[PodRecord] = []
    first_refusal: Refusal | None = None
    for _, alike in groupby(candidates, key=rank):
        pool = list(alike)
        while pool and missing(chosen):
            left = {r: a - _freed_in(chosen, where, r) for r, a in short.items()}
            left = {r: a for r, a in left.items() if a > 0}
            for record in _best_fit(pool, where, left):
                pool = [other for other in pool if other is not record]
                chosen.append(record)
                why = refusal(chosen)
                if why is None:
                    break
                chosen.pop()
                first_refusal = first_refusal or why
            else:
                break  # nothing more of this rank helps, or pays
    if missing(chosen):
        return [], first_refusal
    # A minimal set: give back the victims not needed, most important first; an over-quota
    # victim is kept while an in-quota one goes.
    for record in sorted(chosen, key=in_quota_order):
        if labels[record.key] == OVER_QUOTA and any(
            labels[other.key] == IN_QUOTA for other in chosen
        ):
            continue
        rest = [v for v in chosen if v is not record]
        if not missing(rest) and refusal(rest) is None:
            chosen = rest
    return whole.expand(chosen), None


def _freed_in(chosen: list[PodRecord], where: Mapping[str, TreeMember], resource: str) -> int:
    """What `chosen` free in `resource`."""
    return sum(v.request_in(where[v.key].name).get(resource, 0) for v in chosen)


def _best_fit(
    pool: list[PodRecord], where: Mapping[str, TreeMember], left: Mapping[str, int]
) -> list[PodRecord]:
    """The candidates of `pool` (one rank, latest admitted first) that free some of `left`
    (what is still short), best first: those that free all of it alone, the least left
    idle first; then the others, the most freed first (the fewest victims). Equals keep
    their order. Amounts are compared as fractions of what is short in each resource."""

    def key(item: tuple[int, PodRecord]) -> tuple[bool, float, int]:
        index, record = item
        charge = record.request_in(where[record.key].name)
        gives = {r: charge.get(r, 0) for r in left}
        if all(gives[r] >= left[r] for r in left):
            return False, sum((gives[r] - left[r]) / left[r] for r in left), index
        return True, -sum(min(gives[r], left[r]) / left[r] for r in left), index

    helping = [
        (index, record)
        for index, record in enumerate(pool)
        if any(record.request_in(where[record.key].name).get(r, 0) > 0 for r in left)
    ]
    return [record for _, record in sorted(helping, key=key)]


class Trial:
    """Pods taken out of `used` (victims) or put in (units their victims make room for) in
    every tree that charges them, while the admission check is asked whether a unit then
    fits; `restore` undoes it all."""

    def __init__(self, forest: Forest) -> None:
        self._forest = forest
        self.victims: list[PodRecord] = []
        self._done: list[tuple[PodRecord, int]] = []

    def take(self, victims: Iterable[PodRecord]) -> None:
        """The victims are gone."""
        for victim in victims:
            self._charge(victim, -1)
            self.victims.append(victim)

    def admit(self, unit: PodRecord, victims: Iterable[PodRecord]) -> None:
        """Another unit's victims are gone and it is admitted (its evictions are under way)."""
        for victim in victims:
            self._charge(victim, -1)
        self._charge(unit, 1)

    def restore(self) -> None:
        for record, sign in reversed(self._done):
            self._charge(record, -sign, undo=True)
        self._done = []
        self.victims = []

    @property
    def moved(self) -> bool:
        """Anything was taken out or put in."""
        return bool(self._done)

    @property
    def keys(self) -> set[str]:
        return {v.key for v in self.victims}

    def _charge(self, record: PodRecord, sign: int, *, undo: bool = False) -> None:
        forest = self._forest
        assert record.quota is not None
        for quota in (record.quota, *record.also):
            forest.tree_of(quota).add_used(quota, record.request_in(quota), sign)
        if forest.several:
            forest.charge_outside(record, sign)
        if not undo:
            self._done.append((record, sign))


@contextmanager
def trial(forest: Forest) -> Iterator[Trial]:
    """A `Trial` whose pods are put back however the block ends."""
    taken = Trial(forest)
    try:
        yield taken
    finally:
        taken.restore()
