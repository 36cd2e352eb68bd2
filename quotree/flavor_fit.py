"""Could a pending pod fit on a flavor it is not charged to, judged without moving its demand?

Why a module of its own: a pod's demand counts on one flavor at a time and
runtime follows demand, so whether it fits on another flavor is, exactly,
known only after its demand moves there, which redistributes among every
parent on the path (`runtime.py`). `Placement.place` asks this
module first, and moves the demand only for a flavor where the pod may fit.

The answer is a sound bound, not the rule: "no" means the pod cannot fit
there whatever the move does; "maybe" means look with the demand moved.
The bound, per resource `r` whose charge differs between the two flavors,
from the root down the quota's path (the semantics' "Runtime", steps 1 to 5):

- the root's runtime is the capacity, which no demand changes;
- a child `c` of a parent with runtime `T` gets `b(c) + e(c)`, where the bases
  `b(s) = min(demand(s), g(s))` and the water-filled extras add up to at most
  `max(0, T - sum of b(s))`; so `runtime(c) <= max(g(c), T - sum over its
  siblings s of b(s))`, and never more than its cap;
- the siblings' demands do not move (only the path's do), and their
  guarantees do not either when they are not scaled against the parent's
  runtime: at the root (the capacity is fixed) and below a parent whose
  children's mins fit in its own fixed guarantee. Elsewhere a sibling's base
  counts as 0 and a guarantee as the min (it is never more), which only loosens
  the bound.

A resource whose charge is the same on both flavors keeps its runtimes
exactly (runtime is per resource): it is checked against the current numbers.
The `max(g(c), ...)` only matters if the bases can add up to more than `T`, which
valid trees do not allow (a Cohort's cap is at least its min); it is kept so that the
bound does not rest on that. The property tests
(`tests/unit/test_flavor_fit_properties.py`) check that the bounds hold whatever demand
is added on the path, and compare placements with and without this shortcut.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from quotree.accounts import TreeMember

__all__ = ["Bound", "judge"]


class Bound(Enum):
    """What the bound says about one tree, for a pod whose demand would move to a flavor."""

    QUOTA_SHORT = "quota"  # cannot fit its quota (runtime, or min for a non-preemptible pod)
    ANCESTOR_SHORT = "ancestor"  # may fit its quota, cannot fit some ancestor
    MAY_FIT = "may fit"  # may fit its quota and every ancestor


def judge(
    member: TreeMember,
    path: list[TreeMember],
    non_preemptible_used: Mapping[str, int] | None,
    charged: Mapping[str, int],
    current: Mapping[str, int],
) -> Bound:
    """The bound's verdict for the quota `member` (ancestors `path`, nearest first, ending with
    the root; its runtimes settled) if a pending pod charged `current` were charged `charged`
    instead. `non_preemptible_used`: the quota's, for a non-preemptible pod (None: the pod
    is preemptible)."""
    verdict = Bound.MAY_FIT
    for resource in member.resources:
        amount = charged.get(resource, 0)
        if not amount:
            continue
        if current.get(resource, 0) == amount:
            runtime, guarantee = member.runtime[resource], member.guarantee[resource]
            ancestors = [a.runtime[resource] for a in path]
        else:
            ancestors, runtime, guarantee = _path_bounds(member, path, resource)
        held = None if non_preemptible_used is None else non_preemptible_used.get(resource, 0)
        if held is not None and held + amount > guarantee:
            return Bound.QUOTA_SHORT
        if member.used[resource] + amount > runtime:
            return Bound.QUOTA_SHORT
        for ancestor, bound in zip(path, ancestors, strict=True):
            if ancestor.used[resource] + amount > bound:
                verdict = Bound.ANCESTOR_SHORT
                break
    return verdict


def _path_bounds(
    member: TreeMember, path: list[TreeMember], resource: str
) -> tuple[list[int], int, int]:
    """Upper bounds, in `resource`, of the runtimes of `path` (as `path`: nearest first) and
    of `member`, and of `member`'s guarantee, whatever the demand of the members on the path is."""
    root = path[-1]
    bound = root.runtime[resource]  # the capacity: no demand moves it
    bounds = [bound]
    known = True  # the guarantees of the children of the parent at hand cannot move
    guarantee = member.min[resource]
    parent = root
    for child in (*reversed(path[:-1]), member):
        if parent is not root:
            known = known and parent.sum_min[resource] <= parent.guarantee[resource]
        taken = 0
        if known:
            # the siblings' bases: the parent's sum (`TreeMember.sum_base`) less the child's
            taken = parent.sum_base[resource] - min(
                child.demand[resource], child.guarantee[resource]
            )
            guarantee = child.guarantee[resource]
        else:
            guarantee = child.min[resource]
        bound = min(child.cap[resource], max(guarantee, bound - taken))
        bounds.append(bound)
        parent = child
    own = bounds.pop()
    bounds.reverse()
    return bounds, own, guarantee
