"""The live tree read off the structure, and its accounting computed from scratch.

Why a module of its own: `QuotaTree` (`runtime.py`) keeps the runtimes current
one pod event at a time; this is the other path, taken when a Cohort or
ElasticQuota changes and the one the property tests hold the incremental path
to ("incremental equals full recomputation"). `build` says which nodes are
live, why the others are not, and which resources each node takes part in;
`recompute` gives every live node its demand, used and runtime from the pods'
totals per quota.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from quotree.accounts import TreeNode
from quotree.distribution import distribute
from quotree.rules import Problem, tree_problems
from quotree.structure import ROOT, Structure

__all__ = ["LiveTree", "build", "recompute"]


@dataclass(frozen=True, slots=True)
class LiveTree:
    """The live nodes of a structure, with fresh (zero) accounts."""

    root: TreeNode
    nodes: dict[str, TreeNode]  # by name
    order: list[TreeNode]  # parents before children
    # Each live node's ancestors, nearest first, ending with the root.
    path_up: dict[str, list[TreeNode]]
    # The nodes outside the live tree, by name, and why.
    problems: dict[str, Problem]


def build(structure: Structure) -> LiveTree:
    """The live tree of `structure`: its nodes in order, their paths, who takes part in what."""
    own = tree_problems(structure)
    problems = dict(own)
    root = TreeNode(ROOT, None, 0)
    nodes: dict[str, TreeNode] = {}
    order: list[TreeNode] = []
    path_up: dict[str, list[TreeNode]] = {ROOT: []}
    for name, parent, depth in structure.live_order(problems):
        node = nodes[name] = TreeNode(name, structure[name], depth)
        order.append(node)
        above = root if parent == ROOT else nodes[parent]
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
    _assign_participation(structure, root, nodes, order)
    return LiveTree(root, nodes, order, path_up, problems)


def _assign_participation(
    structure: Structure, root: TreeNode, nodes: dict[str, TreeNode], order: list[TreeNode]
) -> None:
    """Who takes part in which resource: named by the node, an ancestor or a descendant."""
    graph = structure.graph

    def live_children(name: str) -> list[TreeNode]:
        return [nodes[c] for c in sorted(graph.successors(name)) if c in nodes]

    def named(node: TreeNode) -> set[str]:
        assert node.config is not None
        return set(node.config.min) | set(node.config.max)

    below: dict[str, set[str]] = {}
    for node in reversed(order):
        mine = named(node)
        for child in live_children(node.name):
            mine |= below[child.name]
        below[node.name] = mine
    top = live_children(ROOT)
    root.resources = frozenset().union(*(below[c.name] for c in top))
    above: dict[str, set[str]] = {ROOT: set()}
    for node in order:
        parent = structure.parent(node.name)
        assert parent is not None
        above[node.name] = above[parent] | named(node)
        node.resources = frozenset(above[node.name] | below[node.name])
        node.set_limits()
    for parent_node in (root, *order):
        if parent_node.is_quota:
            continue  # no children, and no slots for them (`TreeNode`)
        children = live_children(parent_node.name)
        parent_node.children_in = {
            r: [c for c in children if r in c.resources] for r in parent_node.resources
        }


def recompute(
    root: TreeNode,
    order: list[TreeNode],
    *,
    pod_request: Mapping[str, Mapping[str, int]],
    held: Mapping[str, Mapping[str, int]],
    quota_used: Mapping[str, Mapping[str, int]],
    root_total: Callable[[str], int],
) -> None:
    """Compute demand, used and runtime for every live node from the quotas' totals (a
    quota's raw request: its `pod_request` plus its `held` demand)."""
    for node in reversed(order):
        if node.is_quota:
            pods = pod_request.get(node.name, {})
            kept = held.get(node.name, {})
            used = quota_used.get(node.name, {})
            for resource in node.resources:
                node.raw_request[resource] = pods.get(resource, 0) + kept.get(resource, 0)
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
        root.runtime[resource] = root.guarantee[resource] = root_total(resource)
    for parent in parents:
        for resource in parent.children_in:
            distribute(parent, resource, None, at_root=parent is root)
