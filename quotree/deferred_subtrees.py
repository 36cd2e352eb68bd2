"""The bookkeeping of deferred subtrees: which are deferred, and when they are brought up to date.

Why a module of its own: `QuotaTree` (`runtime.py`) carries demand up and
runtime down; when it turns laziness on, a Cohort whose runtime only falls may
have its subtree left as it was (`deferral.py` says when that is safe). This
module keeps those subtrees: it defers one, lets one stay deferred while its
Cohort's runtime moves within the slack, and brings one up to date
(`materialize`) when it is read, when a pod event touches it, when its Cohort's
runtime rises, or when the slack runs out. Redistributing a subtree is the
tree's own step (`QuotaTree._cascade`), handed in at construction.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol

from quotree.accounts import TreeMember
from quotree.deferral import member_margin, quota_margin

__all__ = ["Deferred", "DeferredSubtrees"]


def _never(name: str) -> bool:
    return False


class _Cascade(Protocol):
    def __call__(
        self, cohort: TreeMember, resource: str, *, report: bool, keep: Collection[TreeMember] = ()
    ) -> None: ...


class Deferred:
    """A Cohort whose children's runtimes in one resource were left as they were while its
    own runtime fell (`deferral.py`): they are those of the total `reflected`."""

    __slots__ = ("boundary", "last", "offsets", "reflected", "slack")

    def __init__(self, reflected: int, last: int, slack: int) -> None:
        self.reflected = reflected  # the total the subtree's runtimes are those of
        self.last = last  # the Cohort's runtime the last time it moved
        self.slack = slack  # how far below `reflected` it may go (`deferral.py`)
        # Its runtime at the last settle(): the subtree is first brought there without
        # reporting (those changes were reported, and skipped, then); None: deferred since.
        self.boundary: int | None = None
        # Cohorts below that were deferred themselves when this one was (`_absorb`): how far
        # below the runtimes their subtrees show each one already was. None: there were none.
        self.offsets: dict[TreeMember, int] | None = None


class DeferredSubtrees:
    """The deferred subtrees of one live tree, by resource and by Cohort."""

    __slots__ = (
        "_cascade",
        "_members",
        "_path_up",
        "_root",
        "absorbed",
        "at",
        "by_resource",
        "count",
        "looks_again",
        "moved",
    )

    def __init__(
        self,
        cascade: _Cascade,
        root: TreeMember,
        members: dict[str, TreeMember],
        path_up: dict[str, list[TreeMember]],
    ) -> None:
        self._cascade = cascade
        #: Quotas no deferred subtree may hold (`QuotaTree.set_lazy`; by default none).
        self.looks_again: Callable[[str], bool] = _never
        self._root, self._members, self._path_up = root, members, path_up
        # These three are emptied in place, never replaced: `QuotaTree` keeps `at` as its own
        # attribute too, for the test every pod event makes ("is anything deferred?").
        self.by_resource: dict[str, dict[TreeMember, Deferred]] = {}  # resource -> Cohort -> ...
        self.at: dict[TreeMember, set[str]] = {}  # Cohort -> its deferred resources
        self.moved: set[tuple[str, TreeMember]] = set()  # deferred and moved since settle()
        self.count = 0  # subtrees left unevaluated so far (tests and benchmarks read it)
        # The Cohorts whose runtime `_absorb` set back to what their subtree shows: the
        # status writer's `QuotaTree.take_moved` names them, since bringing the subtree up
        # to date from above may leave one at that runtime, unnoted, when its status shows
        # the lower one it had (a rise of the outer Cohort past its slack).
        self.absorbed: set[str] = set()

    def reset(
        self, root: TreeMember, members: dict[str, TreeMember], path_up: dict[str, list[TreeMember]]
    ) -> None:
        """Nothing deferred, in the live tree given (after a full recompute)."""
        self._root, self._members, self._path_up = root, members, path_up
        self.by_resource.clear()
        self.at.clear()
        self.moved.clear()
        self.absorbed.clear()

    def defer(self, cohort: TreeMember, resource: str) -> bool:
        """Leave `cohort`'s subtree as it is, its runtime having fallen, when nothing there
        can matter before it falls further than its slack (`deferral.py`)."""
        reflected = cohort.last_total[resource]
        fall = reflected - cohort.runtime[resource]
        if cohort.last_scale_total[resource] < cohort.sum_min[resource]:
            return False  # its children's guarantees are scaled mins: they may move
        runtime = cohort.runtime[resource]
        cohort.runtime[resource] = reflected  # the margins are those of the subtree as it is
        try:
            slack, nested = self._slack(cohort, resource, fall)
        finally:
            cohort.runtime[resource] = runtime
        if slack < fall:
            return False
        entry = Deferred(reflected, runtime, slack)
        for member in nested:
            self._absorb(member, resource, entry)
        self.by_resource.setdefault(resource, {})[cohort] = entry
        self.at.setdefault(cohort, set()).add(resource)
        self.moved.add((resource, cohort))
        self.count += 1
        return True

    def _slack(self, cohort: TreeMember, resource: str, need: int) -> tuple[int, list[TreeMember]]:
        """The least margin over `cohort`'s subtree (stopping once below `need`), and the
        Cohorts below that are deferred themselves. Such a one counts with what is left of
        its own slack, not walked: below it, runtimes stay right while it falls no more
        than its slack from the total they are those of, and it falls by at most what
        `cohort` falls."""
        deferred = self.by_resource.get(resource, {})
        looks_again = self.looks_again
        slack = member_margin(cohort, resource)
        nested: list[TreeMember] = []
        stack = list(cohort.children_in[resource])
        while stack and slack >= need:
            member = stack.pop()
            if member.is_quota:
                slack = min(slack, quota_margin(member, resource))
                # A quota the decider looks at again when its runtime moves is not left
                # behind a deferral: its fall is reported as an eager tree's would be.
                if slack and looks_again(member.name):
                    slack = 0
                continue
            if resource not in member.children_in:
                continue
            inner = deferred.get(member)
            if inner is not None:
                slack = min(slack, inner.slack - (inner.reflected - member.runtime[resource]))
                nested.append(member)
                continue
            slack = min(slack, member_margin(member, resource))
            stack.extend(member.children_in[resource])
        return slack, nested

    def _absorb(self, member: TreeMember, resource: str, outer: Deferred) -> None:
        """`member`, deferred, is below a Cohort being deferred (`outer`): deferred subtrees
        do not nest, so it becomes part of the outer one. Its runtime is set back to the
        total its subtree's runtimes are those of, so that bringing the outer subtree up to
        date redistributes below it whenever its real runtime differs; how far it had
        already fallen is kept (`Deferred.offsets`) for the margins of the quotas below
        (`used_grew_below`)."""
        inner = self._forget(member, resource)
        if outer.offsets is None:
            outer.offsets = {}
        outer.offsets[member] = inner.reflected - member.runtime[resource]
        member.runtime[resource] = inner.reflected
        self.absorbed.add(member.name)

    def used_grew_below(self, quota: TreeMember, resource: str) -> None:
        """The quota's used grew under a Cohort deferred in `resource`: its margin to its
        runtime shrank, and so may the subtree's slack (or the quota could go over its
        runtime, unreported, while the Cohort's runtime keeps falling within the old one).
        Bring the subtree up to date when it has already fallen further than that."""
        deferred = self.by_resource.get(resource)
        if not deferred:
            return
        path = self._path_up[quota.name]
        for walk in path:
            entry = deferred.get(walk)
            if entry is not None:  # at most one: deferred subtrees do not nest
                margin = quota_margin(quota, resource)
                if entry.offsets:  # below a Cohort taken in: it had fallen that much already
                    for above in path:
                        if above is walk:
                            break
                        margin -= entry.offsets.get(above, 0)
                entry.slack = min(entry.slack, margin)
                if entry.reflected - entry.last > entry.slack:
                    self.materialize(walk, resource)
                return

    def still_deferred(self, cohort: TreeMember, resource: str, entry: Deferred) -> bool:
        """The deferred `cohort`'s runtime moved: may its subtree stay as it is?

        Yes while it stays within the slack below the total its subtree's runtimes are
        those of (`reflected`), whether it fell further or rose back some way (a reclaim
        gave back what an arrival took). In that range every runtime below is monotone in
        the Cohort's (`deferral.py`), so each is at most what the subtree shows, which is
        what the decider last saw: nothing below was reported while deferred, and reading
        there brings it up to date. An eager tree reports the fall and the rise member by
        member; the decider, whose pending pods were looked at with at least this much
        room, would do nothing with either."""
        runtime = cohort.runtime[resource]
        if (
            runtime <= entry.reflected
            and entry.reflected - runtime <= entry.slack
            and cohort.sum_min[resource] <= cohort.guarantee[resource]
        ):
            entry.last = runtime
            self.moved.add((resource, cohort))
            return True
        return False

    def _forget(self, cohort: TreeMember, resource: str) -> Deferred:
        """Take `cohort` off the deferred subtrees in `resource`; returns its entry."""
        entry = self.by_resource[resource].pop(cohort)
        resources = self.at[cohort]
        resources.discard(resource)
        if not resources:
            del self.at[cohort]
        self.moved.discard((resource, cohort))
        return entry

    def materialize(self, cohort: TreeMember, resource: str, *, to_last: bool = True) -> None:
        """Bring the deferred subtree up to date: first, without reporting, to the runtimes
        of the last settle() (reported, and skipped by the decider, back then), then, with
        the changes reported, to the runtime the Cohort had last; its runtime is left as
        it is now (the caller redistributes when it moved since). Without `to_last` the
        second step is left to the caller, which redistributes the subtree from the
        Cohort's runtime now at once (reporting the changes from the last settle's runtimes,
        all the decider needs)."""
        entry = self._forget(cohort, resource)
        now = cohort.runtime[resource]
        self._two_steps(cohort, resource, entry.boundary, entry.last if to_last else None)
        cohort.runtime[resource] = now

    def _two_steps(
        self, cohort: TreeMember, resource: str, boundary: int | None, last: int | None
    ) -> None:
        """`materialize`'s two steps for `cohort`'s subtree: redistributed from `boundary`
        without reporting, then from `last` with the changes reported (None: that step is
        not taken). `cohort`'s runtime is left at the last one taken."""
        if boundary is not None:
            cohort.runtime[resource] = boundary
            self._cascade(cohort, resource, report=False)
        if last is not None:
            cohort.runtime[resource] = last
            self._cascade(cohort, resource, report=True)

    def materialize_path(self, member: TreeMember, resource: str | None = None) -> None:
        """Bring the runtimes on `member`'s path (and below it) up to date before they are
        read. A deferred Cohort on the path is redistributed, and so is the subtree of its
        child on the path; its other children may stay deferred, each on its own
        (`_materialize_toward`)."""
        below: TreeMember | None = None
        for walk in (member, *self._path_up[member.name]):
            resources = self.at.get(walk)
            if resources:
                for r in sorted(resources) if resource is None else [resource]:
                    if r in resources:
                        if below is None:
                            self.materialize(walk, r)
                        else:
                            self._materialize_toward(walk, r, below)
            below = walk

    def _materialize_toward(self, cohort: TreeMember, resource: str, toward: TreeMember) -> None:
        """`materialize` for a read below `toward`, a child of `cohort`: `cohort`'s own
        distribution and `toward`'s subtree are brought up to date (the same two steps, with
        the same reports), and every other child Cohort is deferred on its own instead of
        redistributed, when its subtree may be: its runtime fell from the total its subtree
        shows by no more than what is left of the outer slack (plus, for one taken in by
        `_absorb`, how far it had already fallen). The outer slack bounds every margin in
        its subtree (`_slack` took the least of them all, and `used_grew_below` keeps it),
        and its own distribution's margin among them; so it stays as right as it would
        have under `cohort`. A child whose fall is beyond that, whose guarantee is below its
        mins, or below which another Cohort was taken in, is brought up to date as before."""
        outer = self.by_resource[resource][cohort]
        offsets = outer.offsets or {}
        nested_below = {above for m in offsets for above in self._path_up[m.name]}
        left: dict[TreeMember, int] = {}  # child -> the total its subtree's runtimes are those of
        for child in cohort.children_in[resource]:
            if child is toward or child.is_quota or resource not in child.children_in:
                continue
            shown = child.last_total.get(resource)
            if shown is not None and child.runtime[resource] == shown and child not in nested_below:
                left[child] = shown
        if not left:
            self.materialize(cohort, resource)
            return
        was_moved = (resource, cohort) in self.moved
        self._forget(cohort, resource)
        now = cohort.runtime[resource]
        at_boundary: dict[TreeMember, int] | None = None
        if outer.boundary is not None:
            cohort.runtime[resource] = outer.boundary
            self._cascade(cohort, resource, report=False, keep=left)
            at_boundary = {child: child.runtime[resource] for child in left}
        cohort.runtime[resource] = outer.last
        self._cascade(cohort, resource, report=True, keep=left)
        cohort.runtime[resource] = now
        deferred = self.by_resource.setdefault(resource, {})
        for child, shown in left.items():
            runtime = child.runtime[resource]
            slack = outer.slack + offsets.get(child, 0)
            if (
                runtime <= shown
                and shown - runtime <= slack
                and child.sum_min[resource] <= child.guarantee[resource]
            ):
                entry = Deferred(shown, runtime, slack)
                entry.boundary = None if at_boundary is None else at_boundary[child]
                deferred[child] = entry
                self.at.setdefault(child, set()).add(resource)
                if was_moved:
                    self.moved.add((resource, child))
                self.count += 1
                continue
            self._two_steps(
                child, resource, None if at_boundary is None else at_boundary[child], runtime
            )

    def materialize_below(self, member: TreeMember) -> None:
        """Bring every runtime in `member`'s subtree, and on its path, up to date."""
        self.materialize_path(member)
        for cohort in list(self.at):
            if cohort in self.at and member in self._path_up[cohort.name]:
                for r in sorted(self.at[cohort]):
                    self.materialize(cohort, r)

    def check_moved(self, grown: set[str]) -> None:
        """At a settle(): a deferred subtree whose Cohort moved is brought up to date when a
        member below the Cohort gained room (`grown`, the names of the members that did);
        the others note their runtime as the new boundary. Room gained above the Cohort (a
        pod released elsewhere) or by the Cohort itself (its runtime rose back within the
        slack, `still_deferred`) leaves it deferred: no runtime below is above what the
        decider last saw, and a quota that waits on an ancestor is looked at (and read up
        to date) in any case."""
        near: set[TreeMember] = set()  # the ancestors of the members that gained room
        for name in grown:
            member = self._members.get(name)
            if member is not None:
                near.update(self._path_up[name])
        # Bringing one up to date touches only its own subtree in its resource (deferred
        # subtrees do not nest), so the boundaries are noted in any order and only the
        # subtrees brought up to date are sorted (by resource, depth and name).
        near_moved: list[tuple[str, TreeMember]] = []
        by_resource = self.by_resource
        for resource, cohort in self.moved:
            deferred = by_resource.get(resource)
            entry = deferred.get(cohort) if deferred else None
            if entry is None:
                continue
            if cohort in near:
                near_moved.append((resource, cohort))
            else:
                entry.boundary = cohort.runtime[resource]
        self.moved.clear()
        near_moved.sort(key=lambda m: (m[0], m[1].depth, m[1].name))
        for resource, cohort in near_moved:
            self.materialize(cohort, resource)
