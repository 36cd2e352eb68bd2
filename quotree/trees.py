"""The trees: one `QuotaTree` per tree name, and which tree each Cohort or ElasticQuota is in.

Why a module of its own: with several trees (docs/reference/objects.md, "Several trees") every
question of the form "in which tree is this member", "what does each tree hold of a pod it does not
charge", "every tree's configurations or problems" has one answer here, so that the
decision loop and the engine ask instead of branching on whether there is more than one
tree. With one tree (the usual case) every call is a dictionary look-up or a loop of one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from quotree.accounts import TreeMember
from quotree.models import DEFAULT_TREE, MAINTENANCE_ANNOTATION, MemberConfig
from quotree.pods import PodRecord
from quotree.rules import Problem
from quotree.runtime import OUTSIDE, QuotaTree

__all__ = ["Forest", "maintenance_reason"]


class Forest:
    """Every tree by name; the default one is `default`."""

    def __init__(self) -> None:
        self.default = QuotaTree()
        #: Every tree by name (the default one first).
        self.trees: dict[str, QuotaTree] = {DEFAULT_TREE: self.default}
        self._home: dict[str, QuotaTree] = {}  # member name -> its tree, when not the default
        #: More than one tree is in play (the checks across trees are taken).
        self.several = False

    def __iter__(self) -> Iterator[QuotaTree]:
        return iter(self.trees.values())

    def tree_of(self, name: str) -> QuotaTree:
        """The tree Cohort or ElasticQuota `name` belongs to (the default tree if unknown)."""
        return self._home.get(name, self.default)

    def label(self, member: TreeMember) -> str | None:
        """The member's tree for reasons: its name, None for the default tree."""
        config = member.config
        return config.tree if config is not None and config.tree != DEFAULT_TREE else None

    def grow(
        self,
        name: str,
        capacity: Mapping[str, int],
        unmanaged: Mapping[str, int],
        admitted: Iterable[Mapping[str, int]],
    ) -> QuotaTree:
        """The tree called `name`, made when it is new: it shares out the cluster's
        `capacity`, less what `unmanaged` pods hold, and holds what is already `admitted`
        (charged to quotas of other trees) outside its quotas."""
        existing = self.trees.get(name)
        if existing is not None:
            return existing
        new = QuotaTree()
        new.set_capacity(capacity)
        new.add_unmanaged(unmanaged)
        for request in admitted:
            new.add_used(OUTSIDE, request)
        self.trees[name] = new
        self.several = True
        return new

    def settle(self, tree: QuotaTree, name: str) -> None:
        """Node `name` lives in `tree` now."""
        if tree is self.default:
            self._home.pop(name, None)
        else:
            self._home[name] = tree

    def forget(self, name: str) -> None:
        """Node `name` is in no tree any more."""
        self._home.pop(name, None)

    def charge_outside(self, record: PodRecord, sign: int) -> None:
        """An admitted pod holds capacity in the trees that do not charge it, too."""
        if len(record.also) + 1 == len(self.trees):
            return  # every tree charges it
        charged = {self.tree_of(q) for q in (record.quota, *record.also) if q}
        for tree in self.trees.values():
            if tree not in charged:
                tree.add_used(OUTSIDE, record.request, sign)

    def set_capacity(self, capacity: Mapping[str, int]) -> None:
        """Every tree shares out the whole cluster."""
        for tree in self.trees.values():
            tree.set_capacity(capacity)

    def add_unmanaged(self, request: Mapping[str, int], sign: int) -> None:
        """A bound pod no tree charges came (sign 1) or went (-1): every tree has less."""
        for tree in self.trees.values():
            tree.add_unmanaged(request, sign)

    def configs(self) -> dict[str, MemberConfig]:
        """Every Cohort and ElasticQuota, by name, over all trees."""
        if not self.several:
            return dict(self.default.configs())
        out: dict[str, MemberConfig] = {}
        for tree in self.trees.values():
            out.update(tree.configs())
        return out

    def tree_configs(self) -> dict[str, Mapping[str, MemberConfig]]:
        """Each tree's Cohorts and ElasticQuotas by name (the `Structure`), by tree name."""
        return {name: tree.configs() for name, tree in self.trees.items()}

    def problems(self) -> dict[str, Problem]:
        """Nodes outside the live trees, by name, and why (every tree)."""
        out: dict[str, Problem] = {}
        for tree in self.trees.values():
            out.update(tree.problems)
        return out


def maintenance_reason(cluster: str | None, tree: QuotaTree, member: TreeMember) -> str | None:
    """Why quota `member` is in maintenance mode (MCAD's), None when it is not: `cluster`, the
    operator's setting for the whole cluster, else the annotation on the top-level member
    above it in `tree`."""
    if cluster is not None:
        return cluster
    path = tree.path_up(member)
    top = path[-2] if len(path) >= 2 else member  # path ends with the cluster root
    if top.config is not None and top.config.maintenance:
        return f"annotation {MAINTENANCE_ANNOTATION} on {top.config.describe()}"
    return None
