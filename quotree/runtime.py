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
        if sign < 0:
            # Room (runtime - used) grew at the quota and every ancestor: see grown_quotas.
            self._grown.add(node.name)
            self._grown.update(walk.name for walk in path)

    def quota_used(self, quota: str) -> Mapping[str, int]:
        return self._quota_used.get(quota, {})

    # ------------------------------------------------------------ queries

    def node(self, name: str) -> TreeNode | None:
        """The live tree node called `name`, or None when it is missing or inactive."""
        self._update()
        return self._nodes.get(name)

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
        for parent in (root, *order):
            for resource, children in parent.children_in.items():
                parent.sum_min[resource] = sum(c.min[resource] for c in children)
                parent.sum_target[resource] = sum(c.target(resource) for c in children)
        for resource in root.resources:
            root.used[resource] = sum(c.used[resource] for c in root.children_in[resource])
            root.runtime[resource] = root.guarantee[resource] = self.root_total(resource)
        for parent in (root, *order):
            for resource in parent.children_in:
                distribute(parent, resource, None, at_root=parent is root)
        self._dirty = {}
        # Every ElasticQuota, live or not: one that just went inactive must be looked at too.
        self.changed_quotas = {name for name, cfg in self.structure.items() if cfg.is_leaf}
        self._grown = set(self.changed_quotas)
        self._moved = None

    def settle(self) -> set[str]:
        """Bring runtimes up to date; returns the quotas whose runtime changed since last asked."""
        self._update()
        changed, self.changed_quotas = self.changed_quotas, set()
        self.grown_quotas, self._grown = self._grown, set()
        return changed

    def take_moved(self) -> set[str] | None:
        """The nodes whose runtime changed since the last call (None: maybe every node)."""
        self._update()
        moved, self._moved = self._moved, set()
        return moved

    def _update(self) -> None:
        # Queries (node(), reports) update runtimes too, but leave `changed_quotas` for the
        # next settle(): the engine's decide() must still see those quotas.
        if self._stale:
            self._rebuild()
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
        while True:
            old = node.demand[resource]
            new = node.clamp(resource)
            if new == old:
                return
            old_target = node.target(resource)
            node.demand[resource] = new
            parent = self.parent(node)
            parent.sum_target[resource] += node.target(resource) - old_target
            self._mark(parent, resource, node, old)
            if parent is self.root:
                return
            parent.raw_request[resource] += new - old
            node = parent

    def _settle_resource(self, resource: str, dirty: _Dirty) -> None:
        counter = itertools.count()
        heap = [(parent.depth, next(counter), parent) for parent in dirty]
        heapq.heapify(heap)
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
                    dirty[child] = {}
                    heapq.heappush(heap, (child.depth, next(counter), child))
