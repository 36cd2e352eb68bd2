"""The quota tree: structure, configuration problems, and runtime, kept current incrementally.

The structure is a networkx DiGraph (edges parent -> child, the cluster root
on top). Accounting lives in `TreeNode` objects built from it: per resource,
each node's demand, runtime and guarantee, and per parent the sums that let
one changed child be handled without looking at its siblings.

One pod arriving or leaving changes one leaf's raw request; its demand
change climbs the path to the root (stopping where a cap absorbs it), and
runtimes are redone top-down only at the parents on that path. A parent
whose children's targets all fit (the common case) updates just the child
that changed; a saturated parent redistributes among all its children, and
only the children whose runtime changed are visited further down.
`recompute()` does everything from scratch; the property tests check that
both give the same runtimes.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import networkx as nx

from quotree.models import NodeConfig
from quotree.quantity import UNLIMITED, add_amounts, format_quantity
from quotree.sharing import proportional, water_fill

__all__ = ["ROOT", "Problem", "QuotaTree", "TreeNode"]

#: Name of the cluster root in the graph; the slash keeps it apart from object names.
ROOT = "quotree.io/cluster"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a node is not part of the live tree (its Valid or Active condition)."""

    reason: str
    message: str
    own: bool  # True: the node's own configuration breaks a rule; False: an ancestor's


class TreeNode:
    """One live node of the tree and its per-resource accounting."""

    __slots__ = (
        "cap",
        "children",
        "config",
        "demand",
        "depth",
        "dist_scale",
        "dist_total",
        "fast",
        "floor",
        "guarantee",
        "kids",
        "min",
        "name",
        "parent",
        "part",
        "raw",
        "runtime",
        "sum_min",
        "sum_target",
        "used",
        "weight",
    )

    def __init__(self, name: str, config: NodeConfig | None, parent: TreeNode | None) -> None:
        self.name = name
        self.config = config
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.children: list[TreeNode] = []
        self.part: frozenset[str] = frozenset()
        self.kids: dict[str, list[TreeNode]] = {}  # children taking part in each resource
        self.min: dict[str, int] = {}
        self.cap: dict[str, int] = {}
        self.floor: dict[str, int] = {}
        self.weight: dict[str, int] = {}
        self.raw: dict[str, int] = {}
        self.demand: dict[str, int] = {}
        self.runtime: dict[str, int] = {}
        self.guarantee: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self.sum_min: dict[str, int] = {}
        self.sum_target: dict[str, int] = {}
        self.fast: dict[str, bool] = {}
        # What the last distribution among the children started from (total, scale total).
        self.dist_total: dict[str, int] = {}
        self.dist_scale: dict[str, int] = {}

    @property
    def is_leaf(self) -> bool:
        return self.config is not None and self.config.is_leaf

    def target(self, resource: str) -> int:
        """What this child gets when its parent has room for everyone."""
        demand = self.demand[resource]
        if self.weight[resource] > 0:
            return demand
        return min(demand, self.min[resource])

    def clamp(self, resource: str) -> int:
        """demand = min(cap, max(raw request, floor))."""
        return min(self.cap[resource], max(self.raw[resource], self.floor[resource]))

    def __repr__(self) -> str:
        return f"TreeNode({self.name!r})"


# parent -> {child whose demand changed: its demand at the last distribution} (None: redo all)
_Dirty = dict[TreeNode, dict[TreeNode, int] | None]


class QuotaTree:
    """Cohorts and ElasticQuotas under the cluster root, with runtime per resource."""

    def __init__(self) -> None:
        self.graph: nx.DiGraph = nx.DiGraph()
        self._configs: dict[str, NodeConfig] = {}
        self._nodes: dict[str, TreeNode] = {}
        self.root = TreeNode(ROOT, None, None)
        self._order: list[TreeNode] = []  # live nodes, parents before children
        self._problems: dict[str, Problem] = {}
        self.resources: frozenset[str] = frozenset()
        self._stale = True
        self._capacity: dict[str, int] = {}
        self._unmanaged: dict[str, int] = {}
        self._outside_used: dict[str, int] = {}
        # Pod totals per leaf over every resource, kept whatever the structure.
        self._leaf_raw: dict[str, dict[str, int]] = {}
        self._leaf_used: dict[str, dict[str, int]] = {}
        self._dirty: dict[str, _Dirty] = {}
        self.changed_leaves: set[str] = set()

    # ------------------------------------------------------------ configuration

    def set_config(self, config: NodeConfig) -> None:
        """Add or replace a Cohort or ElasticQuota (by name)."""
        self._configs[config.name] = config
        self._stale = True

    def remove_config(self, name: str) -> None:
        self._configs.pop(name, None)
        self._stale = True

    def config(self, name: str) -> NodeConfig | None:
        return self._configs.get(name)

    def configs(self) -> Mapping[str, NodeConfig]:
        return self._configs

    def set_capacity(self, capacity: Mapping[str, int]) -> None:
        """The allocatable of Ready, schedulable cluster nodes, summed."""
        if dict(capacity) != self._capacity:
            self._capacity = dict(capacity)
            self._root_total_changed(set(capacity) | set(self._capacity))

    def add_unmanaged(self, request: Mapping[str, int], sign: int = 1) -> None:
        """Requests of pods outside the tree that hold cluster capacity."""
        add_amounts(self._unmanaged, request, sign)
        self._root_total_changed(request)

    @property
    def capacity(self) -> Mapping[str, int]:
        return self._capacity

    # ------------------------------------------------------------ pod accounting

    def add_request(self, leaf: str, request: Mapping[str, int], sign: int = 1) -> None:
        """A pod of `leaf` arrived (sign 1) or left (sign -1): its raw request changes."""
        add_amounts(self._leaf_raw.setdefault(leaf, {}), request, sign)
        node = self._nodes.get(leaf)
        if node is None or self._stale:
            return
        for resource in node.part:
            amount = request.get(resource, 0)
            if amount:
                node.raw[resource] += sign * amount
                self._climb(node, resource)

    def add_used(self, leaf: str, request: Mapping[str, int], sign: int = 1) -> None:
        """A pod of `leaf` was admitted (sign 1) or released (sign -1)."""
        add_amounts(self._leaf_used.setdefault(leaf, {}), request, sign)
        node = self._nodes.get(leaf)
        if self._stale:
            return
        if node is None:
            # Pods of a leaf outside the live tree still hold capacity.
            add_amounts(self._outside_used, request, sign)
            self._root_total_changed(request)
            return
        for resource in node.part:
            amount = request.get(resource, 0)
            if amount:
                walk: TreeNode | None = node
                while walk is not None and walk is not self.root:
                    walk.used[resource] += sign * amount
                    walk = walk.parent

    def leaf_used(self, leaf: str) -> Mapping[str, int]:
        return self._leaf_used.get(leaf, {})

    # ------------------------------------------------------------ queries

    def node(self, name: str) -> TreeNode | None:
        """The live node called `name`, or None when it is missing or inactive."""
        self._update()
        return self._nodes.get(name)

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

    # ------------------------------------------------------------ structure

    def _check_structure(self) -> dict[str, Problem]:
        """Configuration problems visible in the tree as a whole (rules 2 to 5)."""
        configs = self._configs
        problems: dict[str, Problem] = {}
        for name, cfg in configs.items():
            for resource, low in cfg.min.items():
                high = cfg.max.get(resource)
                if high is not None and low > high:
                    problems[name] = Problem(
                        "MinAboveMax",
                        f"{cfg.describe()}: min {resource} {format_quantity(low, resource)} is "
                        f"above max {format_quantity(high, resource)}",
                        own=True,
                    )
                    break
            if cfg.parent is None or name in problems:
                continue
            parent = configs.get(cfg.parent)
            if parent is None:
                problems[name] = Problem(
                    "ParentNotFound",
                    f"{cfg.describe()}: parent Cohort {cfg.parent} does not exist; "
                    "the node stays inactive until it does",
                    own=True,
                )
            elif parent.is_leaf:
                problems[name] = Problem(
                    "ParentNotCohort",
                    f"{cfg.describe()}: parent {cfg.parent} is an ElasticQuota; "
                    "only a Cohort can be a parent",
                    own=True,
                )
        # Cycles: every node has at most one parent, so follow the chains.
        state: dict[str, int] = {}  # 1: on the current chain, 2: done
        for start in configs:
            chain: list[str] = []
            walk: str | None = start
            while walk is not None and walk in configs and state.get(walk) is None:
                state[walk] = 1
                chain.append(walk)
                walk = configs[walk].parent
            if walk is not None and state.get(walk) == 1:
                cycle = chain[chain.index(walk) :]
                text = " -> ".join([*cycle, cycle[0]])
                for member in cycle:
                    problems[member] = Problem(
                        "CycleDetected",
                        f"{configs[member].describe()}: the parent chain is a cycle ({text})",
                        own=True,
                    )
            for member in chain:
                state[member] = 2
        # Min sum under each Cohort (rule 5).
        child_mins: dict[str, dict[str, int]] = {}
        for cfg in configs.values():
            if cfg.parent is not None and cfg.parent in configs:
                add_amounts(child_mins.setdefault(cfg.parent, {}), cfg.min, 1)
        for parent_name, sums in child_mins.items():
            parent_cfg = configs[parent_name]
            if parent_cfg.is_leaf or parent_name in problems:
                continue
            for resource in sorted(sums):
                total = sums[resource]
                own = parent_cfg.min.get(resource, 0)
                if total > own:
                    problems[parent_name] = Problem(
                        "MinSumExceeded",
                        f"Cohort {parent_name}: its children's min {resource} add up to "
                        f"{format_quantity(total, resource)}, over its own min of "
                        f"{format_quantity(own, resource)}",
                        own=True,
                    )
                    break
        return problems

    def _rebuild(self) -> None:
        configs = self._configs
        graph = nx.DiGraph()
        graph.add_node(ROOT)
        for name, cfg in configs.items():
            graph.add_node(name, kind=cfg.kind)
            parent = cfg.parent if cfg.parent is not None else ROOT
            if parent == ROOT or parent in configs:
                graph.add_edge(parent, name)
        self.graph = graph
        problems = self._check_structure()
        # Live nodes: reachable from the root through valid nodes only.
        self.root = root = TreeNode(ROOT, None, None)
        nodes: dict[str, TreeNode] = {}
        order: list[TreeNode] = []
        frontier = [root]
        while frontier:
            nxt: list[TreeNode] = []
            for above in frontier:
                for child_name in sorted(graph.successors(above.name)):
                    if child_name in problems:
                        continue
                    child = TreeNode(child_name, configs[child_name], above)
                    above.children.append(child)
                    nodes[child_name] = child
                    order.append(child)
                    if not child.is_leaf:
                        nxt.append(child)
            frontier = nxt
        for name, cfg in configs.items():
            if name in nodes or name in problems:
                continue
            ancestor = cfg.parent
            while ancestor is not None and ancestor not in problems and ancestor in configs:
                ancestor = configs[ancestor].parent
            cause = problems.get(ancestor) if ancestor is not None else None
            problems[name] = Problem(
                "InactiveAncestor",
                f"{cfg.describe()}: inactive because "
                + (cause.message if cause else f"its ancestor {ancestor} is inactive"),
                own=False,
            )
        self._problems = problems
        self._nodes = nodes
        self._order = order
        self._assign_participation()
        self._stale = False
        self.recompute()

    def _assign_participation(self) -> None:
        order = self._order
        down: dict[str, set[str]] = {}
        for node in reversed(order):
            assert node.config is not None
            mine = set(node.config.min) | set(node.config.max)
            for child in node.children:
                mine |= down[child.name]
            down[node.name] = mine
        everything: set[str] = set()
        for child in self.root.children:
            everything |= down[child.name]
        self.root.part = frozenset(everything)
        self.resources = self.root.part
        up: dict[str, set[str]] = {ROOT: set()}
        for node in order:
            assert node.config is not None
            assert node.parent is not None
            mine = set(node.config.min) | set(node.config.max)
            up[node.name] = up[node.parent.name] | mine
            node.part = frozenset(up[node.name] | down[node.name])
            cfg = node.config
            for resource in node.part:
                low = cfg.min.get(resource, 0)
                high = cfg.max.get(resource, UNLIMITED)
                borrow = cfg.borrowing_limit.get(resource)
                node.min[resource] = low
                node.cap[resource] = min(high, UNLIMITED if borrow is None else low + borrow)
                lend = cfg.lending_limit.get(resource)
                node.floor[resource] = 0 if lend is None else max(low - lend, 0)
                weight = cfg.shared_weight.get(resource)
                if weight is None:
                    weight = high if resource in cfg.max else (low if low > 0 else 1)
                node.weight[resource] = weight
        for parent in (self.root, *order):
            parent.kids = {
                resource: [c for c in parent.children if resource in c.part]
                for resource in parent.part
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
        for leaf, used in self._leaf_used.items():
            if leaf not in self._nodes:
                add_amounts(self._outside_used, used, 1)
        for node in reversed(order):
            raw_source = self._leaf_raw.get(node.name, {}) if node.is_leaf else None
            used_source = self._leaf_used.get(node.name, {}) if node.is_leaf else None
            for resource in node.part:
                if raw_source is not None and used_source is not None:
                    node.raw[resource] = raw_source.get(resource, 0)
                    node.used[resource] = used_source.get(resource, 0)
                else:
                    kids = node.kids[resource]
                    node.raw[resource] = sum(k.demand[resource] for k in kids)
                    node.used[resource] = sum(k.used[resource] for k in kids)
                node.demand[resource] = node.clamp(resource)
        for parent in (root, *order):
            for resource, kids in parent.kids.items():
                parent.sum_min[resource] = sum(k.min[resource] for k in kids)
                parent.sum_target[resource] = sum(k.target(resource) for k in kids)
        for resource in root.part:
            root.runtime[resource] = root.guarantee[resource] = self.root_total(resource)
        for parent in (root, *order):
            for resource in parent.kids:
                self._distribute(parent, resource, None)
        self._dirty = {}
        # Every ElasticQuota, live or not: one that just went inactive must be looked at too.
        self.changed_leaves = {name for name, cfg in self._configs.items() if cfg.is_leaf}

    def settle(self) -> set[str]:
        """Bring runtimes up to date; returns the leaves whose runtime changed since last asked."""
        self._update()
        changed, self.changed_leaves = self.changed_leaves, set()
        return changed

    def _update(self) -> None:
        # Queries (node(), reports) update runtimes too, but leave `changed_leaves` for the
        # next settle(): the engine's decide() must still see those leaves.
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
        for resource in resources:
            if resource in self.root.part:
                self.root.runtime[resource] = self.root.guarantee[resource] = self.root_total(
                    resource
                )
                self._mark(self.root, resource, None)

    def _climb(self, node: TreeNode, resource: str) -> None:
        """Carry a leaf's raw-request change up the path as far as demand changes."""
        while True:
            old = node.demand[resource]
            new = node.clamp(resource)
            if new == old:
                return
            old_target = node.target(resource)
            node.demand[resource] = new
            parent = node.parent
            assert parent is not None
            parent.sum_target[resource] += node.target(resource) - old_target
            self._mark(parent, resource, node, old)
            if parent is self.root:
                return
            parent.raw[resource] += new - old
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
            for child in self._distribute(parent, resource, hints):
                if child.is_leaf:
                    self.changed_leaves.add(child.name)
                elif resource in child.kids and child not in dirty:
                    dirty[child] = {}
                    heapq.heappush(heap, (child.depth, next(counter), child))

    def _distribute(
        self, parent: TreeNode, resource: str, hints: dict[TreeNode, int] | None
    ) -> list[TreeNode]:
        """Share the parent's runtime among its children; returns the children that changed.

        `hints` are the children whose demand changed (None: redo all). When
        every child's target fits, before and after, only those are redone.
        """
        kids = parent.kids[resource]
        total = parent.runtime[resource]
        sum_min = parent.sum_min[resource]
        scale_total = total if parent is self.root else max(total, parent.guarantee[resource])
        fast = sum_min <= scale_total and parent.sum_target[resource] <= total
        was_fast = parent.fast.get(resource, False)
        same_start = (
            parent.dist_total.get(resource) == total
            and parent.dist_scale.get(resource) == scale_total
        )
        parent.fast[resource] = fast
        parent.dist_total[resource] = total
        parent.dist_scale[resource] = scale_total
        changed: list[TreeNode] = []
        # A saturated parent, same total: when every changed child was short of its demand
        # and still is (new demand above its old runtime), every water-filling round
        # compares the same way and nobody's share moves.
        if (
            not fast
            and not was_fast
            and same_start
            and hints is not None
            and all(
                old > child.runtime[resource] and child.demand[resource] > child.runtime[resource]
                for child, old in hints.items()
            )
        ):
            return changed
        if fast and was_fast and hints is not None:
            for child in hints:
                runtime = child.target(resource)
                if child.runtime[resource] != runtime:
                    child.runtime[resource] = runtime
                    changed.append(child)
            return changed
        if fast:
            for child in kids:
                runtime = child.target(resource)
                low = child.min[resource]
                if child.runtime.get(resource) != runtime or child.guarantee.get(resource) != low:
                    child.runtime[resource] = runtime
                    child.guarantee[resource] = low
                    changed.append(child)
            return changed
        names = [child.name for child in kids]
        mins = [child.min[resource] for child in kids]
        # Scale guarantees only when the mins exceed what the parent is
        # guaranteed or holds (the cluster shrank), not when it is merely idle.
        guarantees = proportional(scale_total, mins, names) if sum_min > scale_total else mins
        bases = [min(child.demand[resource], g) for child, g in zip(kids, guarantees, strict=True)]
        leftover = total - sum(bases)
        if leftover > 0:
            needs = [child.demand[resource] - b for child, b in zip(kids, bases, strict=True)]
            weights = [child.weight[resource] for child in kids]
            extra = water_fill(leftover, needs, weights, names)
        else:
            extra = [0] * len(kids)
        for child, g, b, e in zip(kids, guarantees, bases, extra, strict=True):
            runtime = b + e
            if child.runtime.get(resource) != runtime or child.guarantee.get(resource) != g:
                child.runtime[resource] = runtime
                child.guarantee[resource] = g
                changed.append(child)
        return changed
