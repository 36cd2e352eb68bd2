"""Demand and runtime per resource over the live tree, kept current incrementally.

Why a module of its own: this is the semantics' "Runtime" section, the part
of the engine whose cost matters. The structure (parents, children, cycles,
order) is asked of the DiGraph in `structure.py`; the accounting lives in one
`TreeMember` per live member (`accounts.py`), keyed by name.

One pod arriving or leaving changes one quota's raw request; its demand
change climbs the path to the root (stopping where a cap absorbs it), and
runtimes are redone top-down (`settling.py`) only at the parents on that path. A parent
whose children's targets all fit (the common case) updates just the child
that changed; a saturated parent redistributes among all its children, and
only the children whose runtime changed are visited further down: O(depth)
per pod event. `recompute()` does everything from scratch (`live_tree.py`);
the property tests check that both give the same runtimes. Subtrees left
unevaluated while their share falls are `deferred_subtrees.py`'s to keep.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from quotree import live_tree
from quotree.accounts import TreeMember
from quotree.climb import climb, mark
from quotree.deferred_subtrees import DeferredSubtrees
from quotree.models import MemberConfig
from quotree.quantity import add_amounts
from quotree.rules import Problem
from quotree.settling import Dirty, cascade, settle_resource
from quotree.structure import ROOT, Structure

__all__ = ["OUTSIDE", "ROOT", "QuotaTree"]

#: The account, in one tree, of admitted pods that only other trees charge
#: (docs/reference/objects.md, "Several trees"): not a member, so, like pods of inactive
#: quotas, what it holds is taken off the capacity this tree shares. The slash keeps it
#: apart from object names.
OUTSIDE = "quotree.io/other-trees"

_NONE: Mapping[str, int] = {}


class QuotaTree:
    """Cohorts and ElasticQuotas under the cluster root, with runtime per resource."""

    def __init__(self) -> None:
        self.structure = Structure()
        self._members: dict[str, TreeMember] = {}  # live members by name
        # Each live member's ancestors, nearest first, ending with the root: read off the
        # graph at every rebuild (never edited), so that a pod event walks its path in O(depth).
        self._path_up: dict[str, list[TreeMember]] = {}
        self.root = TreeMember(ROOT, None, 0)
        self._order: list[TreeMember] = []  # live members, parents before children
        self._live: live_tree.LiveTree | None = None  # the last rebuild's
        self._problems: dict[str, Problem] = {}
        self._stale = True
        self._capacity: dict[str, int] = {}
        self._unmanaged: dict[str, int] = {}
        self._outside_used: dict[str, int] = {}  # admitted pods of quotas outside the live tree
        # Per quota, kept whatever the structure, the two inputs of its raw request: its
        # pods' charges (`pod_request`) and the demand held for its pending pods (`held`).
        self._pod_request: dict[str, dict[str, int]] = {}
        self._held: dict[str, dict[str, int]] = {}
        self._quota_used: dict[str, dict[str, int]] = {}
        self._dirty: dict[str, Dirty] = {}  # resource -> the parents to redo
        self.changed_quotas: set[str] = set()
        # The members whose room may have grown since the last settle(): runtime or guarantee
        # up in some resource (from `distribute`), used down (a pod released), the root's
        # total changed. `grown_quotas` holds the set of the last settle(); the decider
        # skips a quota only when neither it nor any of its ancestors is in it.
        self._grown: set[str] = set()
        self.grown_quotas: set[str] = set()
        #: Leave the runtimes below a Cohort whose runtime only falls unevaluated until they
        #: are read or may matter (`deferral.py`); the `Decider` turns it on when its
        #: decisions cannot tell (one tree, no flavors, the `skip_shrunk_quotas` shortcut).
        self.lazy = False
        self._subtrees = DeferredSubtrees(self._cascade, self.root, self._members, self._path_up)
        # The deferred subtrees' own dict (Cohort -> its deferred resources) and steps, kept
        # here too: a pod event asks the dict at every level it climbs.
        self._deferred_at = self._subtrees.at
        self._materialize_path = self._subtrees.materialize_path
        self._used_grew_below = self._subtrees.used_grew_below
        # Every member (Cohort or ElasticQuota) whose runtime changed since `take_moved()`;
        # None: every member may have (a rebuild). The operator writes only their statuses.
        self._moved: set[str] | None = None
        # The quotas whose used is above their runtime in some resource (`over_below`), and
        # those that may have left it since it was last brought up to date: used moved, or
        # runtime moved while in it (a settle adds a quota whose runtime fell below its used
        # to `_over` at once, `settling.settle_resource`).
        self._over: set[TreeMember] = set()
        self._recheck: set[TreeMember] = set()

    # ------------------------------------------------------------ configuration

    def set_config(self, config: MemberConfig) -> None:
        """Add or replace a Cohort or ElasticQuota (by name)."""
        self.structure.set(config)
        self._stale = True

    def remove_config(
        self, name: str, kind: str | None = None, namespace: str | None = None
    ) -> None:
        """Remove a Cohort or ElasticQuota (kind None: every object of that name)."""
        self.structure.remove(name, kind, namespace)
        self._stale = True

    def config(self, name: str) -> MemberConfig | None:
        return self.structure.get(name)

    def configs(self) -> Mapping[str, MemberConfig]:
        """Every Cohort and ElasticQuota by name: the `Structure`, graph included."""
        return self.structure

    def set_capacity(self, capacity: Mapping[str, int]) -> None:
        """The allocatable of the cluster nodes that count (`capacity.node_allocatable`)."""
        if dict(capacity) != self._capacity:
            before = set(self._capacity)
            self._capacity = dict(capacity)
            self._root_total_changed(set(capacity) | before)

    def add_unmanaged(self, request: Mapping[str, int], sign: int = 1) -> None:
        """Requests of pods outside the tree that hold cluster capacity."""
        add_amounts(self._unmanaged, request, sign)
        self._root_total_changed(request)

    @property
    def capacity(self) -> Mapping[str, int]:
        return self._capacity

    # ------------------------------------------------------------ pod accounting

    def add_request(self, quota: str, request: Mapping[str, int], sign: int = 1) -> None:
        """A pod of `quota` arrived (sign 1) or left (sign -1), or its charge moved: the
        quota's pod request changes (and so its raw request)."""
        add_amounts(self._pod_request.setdefault(quota, {}), request, sign)
        self._raw_request_moved(quota, request, sign)

    def set_held(self, quota: str, resource: str, amount: int) -> None:
        """The demand held for `quota`'s pending pods on `resource` is `amount` now
        (`hold.Holds`): its raw request follows."""
        held = self._held.setdefault(quota, {})
        delta = amount - held.pop(resource, 0)
        if amount:
            held[resource] = amount
        if delta:
            self._raw_request_moved(quota, {resource: delta}, 1)

    def _raw_request_moved(self, quota: str, request: Mapping[str, int], sign: int) -> None:
        member = self._members.get(quota)
        if member is None or self._stale:
            return
        for resource in member.resources:
            amount = request.get(resource, 0)
            if amount:
                member.raw_request[resource] += sign * amount
                climb(
                    member,
                    resource,
                    dirty=self._dirty,
                    root=self.root,
                    path_up=self._path_up,
                    materialize_path=self._materialize_path if self._deferred_at else None,
                )

    def add_used(self, quota: str, request: Mapping[str, int], sign: int = 1) -> None:
        """A pod of `quota` was admitted (sign 1) or released (sign -1)."""
        add_amounts(self._quota_used.setdefault(quota, {}), request, sign)
        if self._stale:
            return
        member = self._members.get(quota)
        if member is None:
            # Pods of a quota outside the live tree still hold capacity.
            add_amounts(self._outside_used, request, sign)
            self._root_total_changed(request)
            return
        path = self._path_up[member.name]
        self._recheck.add(member)
        for resource in member.resources:
            amount = request.get(resource, 0)
            if amount:
                member.used[resource] += sign * amount
                for walk in path:
                    walk.used[resource] += sign * amount
                if sign > 0 and self._deferred_at:
                    self._used_grew_below(member, resource)
        if sign < 0:
            # Room (runtime - used) grew at the quota and every ancestor: see grown_quotas.
            self._grown.add(member.name)
            self._grown.update(walk.name for walk in path)

    def quota_used(self, quota: str) -> Mapping[str, int]:
        return self._quota_used.get(quota, {})

    def pod_request(self, quota: str) -> Mapping[str, int]:
        """What the quota's pods are charged, pending and admitted, per resource."""
        return self._pod_request.get(quota, _NONE)

    def held(self, quota: str) -> Mapping[str, int]:
        """The demand held for the quota's pending pods on their other flavors (`hold.Holds`)."""
        return self._held.get(quota, _NONE)

    def quota_request(self, quota: str) -> dict[str, int]:
        """The quota's raw request per resource: `pod_request` plus `held`."""
        pods, held = self._pod_request.get(quota, _NONE), self._held.get(quota, _NONE)
        return {r: pods.get(r, 0) + held.get(r, 0) for r in {*pods, *held}}

    # ------------------------------------------------------------ queries

    def member(self, name: str) -> TreeMember | None:
        """The live tree member called `name`, or None when it is missing or inactive, as of
        the last `refresh()` (reading changes nothing)."""
        return self._members.get(name)

    def ancestors(self, member: TreeMember) -> list[TreeMember]:
        """The live member's ancestors below the root, nearest first."""
        return self._path_up[member.name][:-1]

    def path_up(self, member: TreeMember) -> list[TreeMember]:
        """The live member's ancestors, nearest first, ending with the root."""
        return self._path_up[member.name]

    def quotas_below(self, member: TreeMember) -> list[TreeMember]:
        """The live ElasticQuotas in `member`'s subtree (every one, for the root), by name."""
        assert self._live is not None
        return self._live.quotas_below(member, self.structure)

    def over_below(self, member: TreeMember) -> list[TreeMember]:
        """The live ElasticQuotas in `member`'s subtree (every one, for the root) whose used is
        above their runtime in some resource, by name. Kept as used and runtimes move: O(the
        quotas over their runtime), not O(the subtree). Nothing deferred is brought up to date:
        a deferred subtree holds no quota over its runtime (`deferral.quota_margin`). As of
        the last `refresh()`; a cache, redone over the quotas whose used or runtime moved."""
        if self._recheck:
            over = self._over
            for quota in self._recheck:
                used, runtime = quota.used, quota.runtime
                if any(used[r] > runtime[r] for r in quota.resources):
                    over.add(quota)
                else:
                    over.discard(quota)
            self._recheck = set()
        if member is self.root:
            found = list(self._over)
        else:
            path_up = self._path_up
            found = [quota for quota in self._over if member in path_up[quota.name]]
        return sorted(found, key=lambda quota: quota.name)

    @property
    def problems(self) -> Mapping[str, Problem]:
        """Nodes outside the live tree, by name, and why (their Valid / Active conditions)."""
        return self._problems

    def live_members(self) -> Iterable[TreeMember]:
        return self._order

    def root_total(self, resource: str) -> int:
        total = (
            self._capacity.get(resource, 0)
            - self._unmanaged.get(resource, 0)
            - self._outside_used.get(resource, 0)
        )
        return max(total, 0)

    # ------------------------------------------------------------ structure changes

    def build_ahead(self) -> None:
        """Read the live tree off the configuration now when it changed since the last
        rebuild, the accounts left to the next refresh (`live_tree.build_ahead`)."""
        if self._stale:
            live_tree.build_ahead(self.structure)

    def _rebuild(self) -> None:
        live = self._live = live_tree.build(self.structure)
        self.root, self._members, self._order = live.root, live.members, live.order
        self._path_up, self._problems = live.path_up, live.problems
        self._stale = False
        self.recompute()

    # ------------------------------------------------------------ runtime

    def recompute(self) -> None:
        """Compute demand, used and runtime for every live member from scratch."""
        if self._stale:
            self._rebuild()
            return
        self._outside_used = {}
        for quota, used in self._quota_used.items():
            if quota not in self._members:
                add_amounts(self._outside_used, used, 1)
        live_tree.recompute(
            self.root, self._order, pod_request=self._pod_request, held=self._held,
            quota_used=self._quota_used, root_total=self.root_total,
        )  # fmt: skip
        self._dirty = {}
        self._subtrees.reset(self.root, self._members, self._path_up)
        # Every ElasticQuota, live or not: one that just went inactive must be looked at too.
        self.changed_quotas = {name for name, cfg in self.structure.items() if cfg.is_leaf}
        self._grown = set(self.changed_quotas)
        self._moved = None
        self._over = set()
        self._recheck = {member for member in self._order if member.is_quota}

    def settle(self) -> set[str]:
        """Bring runtimes up to date; returns the quotas whose runtime changed since last asked."""
        self.refresh()
        if self._subtrees.moved:
            self._subtrees.check_moved(self._grown)
        changed, self.changed_quotas = self.changed_quotas, set()
        self.grown_quotas, self._grown = self._grown, set()
        return changed

    def set_lazy(self, lazy: bool, looks_again: Callable[[str], bool] | None = None) -> None:
        """Turn deferred subtrees on or off (off: every deferred subtree is brought up to date);
        no subtree holding a quota `looks_again` names is deferred (`round_scope.looks_again`)."""
        if looks_again is not None:
            self._subtrees.looks_again = looks_again
        if self.lazy and not lazy and self._deferred_at:
            self._subtrees.materialize_below(self.root)
        self.lazy = lazy

    @property
    def deferrals(self) -> int:
        """Subtrees left unevaluated so far (tests and benchmarks read it)."""
        return self._subtrees.count

    def take_moved(self) -> set[str] | None:
        """The members whose runtime changed since the last call (None: maybe every member).

        Deferred subtrees are brought up to date first: their runtimes did move (down),
        and whoever asks (the operator's status writer) shows every runtime as it is."""
        self.refresh(ROOT)
        moved, self._moved = self._moved, set()
        if moved is not None and self._subtrees.absorbed:
            moved |= self._subtrees.absorbed  # `DeferredSubtrees.absorbed` says why
        self._subtrees.absorbed.clear()
        return moved

    def refresh(self, name: str | None = None) -> None:
        """The explicit step before reading: runtimes brought up to date with every change
        since (the quotas whose runtime changed are left for `settle()` to take, for the next
        decision); with `name`, the deferred subtrees over that member too (ROOT: all)."""
        self._update()
        if name is not None and self._deferred_at:
            if name == ROOT:
                self._subtrees.materialize_below(self.root)
            elif (member := self._members.get(name)) is not None:
                self._materialize_path(member)

    def _update(self) -> None:
        if self._stale:
            self._rebuild()
        if self._dirty:
            for resource, dirty in self._dirty.items():
                if dirty:
                    settle_resource(
                        resource,
                        dirty,
                        root=self.root,
                        path_up=self._path_up,
                        lazy=self.lazy,
                        subtrees=self._subtrees,
                        changed=self.changed_quotas,
                        grown=self._grown,
                        moved=self._moved,
                        over=self._over,
                        recheck=self._recheck,
                    )
            self._dirty = {}

    # ------------------------------------------------------------ the root and deferred steps

    def _root_total_changed(self, resources: Iterable[str]) -> None:
        if self._stale:
            return
        root = self.root
        self._grown.add(root.name)  # it may have grown: see grown_quotas
        for resource in resources:
            if resource in root.resources:
                root.runtime[resource] = root.guarantee[resource] = self.root_total(resource)
                mark(self._dirty, root, resource, None)

    def _cascade(
        self, cohort: TreeMember, resource: str, *, report: bool, keep: Collection[TreeMember] = ()
    ) -> None:
        """Redistribute a deferred subtree (`DeferredSubtrees.materialize`'s step), noting
        the quotas that changed and the members that gained room when `report`; the
        subtrees of the children in `keep` are left as they are."""
        cascade(
            cohort,
            resource,
            changed=self.changed_quotas if report else None,
            grown=self._grown if report else None,
            moved=self._moved,
            over=self._over,
            recheck=self._recheck,
            keep=keep,
        )
