"""Demand and runtime per resource over the live tree, kept current incrementally.

Why a module of its own: this is the semantics' "Runtime" section, the part
of the engine whose cost matters. The structure (parents, children, cycles,
order) is asked of the DiGraph in `structure.py`; the accounting lives in one
`TreeNode` per live node (`accounts.py`), keyed by name.

One pod arriving or leaving changes one quota's raw request; its demand
change climbs the path to the root (stopping where a cap absorbs it), and
runtimes are redone top-down only at the parents on that path. A parent
whose children's targets all fit (the common case) updates just the child
that changed; a saturated parent redistributes among all its children, and
only the children whose runtime changed are visited further down: O(depth)
per pod event. `recompute()` does everything from scratch; the property
tests check that both give the same runtimes.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping

import networkx as nx

from quotree.accounts import TreeNode
from quotree.deferral import node_margin, quota_margin
from quotree.distribution import distribute
from quotree.models import NodeConfig
from quotree.quantity import add_amounts
from quotree.rules import Problem, tree_problems
from quotree.structure import ROOT, Structure

__all__ = ["OUTSIDE", "ROOT", "QuotaTree"]

#: The account, in one tree, of admitted pods that only other trees charge (api.md,
#: "Several trees"): not a node, so, like pods of inactive quotas, what it holds is taken
#: off the capacity this tree shares. The slash keeps it apart from object names.
OUTSIDE = "quotree.io/other-trees"

# parent -> {child whose demand changed: its demand at the last distribution} (None: redo all)
_Dirty = dict[TreeNode, dict[TreeNode, int] | None]


class _Deferred:
    """A Cohort whose children's runtimes in one resource were left as they were while its
    own runtime fell (`deferral.py`): they are those of the total `reflected`."""

    __slots__ = ("boundary", "last", "reflected", "slack")

    def __init__(self, reflected: int, last: int, slack: int) -> None:
        self.reflected = reflected  # the total the subtree's runtimes are those of
        self.last = last  # the Cohort's runtime the last time it moved
        self.slack = slack  # how far below `reflected` it may go (`deferral.py`)
        # Its runtime at the last settle(): the subtree is first brought there without
        # reporting (those changes were reported, and skipped, then); None: deferred since.
        self.boundary: int | None = None


class QuotaTree:
    """Cohorts and ElasticQuotas under the cluster root, with runtime per resource."""

    def __init__(self) -> None:
        self.structure = Structure()
        self._nodes: dict[str, TreeNode] = {}  # live nodes by name
        # Each live node's ancestors, nearest first, ending with the root: read off the
        # graph at every rebuild (never edited), so that a pod event walks its path in O(depth).
        self._path_up: dict[str, list[TreeNode]] = {}
        self.root = TreeNode(ROOT, None, 0)
        self._order: list[TreeNode] = []  # live nodes, parents before children
        self._problems: dict[str, Problem] = {}
        self._stale = True
        self._capacity: dict[str, int] = {}
        self._unmanaged: dict[str, int] = {}
        self._outside_used: dict[str, int] = {}  # admitted pods of quotas outside the live tree
        # Pod totals per quota over every resource, kept whatever the structure.
        self._quota_raw_request: dict[str, dict[str, int]] = {}
        self._quota_used: dict[str, dict[str, int]] = {}
        self._dirty: dict[str, _Dirty] = {}
        self.changed_quotas: set[str] = set()
        # The nodes whose room may have grown since the last settle(): runtime or guarantee
        # up in some resource (from `distribute`), used down (a pod released), the root's
        # total changed. `grown_quotas` holds the set of the last settle(); the decider
        # skips a quota only when neither it nor any of its ancestors is in it.
        self._grown: set[str] = set()
        self.grown_quotas: set[str] = set()
        #: Leave the runtimes below a Cohort whose runtime only falls unevaluated until they
        #: are read or may matter (`deferral.py`); the `Decider` turns it on when its
        #: decisions cannot tell (one tree, no flavors, the `skip_shrunk_quotas` shortcut).
        self.lazy = False
        self._deferred: dict[str, dict[TreeNode, _Deferred]] = {}  # resource -> Cohort -> ...
        self._deferred_at: dict[TreeNode, set[str]] = {}  # Cohort -> its deferred resources
        # deferred and moved since settle()
        self._deferred_moved: set[tuple[str, TreeNode]] = set()
        self.deferrals = 0  # subtrees left unevaluated so far (tests and benchmarks read it)
        # Every node (Cohort or ElasticQuota) whose runtime changed since `take_moved()`;
        # None: every node may have (a rebuild). The operator writes only their statuses.
        self._moved: set[str] | None = None

    # ------------------------------------------------------------ configuration

    def set_config(self, config: NodeConfig) -> None:
        """Add or replace a Cohort or ElasticQuota (by name)."""
        self.structure.set(config)
        self._stale = True

    def remove_config(
        self, name: str, kind: str | None = None, namespace: str | None = None
    ) -> None:
        """Remove a Cohort or ElasticQuota (kind None: every object of that name)."""
        self.structure.remove(name, kind, namespace)
        self._stale = True

    def config(self, name: str) -> NodeConfig | None:
        return self.structure.get(name)

    def configs(self) -> Mapping[str, NodeConfig]:
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
        """A pod of `quota` arrived (sign 1) or left (sign -1): its raw request changes."""
        add_amounts(self._quota_raw_request.setdefault(quota, {}), request, sign)
        node = self._nodes.get(quota)
        if node is None or self._stale:
            return
        for resource in node.resources:
            amount = request.get(resource, 0)
            if amount:
                node.raw_request[resource] += sign * amount
                self._climb(node, resource)

    def add_used(self, quota: str, request: Mapping[str, int], sign: int = 1) -> None:
        """A pod of `quota` was admitted (sign 1) or released (sign -1)."""
        add_amounts(self._quota_used.setdefault(quota, {}), request, sign)
        if self._stale:
            return
        node = self._nodes.get(quota)
        if node is None:
            # Pods of a quota outside the live tree still hold capacity.
            add_amounts(self._outside_used, request, sign)
            self._root_total_changed(request)
            return
        path = self._path_up[node.name]
        for resource in node.resources:
            amount = request.get(resource, 0)
            if amount:
                node.used[resource] += sign * amount
                for walk in path:
                    walk.used[resource] += sign * amount
                if sign > 0 and self._deferred_at:
                    self._used_grew_below(node, resource)
        if sign < 0:
            # Room (runtime - used) grew at the quota and every ancestor: see grown_quotas.
            self._grown.add(node.name)
            self._grown.update(walk.name for walk in path)

    def quota_used(self, quota: str) -> Mapping[str, int]:
        return self._quota_used.get(quota, {})

    def quota_request(self, quota: str) -> Mapping[str, int]:
        """The quota's raw request (its pods', and `hold.Holds`' holds) per resource."""
        return self._quota_raw_request.get(quota, {})

    # ------------------------------------------------------------ queries

    def node(self, name: str) -> TreeNode | None:
        """The live tree node called `name`, or None when it is missing or inactive."""
        self._update()
        node = self._nodes.get(name)
        if node is not None and self._deferred_at:
            self._materialize_path(node)
        return node

    def parent(self, node: TreeNode) -> TreeNode:
        """The live parent of a live node (the root for a top-level one)."""
        return self._path_up[node.name][0]

    def ancestors(self, node: TreeNode) -> list[TreeNode]:
        """The live node's ancestors below the root, nearest first."""
        return self._path_up[node.name][:-1]

    def path_up(self, node: TreeNode) -> list[TreeNode]:
        """The live node's ancestors, nearest first, ending with the root."""
        return self._path_up[node.name]

    def quotas_below(self, node: TreeNode) -> list[TreeNode]:
        """The live ElasticQuotas in `node`'s subtree (every one, for the root), by name."""
        if self._deferred_at:
            self._materialize_below(node)
        if node is self.root:
            return sorted((n for n in self._order if n.is_quota), key=lambda n: n.name)
        below = nx.descendants(self.structure.graph, node.name)
        return [
            self._nodes[n] for n in sorted(below) if n in self._nodes and self._nodes[n].is_quota
        ]

    @property
    def problems(self) -> Mapping[str, Problem]:
        """Nodes outside the live tree, by name, and why (their Valid / Active conditions)."""
        self._update()
        return self._problems

    def live_nodes(self) -> Iterable[TreeNode]:
        self._update()
        if self._deferred_at:
            self._materialize_below(self.root)
        return self._order

    def root_total(self, resource: str) -> int:
        total = (
            self._capacity.get(resource, 0)
            - self._unmanaged.get(resource, 0)
            - self._outside_used.get(resource, 0)
        )
        return max(total, 0)

    # ------------------------------------------------------------ structure changes

    def _rebuild(self) -> None:
        structure = self.structure
        own = tree_problems(structure)
        problems = dict(own)
        self.root = TreeNode(ROOT, None, 0)
        nodes: dict[str, TreeNode] = {}
        order: list[TreeNode] = []
        path_up: dict[str, list[TreeNode]] = {ROOT: []}
        for name, parent, depth in structure.live_order(problems):
            node = nodes[name] = TreeNode(name, structure[name], depth)
            order.append(node)
            above = self.root if parent == ROOT else nodes[parent]
            path_up[name] = [above, *path_up[parent]]
        for name, config in structure.items():
            if name in nodes or name in problems:
                continue
            chain = structure.chain_up(name)
            # The nearest ancestor whose own configuration is broken: the same words whatever
            # order the objects came in.
            cause = next((own[a] for a in chain if a in own), None)
            ancestor = chain[-1] if chain else config.parent
            problems[name] = Problem(
                config.describe(),
                "InactiveAncestor",
                f"{config.describe()}: inactive because "
                + (cause.message if cause else f"its ancestor {ancestor} is inactive"),
                own=False,
            )
        self._problems = problems
        self._nodes = nodes
        self._order = order
        self._path_up = path_up
        self._assign_participation()
        self._stale = False
        self.recompute()

    def _assign_participation(self) -> None:
        """Who takes part in which resource: named by the node, an ancestor or a descendant."""
        graph = self.structure.graph
        nodes = self._nodes

        def live_children(name: str) -> list[TreeNode]:
            return [nodes[c] for c in sorted(graph.successors(name)) if c in nodes]

        def named(node: TreeNode) -> set[str]:
            assert node.config is not None
            return set(node.config.min) | set(node.config.max)

        below: dict[str, set[str]] = {}
        for node in reversed(self._order):
            mine = named(node)
            for child in live_children(node.name):
                mine |= below[child.name]
            below[node.name] = mine
        top = live_children(ROOT)
        self.root.resources = frozenset().union(*(below[c.name] for c in top))
        above: dict[str, set[str]] = {ROOT: set()}
        for node in self._order:
            parent = self.structure.parent(node.name)
            assert parent is not None
            above[node.name] = above[parent] | named(node)
            node.resources = frozenset(above[node.name] | below[node.name])
            node.set_limits()
        for parent_node in (self.root, *self._order):
            if parent_node.is_quota:
                continue  # no children, and no slots for them (`TreeNode`)
            children = live_children(parent_node.name)
            parent_node.children_in = {
                r: [c for c in children if r in c.resources] for r in parent_node.resources
            }

    # ------------------------------------------------------------ runtime

    def recompute(self) -> None:
        """Compute demand, used and runtime for every live node from scratch."""
        if self._stale:
            self._rebuild()
            return
        order = self._order
        root = self.root
        self._outside_used = {}
        for quota, used in self._quota_used.items():
            if quota not in self._nodes:
                add_amounts(self._outside_used, used, 1)
        for node in reversed(order):
            if node.is_quota:
                raw = self._quota_raw_request.get(node.name, {})
                used = self._quota_used.get(node.name, {})
                for resource in node.resources:
                    node.raw_request[resource] = raw.get(resource, 0)
                    node.used[resource] = used.get(resource, 0)
            else:
                for resource in node.resources:
                    children = node.children_in[resource]
                    node.raw_request[resource] = sum(c.demand[resource] for c in children)
                    node.used[resource] = sum(c.used[resource] for c in children)
            for resource in node.resources:
                node.demand[resource] = node.clamp(resource)
        parents = [root, *(node for node in order if not node.is_quota)]
        for parent in parents:
            for resource, children in parent.children_in.items():
                parent.sum_min[resource] = sum(c.min[resource] for c in children)
                parent.sum_target[resource] = sum(c.target(resource) for c in children)
        for resource in root.resources:
            root.used[resource] = sum(c.used[resource] for c in root.children_in[resource])
            root.runtime[resource] = root.guarantee[resource] = self.root_total(resource)
        for parent in parents:
            for resource in parent.children_in:
                distribute(parent, resource, None, at_root=parent is root)
        self._dirty = {}
        self._deferred, self._deferred_at, self._deferred_moved = {}, {}, set()
        # Every ElasticQuota, live or not: one that just went inactive must be looked at too.
        self.changed_quotas = {name for name, cfg in self.structure.items() if cfg.is_leaf}
        self._grown = set(self.changed_quotas)
        self._moved = None

    def room_grew_since_settle(self) -> bool:
        """Some pod was released since the last settle() (room grew somewhere)."""
        return bool(self._grown)

    def gained_room_since_settle(self, node: TreeNode) -> bool:
        """A pod released since the last settle() gave `node` or an ancestor room."""
        grown = self._grown
        return bool(grown) and (
            node.name in grown or any(a.name in grown for a in self.path_up(node))
        )

    def settle(self) -> set[str]:
        """Bring runtimes up to date; returns the quotas whose runtime changed since last asked."""
        self._update()
        if self._deferred_moved:
            self._check_moved()
        changed, self.changed_quotas = self.changed_quotas, set()
        self.grown_quotas, self._grown = self._grown, set()
        return changed

    def set_lazy(self, lazy: bool) -> None:
        """Turn deferred subtrees on or off (off: every deferred subtree is brought up to date)."""
        if self.lazy and not lazy and self._deferred_at:
            self._materialize_below(self.root)
        self.lazy = lazy

    def take_moved(self) -> set[str] | None:
        """The nodes whose runtime changed since the last call (None: maybe every node).

        Deferred subtrees are brought up to date first: their runtimes did move (down),
        and whoever asks (the operator's status writer) shows every runtime as it is."""
        self._update()
        if self._deferred_at:
            self._materialize_below(self.root)
        moved, self._moved = self._moved, set()
        return moved

    def _update(self) -> None:
        # Queries (node(), reports) update runtimes too, but leave `changed_quotas` for the
        # next settle(): the engine's decide() must still see those quotas.
        if self._stale:
            self._rebuild()
        if self._dirty:
            for resource, dirty in self._dirty.items():
                if dirty:
                    self._settle_resource(resource, dirty)
            self._dirty = {}

    def _mark(
        self, parent: TreeNode, resource: str, child: TreeNode | None, old_demand: int = 0
    ) -> None:
        """Note that `parent` must redo its children's runtimes (child None: T changed only)."""
        dirty = self._dirty.setdefault(resource, {})
        hints = dirty.get(parent)
        if hints is None:
            if parent in dirty:
                return  # already redoing all
            hints = dirty[parent] = {}
        if child is not None:
            hints.setdefault(child, old_demand)

    def _root_total_changed(self, resources: Iterable[str]) -> None:
        if self._stale:
            return
        root = self.root
        self._grown.add(root.name)  # it may have grown: see grown_quotas
        for resource in resources:
            if resource in root.resources:
                root.runtime[resource] = root.guarantee[resource] = self.root_total(resource)
                self._mark(root, resource, None)

    def _climb(self, node: TreeNode, resource: str) -> None:
        """Carry a quota's raw-request change up the path as far as demand changes."""
        path_up, root = self._path_up, self.root
        while True:
            old = node.demand[resource]
            # node.clamp and node.target, inlined: this runs per resource and level for
            # every pod that comes or goes.
            raw, floor, cap = node.raw_request[resource], node.floor[resource], node.cap[resource]
            new = min(cap, raw if raw > floor else floor)
            if new == old:
                return
            if self._deferred_at and node.is_quota:
                self._materialize_path(node, resource)
            node.demand[resource] = new
            parent = path_up[node.name][0]
            guarantee = node.guarantee.get(resource)
            if guarantee is not None and resource in parent.sum_base:
                parent.sum_base[resource] += min(new, guarantee) - min(old, guarantee)
            if node.weight[resource] > 0:
                parent.sum_target[resource] += new - old
            else:
                low = node.min[resource]
                parent.sum_target[resource] += min(new, low) - min(old, low)
            # When the node wants more than it gets, before and after, below a parent that
            # was saturated at its last distribution and still is with the same total,
            # redistributing would move nobody's share (`distribute`'s first shortcut): the
            # parent is not marked. Should its total move in this settle, it is redone in
            # full anyway. (Inlined: this runs per resource and level of every pod event.)
            runtime = node.runtime.get(resource)
            if runtime is None or old <= runtime or new <= runtime:
                self._mark(parent, resource, node, old)
            elif parent.roomy.get(resource) is not False:
                self._mark(parent, resource, node, old)  # roomy then, or never distributed
            else:
                total = parent.runtime[resource]
                scale_total = total if parent is root else max(total, parent.guarantee[resource])
                if (
                    parent.last_total.get(resource) != total
                    or parent.last_scale_total.get(resource) != scale_total
                    or (
                        parent.sum_min[resource] <= scale_total
                        and parent.sum_target[resource] <= total
                    )
                ):
                    self._mark(parent, resource, node, old)
            if parent is root:
                return
            parent.raw_request[resource] += new - old
            node = parent

    def _settle_resource(self, resource: str, dirty: _Dirty) -> None:
        counter = itertools.count()
        heap = [(parent.depth, next(counter), parent) for parent in dirty]
        heapq.heapify(heap)
        deferred = self._deferred.get(resource)
        busy: set[TreeNode] | None = None  # the dirty parents and their ancestors
        while heap:
            _, _, parent = heapq.heappop(heap)
            if parent not in dirty:
                continue
            hints = dirty.pop(parent)
            for child in distribute(
                parent, resource, hints, at_root=parent is self.root, grown=self._grown
            ):
                if self._moved is not None:
                    self._moved.add(child.name)
                if child.is_quota:
                    self.changed_quotas.add(child.name)
                elif resource in child.children_in and child not in dirty:
                    entry = deferred.get(child) if deferred else None
                    if entry is not None:
                        if self._still_deferred(child, resource, entry):
                            continue
                        self._materialize(child, resource)
                        dirty[child] = None
                    else:
                        if self.lazy and child.runtime[resource] < child.last_total.get(
                            resource, -1
                        ):
                            if busy is None:
                                busy = set(dirty)
                                for node in dirty:
                                    busy.update(self._path_up.get(node.name, ()))
                            if child not in busy and self._defer(child, resource):
                                deferred = self._deferred[resource]
                                continue
                        dirty[child] = {}
                    heapq.heappush(heap, (child.depth, next(counter), child))

    # ------------------------------------------------------------ deferred subtrees

    def _defer(self, cohort: TreeNode, resource: str) -> bool:
        """Leave `cohort`'s subtree as it is, its runtime having fallen, when nothing there
        can matter before it falls further than its slack (`deferral.py`)."""
        reflected = cohort.last_total[resource]
        fall = reflected - cohort.runtime[resource]
        if cohort.last_scale_total[resource] < cohort.sum_min[resource]:
            return False  # its children's guarantees are scaled mins: they may move
        runtime = cohort.runtime[resource]
        cohort.runtime[resource] = reflected  # the margins are those of the subtree as it is
        try:
            slack = self._slack(cohort, resource, fall)
        finally:
            cohort.runtime[resource] = runtime
        if slack < fall:
            return False
        self._deferred.setdefault(resource, {})[cohort] = _Deferred(reflected, runtime, slack)
        self._deferred_at.setdefault(cohort, set()).add(resource)
        self._deferred_moved.add((resource, cohort))
        self.deferrals += 1
        return True

    def _slack(self, cohort: TreeNode, resource: str, need: int) -> int:
        """The least margin over `cohort`'s subtree (stopping once below `need`)."""
        deferred = self._deferred.get(resource, {})
        slack = node_margin(cohort, resource)
        stack = list(cohort.children_in[resource])
        while stack and slack >= need:
            node = stack.pop()
            if node.is_quota:
                slack = min(slack, quota_margin(node, resource))
                continue
            if resource not in node.children_in:
                continue
            if node in deferred:
                self._materialize(node, resource)  # one deferred subtree inside another: no
            slack = min(slack, node_margin(node, resource))
            stack.extend(node.children_in[resource])
        return slack

    def _used_grew_below(self, quota: TreeNode, resource: str) -> None:
        """The quota's used grew under a Cohort deferred in `resource`: its margin to its
        runtime shrank, and so may the subtree's slack (or the quota could go over its
        runtime, unreported, while the Cohort's runtime keeps falling within the old one).
        Bring the subtree up to date when it has already fallen further than that."""
        deferred = self._deferred.get(resource)
        if not deferred:
            return
        for walk in self._path_up[quota.name]:
            entry = deferred.get(walk)
            if entry is not None:  # at most one: deferred subtrees do not nest
                entry.slack = min(entry.slack, quota_margin(quota, resource))
                if entry.reflected - entry.last > entry.slack:
                    self._materialize(walk, resource)
                return

    def _still_deferred(self, cohort: TreeNode, resource: str, entry: _Deferred) -> bool:
        """The deferred `cohort`'s runtime moved: may its subtree stay as it is?"""
        runtime = cohort.runtime[resource]
        if (
            runtime <= entry.last
            and entry.reflected - runtime <= entry.slack
            and cohort.sum_min[resource] <= cohort.guarantee[resource]
        ):
            entry.last = runtime
            self._deferred_moved.add((resource, cohort))
            return True
        return False

    def _materialize(self, cohort: TreeNode, resource: str) -> None:
        """Bring the deferred subtree up to date: first, without reporting, to the runtimes
        of the last settle() (reported, and skipped by the decider, back then), then, with
        the changes reported, to the runtime the Cohort had last; its runtime is left as
        it is now (the caller redistributes when it moved since)."""
        entry = self._deferred[resource].pop(cohort)
        resources = self._deferred_at[cohort]
        resources.discard(resource)
        if not resources:
            del self._deferred_at[cohort]
        self._deferred_moved.discard((resource, cohort))
        now = cohort.runtime[resource]
        if entry.boundary is not None:
            cohort.runtime[resource] = entry.boundary
            self._cascade(cohort, resource, report=False)
        cohort.runtime[resource] = entry.last
        self._cascade(cohort, resource, report=True)
        cohort.runtime[resource] = now

    def _cascade(self, cohort: TreeNode, resource: str, *, report: bool) -> None:
        """Redistribute `cohort`'s subtree top-down from its present runtime."""
        dirty: _Dirty = {cohort: None}
        counter = itertools.count()
        heap = [(cohort.depth, next(counter), cohort)]
        grown = self._grown if report else None
        while heap:
            _, _, parent = heapq.heappop(heap)
            hints = dirty.pop(parent)
            for child in distribute(parent, resource, hints, at_root=False, grown=grown):
                if self._moved is not None:
                    self._moved.add(child.name)
                if child.is_quota:
                    if report:
                        self.changed_quotas.add(child.name)
                elif resource in child.children_in and child not in dirty:
                    dirty[child] = {}
                    heapq.heappush(heap, (child.depth, next(counter), child))

    def _materialize_path(self, node: TreeNode, resource: str | None = None) -> None:
        """Bring the runtimes on `node`'s path (and below it) up to date before they are read."""
        for walk in (node, *self._path_up[node.name]):
            resources = self._deferred_at.get(walk)
            if resources:
                for r in sorted(resources) if resource is None else [resource]:
                    if r in resources:
                        self._materialize(walk, r)

    def _materialize_below(self, node: TreeNode) -> None:
        """Bring every runtime in `node`'s subtree, and on its path, up to date."""
        self._materialize_path(node)
        for cohort in list(self._deferred_at):
            if cohort in self._deferred_at and node in self._path_up[cohort.name]:
                for r in sorted(self._deferred_at[cohort]):
                    self._materialize(cohort, r)

    def _check_moved(self) -> None:
        """At a settle(): a deferred subtree whose Cohort moved is brought up to date when a
        node in it or above it gained room (`grown_quotas`: the decider then looks at the
        quotas whose runtime changed); the others note their runtime as the new boundary."""
        grown = self._grown
        near: set[TreeNode] = set()  # the nodes that gained room and their ancestors
        for name in grown:
            node = self.root if name == ROOT else self._nodes.get(name)
            if node is not None:
                near.add(node)
                near.update(self._path_up.get(node.name, ()))
        moved, self._deferred_moved = self._deferred_moved, set()
        for resource, cohort in sorted(moved, key=lambda m: (m[0], m[1].depth, m[1].name)):
            entry = self._deferred.get(resource, {}).get(cohort)
            if entry is None:
                continue
            if cohort in near or any(a.name in grown for a in self._path_up[cohort.name]):
                self._materialize(cohort, resource)
            else:
                entry.boundary = cohort.runtime[resource]
