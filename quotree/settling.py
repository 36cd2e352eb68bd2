"""The top-down passes of a settle: redistributing below the parents a climb marked.

Why a module of its own: `QuotaTree` (`runtime.py`) carries a pod's demand
change up its path and marks the parents whose children's runtimes must be
redone; these passes redo them, parents before children, each parent with
`distribution.distribute`, going further down only where a child's runtime
changed, and note who moved (the quotas to look at again, the members that
gained room, the members whose status to write). With laziness on, a Cohort
whose runtime only fell may be left as it is (`deferred_subtrees.py`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection

from quotree.accounts import TreeMember
from quotree.deferred_subtrees import DeferredSubtrees
from quotree.distribution import distribute

__all__ = ["Dirty", "cascade", "settle_resource"]

#: parent -> {child whose demand changed: its demand at the last distribution} (None: redo all)
Dirty = dict[TreeMember, dict[TreeMember, int] | None]


def settle_resource(
    resource: str,
    dirty: Dirty,
    *,
    root: TreeMember,
    path_up: dict[str, list[TreeMember]],
    lazy: bool,
    subtrees: DeferredSubtrees,
    changed: set[str],
    grown: set[str],
    moved: set[str] | None,
    over: set[TreeMember],
    recheck: set[TreeMember],
) -> None:
    """Redo the `dirty` parents in one resource, and the children of theirs that moved.

    `changed` receives the quotas whose runtime changed, `grown` the members whose room
    may have grown, `moved` (unless None) every member whose runtime changed. A quota whose
    runtime changed goes into `over` when its used is now above it (`QuotaTree.over_below`'s
    set), or into `recheck` when it was in `over` (it may have left it): one comparison per
    quota that moved, not one per resource it takes part in."""
    counter = itertools.count()
    heap = [(parent.depth, next(counter), parent) for parent in dirty]
    heapq.heapify(heap)
    deferred = subtrees.by_resource.get(resource)
    busy: set[TreeMember] | None = None  # the dirty parents and their ancestors
    while heap:
        _, _, parent = heapq.heappop(heap)
        if parent not in dirty:
            continue
        hints = dirty.pop(parent)
        for child in distribute(parent, resource, hints, at_root=parent is root, grown=grown):
            if moved is not None:
                moved.add(child.name)
            if child.is_quota:
                changed.add(child.name)
                if child.used[resource] > child.runtime[resource]:
                    over.add(child)
                elif child in over:
                    recheck.add(child)
            elif resource in child.children_in and child not in dirty:
                entry = deferred.get(child) if deferred else None
                if entry is not None:
                    if subtrees.still_deferred(child, resource, entry):
                        continue
                    subtrees.materialize(child, resource, to_last=False)
                    dirty[child] = None  # redistributed from its runtime now, reported
                else:
                    if lazy and child.runtime[resource] < child.last_total.get(resource, -1):
                        if busy is None:
                            busy = set(dirty)
                            for member in dirty:
                                busy.update(path_up.get(member.name, ()))
                        if child not in busy and subtrees.defer(child, resource):
                            deferred = subtrees.by_resource[resource]
                            continue
                    dirty[child] = {}
                heapq.heappush(heap, (child.depth, next(counter), child))


def cascade(
    cohort: TreeMember,
    resource: str,
    *,
    changed: set[str] | None,
    grown: set[str] | None,
    moved: set[str] | None,
    over: set[TreeMember],
    recheck: set[TreeMember],
    keep: Collection[TreeMember] = (),
) -> None:
    """Redistribute `cohort`'s subtree top-down from its present runtime (a deferred
    subtree brought up to date); `changed`, `grown`, `moved`, `over`, `recheck` as for
    `settle_resource`, None: not noted. The subtrees of `cohort`'s children in `keep` are
    left as they are (their own runtimes are redone)."""
    dirty: Dirty = {cohort: None}
    counter = itertools.count()
    heap = [(cohort.depth, next(counter), cohort)]
    while heap:
        _, _, parent = heapq.heappop(heap)
        hints = dirty.pop(parent)
        for child in distribute(parent, resource, hints, at_root=False, grown=grown):
            if moved is not None:
                moved.add(child.name)
            if child.is_quota:
                if child.used[resource] > child.runtime[resource]:
                    over.add(child)
                elif child in over:
                    recheck.add(child)
                if changed is not None:
                    changed.add(child.name)
            elif resource in child.children_in and child not in dirty and child not in keep:
                dirty[child] = {}
                heapq.heappush(heap, (child.depth, next(counter), child))
