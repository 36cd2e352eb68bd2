"""One parent shares its runtime among its children: the semantics' "Runtime", steps 1 to 5.

Why a module of its own: this is the rule itself, for one parent and one
resource, apart from the bookkeeping that decides which parents must redo it
(`runtime.py`). It also holds the shortcuts that keep a pod event O(depth):
when every child's target fits, only the children whose demand changed are
redone; when a saturated parent's changed children stay short of their
demand, nothing moves.
"""

from __future__ import annotations

from operator import add, sub

from quotree.accounts import ChildLists, TreeMember
from quotree.sharing import proportional, water_fill

__all__ = ["distribute"]


def distribute(
    parent: TreeMember,
    resource: str,
    hints: dict[TreeMember, int] | None,
    *,
    at_root: bool,
    grown: set[str] | None = None,
) -> list[TreeMember]:
    """Share the parent's runtime among its children; returns the children that changed.

    `hints` are the children whose demand changed (None: redo all). When
    every child's target fits, before and after, only those are redone.
    `grown`, when given, receives the names of the children whose runtime or
    guarantee went up (the only ones where a pending pod may start to fit).
    """
    children = parent.children_in[resource]
    total = parent.runtime[resource]
    sum_min = parent.sum_min[resource]
    scale_total = total if at_root else max(total, parent.guarantee[resource])
    roomy = sum_min <= scale_total and parent.sum_target[resource] <= total
    was_roomy = parent.roomy.get(resource, False)
    same_start = (
        parent.last_total.get(resource) == total
        and parent.last_scale_total.get(resource) == scale_total
    )
    parent.roomy[resource] = roomy
    parent.last_total[resource] = total
    parent.last_scale_total[resource] = scale_total
    changed: list[TreeMember] = []
    # Same total, saturated before and after, and every changed child is back at the
    # demand it had when it was first marked (a pod left and its hold took its place, or
    # the other way round): the children are as at the last distribution but for changes
    # a saturated parent's shares do not see (`climb.climb` leaves those unmarked).
    # Below a roomy parent the hinted children alone are redone anyway.
    if (
        hints
        and not roomy
        and not was_roomy
        and same_start
        and all(child.demand[resource] == old for child, old in hints.items())
    ):
        return changed
    # A saturated parent, same total: when every changed child was short of its demand
    # and still is (new demand above its old runtime), every water-filling round
    # compares the same way and nobody's share moves.
    if (
        not roomy
        and not was_roomy
        and same_start
        and hints is not None
        and all(
            old > child.runtime[resource] and child.demand[resource] > child.runtime[resource]
            for child, old in hints.items()
        )
    ):
        return changed
    if roomy and was_roomy and hints is not None:
        for child in hints:
            runtime = child.target(resource)
            if child.runtime[resource] != runtime:
                if grown is not None and runtime > child.runtime[resource]:
                    grown.add(child.name)
                child.runtime[resource] = runtime
                changed.append(child)
        return changed
    if roomy:
        sum_base = 0
        for child in children:
            runtime = child.target(resource)
            low = child.min[resource]
            sum_base += min(child.demand[resource], low)
            if child.runtime.get(resource) != runtime or child.guarantee.get(resource) != low:
                if grown is not None and _grows(child, resource, runtime, low):
                    grown.add(child.name)
                child.runtime[resource] = runtime
                child.guarantee[resource] = low
                changed.append(child)
        parent.sum_base[resource] = sum_base
        lists = parent.scaled.get(resource)
        if lists is not None:
            lists.held = lists.mins  # every child's guarantee is its min now
        return changed
    lists = parent.scaled.get(resource)
    if lists is None:
        lists = parent.scaled[resource] = ChildLists(children, resource)
    # Scale guarantees only when the mins exceed what the parent is
    # guaranteed or holds (the cluster shrank), not when it is merely idle.
    if sum_min > scale_total:
        if lists.scale_total != scale_total:
            lists.guarantees = proportional(scale_total, lists.mins, lists.names)
            lists.scale_total = scale_total
        guarantees = lists.guarantees
    else:
        guarantees = lists.mins
    # Lists built by `map` over C functions: this runs for every child of every saturated
    # distribution (a Cohort of 100 quotas, several times per pod event).
    demands = [child.demand[resource] for child in children]
    bases = list(map(min, demands, guarantees))
    sum_base = parent.sum_base[resource] = sum(bases)
    leftover = total - sum_base
    if leftover > 0:
        needs = list(map(sub, demands, bases))
        extra = water_fill(
            leftover,
            needs,
            lists.weights,
            lists.names,
            in_name_order=True,
            one_weight=lists.one_weight,
        )
        runtimes = list(map(add, bases, extra))
    else:
        runtimes = bases
    # The children whose runtime or guarantee differ from what they hold, found by
    # comparing whole lists first (most children of a saturated parent move together, but
    # when its guarantees stayed only those whose share moved are visited).
    old_runtimes = [child.runtime.get(resource) for child in children]
    if guarantees is lists.held:
        # Every child holds these guarantees already (`ChildLists.held`): only runtimes move.
        if runtimes == old_runtimes:
            return changed
        for child, runtime, old_runtime in zip(children, runtimes, old_runtimes, strict=True):
            if old_runtime != runtime:
                if grown is not None and (old_runtime is None or runtime > old_runtime):
                    grown.add(child.name)
                child.runtime[resource] = runtime
                changed.append(child)
        return changed
    lists.held = guarantees  # what every child holds once this pass is done
    old_guarantees = [child.guarantee.get(resource) for child in children]
    if runtimes == old_runtimes and guarantees == old_guarantees:
        return changed
    # `_grows`, inlined.
    for child, g, runtime, old_runtime, old_guarantee in zip(
        children, guarantees, runtimes, old_runtimes, old_guarantees, strict=True
    ):
        if old_runtime != runtime or old_guarantee != g:
            if grown is not None and (
                old_runtime is None
                or old_guarantee is None
                or runtime > old_runtime
                or g > old_guarantee
            ):
                grown.add(child.name)
            child.runtime[resource] = runtime
            child.guarantee[resource] = g
            changed.append(child)
    return changed


def _grows(child: TreeMember, resource: str, runtime: int, guarantee: int) -> bool:
    """Does the child's runtime or guarantee go up (or appear) in `resource`?"""
    old_runtime = child.runtime.get(resource)
    old_guarantee = child.guarantee.get(resource)
    return (
        old_runtime is None
        or old_guarantee is None
        or runtime > old_runtime
        or guarantee > old_guarantee
    )
