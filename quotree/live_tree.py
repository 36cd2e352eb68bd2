"""The live tree read off the structure, and its accounting computed from scratch.

Why a module of its own: `QuotaTree` (`runtime.py`) keeps the runtimes current
one pod event at a time; this is the other path, taken when a Cohort or
ElasticQuota changes and the one the property tests hold the incremental path
to ("incremental equals full recomputation"). `build` says which members are
live, why the others are not, and which resources each member takes part in;
`recompute` gives every live member its demand, used and runtime from the pods'
totals per quota.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from quotree.accounts import TreeMember
from quotree.distribution import distribute
from quotree.rules import Problem, tree_problems
from quotree.structure import ROOT, Structure

__all__ = ["LiveTree", "build", "build_ahead", "recompute"]


@dataclass(frozen=True, slots=True)
class LiveTree:
    """The live members of a structure, with fresh (zero) accounts."""

    root: TreeMember
    members: dict[str, TreeMember]  # by name
    order: list[TreeMember]  # parents before children
    # Each live member's ancestors, nearest first, ending with the root.
    path_up: dict[str, list[TreeMember]]
    # The members outside the live tree, by name, and why.
    problems: dict[str, Problem]
    # `quotas_below`'s answers so far (the live members do not change).
    below: dict[str, list[TreeMember]] = field(default_factory=dict)

    def quotas_below(self, member: TreeMember, structure: Structure) -> list[TreeMember]:
        """The live ElasticQuotas in `member`'s subtree (every one, for the root), by name."""
        found = self.below.get(member.name)
        if found is None:
            if member is self.root:
                found = sorted((n for n in self.order if n.is_quota), key=lambda n: n.name)
            else:
                below = nx.descendants(structure.graph, member.name)
                members = self.members
                found = [members[n] for n in sorted(below) if n in members and members[n].is_quota]
            self.below[member.name] = found
        return found


def build_ahead(structure: Structure) -> None:
    """Read `structure`'s live tree now, for its next `build` to take unless the structure
    changed since: a bulk load (the operator's start-up) reads it while its pods arrive,
    the accounts left to the first refresh. It reads the structure and sets one attribute
    (the start-up runs it in a thread)."""
    changes = structure.changes
    structure.built_ahead = (changes, _read(structure))


def build(structure: Structure) -> LiveTree:
    """The live tree of `structure`: its members in order, their paths, who takes part in what."""
    ahead, structure.built_ahead = structure.built_ahead, None
    if ahead is not None and ahead[0] == structure.changes:
        live: LiveTree = ahead[1]
        return live
    return _read(structure)


def _read(structure: Structure) -> LiveTree:
    own = tree_problems(structure)
    problems = dict(own)
    root = TreeMember(ROOT, None, 0)
    members: dict[str, TreeMember] = {}
    order: list[TreeMember] = []
    path_up: dict[str, list[TreeMember]] = {ROOT: []}
    for name, parent, depth in structure.live_order(problems):
        member = members[name] = TreeMember(name, structure[name], depth)
        order.append(member)
        above = root if parent == ROOT else members[parent]
        path_up[name] = [above, *path_up[parent]]
    for name, config in structure.items():
        if name in members or name in problems:
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
    _assign_participation(structure, root, members, order)
    return LiveTree(root, members, order, path_up, problems)


def _assign_participation(
    structure: Structure, root: TreeMember, members: dict[str, TreeMember], order: list[TreeMember]
) -> None:
    """Who takes part in which resource: named by the member, an ancestor or a descendant."""
    graph = structure.graph

    def live_children(name: str) -> list[TreeMember]:
        return [members[c] for c in sorted(graph.successors(name)) if c in members]

    def named(member: TreeMember) -> set[str]:
        assert member.config is not None
        return set(member.config.min) | set(member.config.max)

    below: dict[str, set[str]] = {}
    for member in reversed(order):
        mine = named(member)
        for child in live_children(member.name):
            mine |= below[child.name]
        below[member.name] = mine
    top = live_children(ROOT)
    root.resources = frozenset().union(*(below[c.name] for c in top))
    above: dict[str, set[str]] = {ROOT: set()}
    for member in order:
        parent = structure.parent(member.name)
        assert parent is not None
        above[member.name] = above[parent] | named(member)
        member.resources = frozenset(above[member.name] | below[member.name])
        member.set_limits()
    for parent_member in (root, *order):
        if parent_member.is_quota:
            continue  # no children, and no slots for them (`TreeMember`)
        children = live_children(parent_member.name)
        parent_member.children_in = {
            r: [c for c in children if r in c.resources] for r in parent_member.resources
        }


def recompute(
    root: TreeMember,
    order: list[TreeMember],
    *,
    pod_request: Mapping[str, Mapping[str, int]],
    held: Mapping[str, Mapping[str, int]],
    quota_used: Mapping[str, Mapping[str, int]],
    root_total: Callable[[str], int],
) -> None:
    """Compute demand, used and runtime for every live member from the quotas' totals (a
    quota's raw request: its `pod_request` plus its `held` demand)."""
    for member in reversed(order):
        if member.is_quota:
            pods = pod_request.get(member.name, {})
            kept = held.get(member.name, {})
            used = quota_used.get(member.name, {})
            for resource in member.resources:
                member.raw_request[resource] = pods.get(resource, 0) + kept.get(resource, 0)
                member.used[resource] = used.get(resource, 0)
        else:
            for resource in member.resources:
                children = member.children_in[resource]
                member.raw_request[resource] = sum(c.demand[resource] for c in children)
                member.used[resource] = sum(c.used[resource] for c in children)
        for resource in member.resources:
            member.demand[resource] = member.clamp(resource)
    parents = [root, *(member for member in order if not member.is_quota)]
    for parent in parents:
        parent.margin_sums.clear()  # the children's demands were set afresh
        for resource, children in parent.children_in.items():
            parent.sum_min[resource] = sum(c.min[resource] for c in children)
            parent.sum_target[resource] = sum(c.target(resource) for c in children)
    for resource in root.resources:
        root.used[resource] = sum(c.used[resource] for c in root.children_in[resource])
        root.runtime[resource] = root.guarantee[resource] = root_total(resource)
    for parent in parents:
        for resource in parent.children_in:
            distribute(parent, resource, None, at_root=parent is root)
