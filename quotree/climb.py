"""The climb of a pod event: a quota's demand change carried up its path, parents marked.

Why a module of its own: `QuotaTree` (`runtime.py`) keeps the accounts; this is the
bottom-up half of an incremental update, the part that runs for every resource and
level of every pod that comes or goes. It changes demands and the parents' sums on the
way up and marks, in `dirty`, the parents whose children's runtimes the top-down passes
(`settling.py`) must redo. It stops where a cap or floor absorbs the change.
"""

from __future__ import annotations

from collections.abc import Callable

from quotree.accounts import TreeMember
from quotree.settling import Dirty

__all__ = ["climb", "mark"]


def mark(
    dirty: dict[str, Dirty],
    parent: TreeMember,
    resource: str,
    child: TreeMember | None,
    old_demand: int = 0,
) -> None:
    """Note that `parent` must redo its children's runtimes (child None: T changed only)."""
    marks = dirty.setdefault(resource, {})
    hints = marks.get(parent)
    if hints is None:
        if parent in marks:
            return  # already redoing all
        hints = marks[parent] = {}
    if child is not None:
        hints.setdefault(child, old_demand)


def climb(
    member: TreeMember,
    resource: str,
    *,
    dirty: dict[str, Dirty],
    root: TreeMember,
    path_up: dict[str, list[TreeMember]],
    materialize_path: Callable[[TreeMember, str], None] | None,
) -> None:
    """Carry a quota's raw-request change up the path as far as demand changes.

    `materialize_path` (None: nothing is deferred) brings a deferred subtree on the
    quota's path up to date before its demand moves."""
    while True:
        old = member.demand[resource]
        # member.clamp and member.target, inlined: this runs per resource and level for
        # every pod that comes or goes.
        raw, floor, cap = member.raw_request[resource], member.floor[resource], member.cap[resource]
        new = min(cap, raw if raw > floor else floor)
        if new == old:
            return
        if materialize_path is not None and member.is_quota:
            materialize_path(member, resource)
        member.demand[resource] = new
        parent = path_up[member.name][0]
        parent.margin_sums.pop(resource, None)  # `deferral.child_sums` read the old demand
        guarantee = member.guarantee.get(resource)
        if guarantee is not None and resource in parent.sum_base:
            parent.sum_base[resource] += min(new, guarantee) - min(old, guarantee)
        if member.weight[resource] > 0:
            parent.sum_target[resource] += new - old
        else:
            low = member.min[resource]
            parent.sum_target[resource] += min(new, low) - min(old, low)
        # When the member wants more than it gets, before and after, below a parent that
        # was saturated at its last distribution and still is with the same total,
        # redistributing would move nobody's share (`distribute`'s first shortcut): the
        # parent is not marked. Should its total move in this settle, it is redone in
        # full anyway.
        runtime = member.runtime.get(resource)
        if runtime is None or old <= runtime or new <= runtime:
            mark(dirty, parent, resource, member, old)
        elif parent.roomy.get(resource) is not False:
            mark(dirty, parent, resource, member, old)  # roomy then, or never distributed
        else:
            total = parent.runtime[resource]
            scale_total = total if parent is root else max(total, parent.guarantee[resource])
            if (
                parent.last_total.get(resource) != total
                or parent.last_scale_total.get(resource) != scale_total
                or (
                    parent.sum_min[resource] <= scale_total and parent.sum_target[resource] <= total
                )
            ):
                mark(dirty, parent, resource, member, old)
        if parent is root:
            return
        parent.raw_request[resource] += new - old
        member = parent
