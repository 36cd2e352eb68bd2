"""The configuration rules of semantics.md, as one pure check of a proposed change.

The validating webhook calls `check_apply` / `check_delete` against the
operator's current view of the tree; `quotree simulate` calls them while it
loads its input. Each denial is one line that names the object, the rule,
the resource and the numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from quotree.models import NodeConfig
from quotree.quantity import add_amounts, format_quantity

__all__ = ["Verdict", "check_apply", "check_delete"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to a proposed change: allowed or not, why, and warnings."""

    allowed: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def deny(cls, message: str) -> Verdict:
        return cls(False, message)


def _q(amount: int, resource: str) -> str:
    return format_quantity(amount, resource)


def _owner(config: NodeConfig) -> str:
    if config.is_leaf:
        return f"ElasticQuota {config.namespace}/{config.name}"
    return f"Cohort {config.name}"


def _same_object(a: NodeConfig, b: NodeConfig) -> bool:
    return a.kind == b.kind and a.name == b.name and a.namespace == b.namespace


def check_apply(configs: Mapping[str, NodeConfig], new: NodeConfig) -> Verdict:
    """May `new` be created, or replace the object of the same name, in `configs`?

    `configs` is the current tree by name (the object's old version included,
    if it exists). Quantities were already parsed and found >= 0 (rule 1) by
    `parse_node`.
    """
    label = new.describe()
    old = configs.get(new.name)
    # Rule 6: names are unique across Cohorts and ElasticQuotas.
    if old is not None and not _same_object(old, new):
        return Verdict.deny(
            f"{label}: the name {new.name} is already taken by {_owner(old)}; "
            "Cohort and ElasticQuota names share one namespace"
        )
    # Rule 2: min <= max for every resource named in both.
    for resource in sorted(new.min):
        high = new.max.get(resource)
        if high is not None and new.min[resource] > high:
            return Verdict.deny(
                f"{label}: min {resource} {_q(new.min[resource], resource)} is above "
                f"max {_q(high, resource)}"
            )
    warnings: list[str] = []
    parent = configs.get(new.parent) if new.parent else None
    if new.parent is not None:
        # Rule 3: the parent is a Cohort; a missing one is allowed with a warning.
        if new.parent == new.name:
            return Verdict.deny(f"{label}: parent {new.parent} is the object itself")
        if parent is None:
            warnings.append(
                f"{label}: parent Cohort {new.parent} does not exist yet; "
                "the node stays inactive until it does"
            )
        elif parent.is_leaf:
            return Verdict.deny(
                f"{label}: parent {new.parent} is an ElasticQuota; only a Cohort can be a parent"
            )
    # Rule 4: no cycle in the Cohorts' parent chain.
    if not new.is_leaf and parent is not None:
        chain = [new.name]
        walk: NodeConfig | None = parent
        while walk is not None and walk.name not in chain:
            chain.append(walk.name)
            walk = configs.get(walk.parent) if walk.parent else None
        if walk is not None and walk.name == new.name:
            loop = " -> ".join([*chain, new.name])
            return Verdict.deny(f"{label}: parent {new.parent} would make a cycle ({loop})")
    # Rule 5 (child side): checked when created, or when min or parent change.
    moved = old is None or old.parent != new.parent or dict(old.min) != dict(new.min)
    if moved and parent is not None and not parent.is_leaf:
        sums: dict[str, int] = dict(new.min)
        for other in configs.values():
            if other.parent == parent.name and other.name != new.name:
                add_amounts(sums, other.min)
        for resource in sorted(new.min):
            total = sums[resource]
            own = parent.min.get(resource, 0)
            if new.min[resource] > 0 and total > own:
                return Verdict.deny(
                    f"{label}: min {resource} {_q(new.min[resource], resource)} would make the "
                    f"children of Cohort {parent.name} need {_q(total, resource)} in all, "
                    f"over {parent.name}'s min of {_q(own, resource)}"
                )
    # Rule 5 (parent side): a Cohort's min must still cover its children.
    if not new.is_leaf and (old is None or dict(old.min) != dict(new.min)):
        sums = {}
        for other in configs.values():
            if other.parent == new.name:
                add_amounts(sums, other.min)
        for resource in sorted(sums):
            own = new.min.get(resource, 0)
            if sums[resource] > own:
                return Verdict.deny(
                    f"{label}: min {resource} {_q(own, resource)} is below the "
                    f"{_q(sums[resource], resource)} its children's min add up to"
                )
    return Verdict(True, warnings=warnings)


def check_delete(
    configs: Mapping[str, NodeConfig],
    old: NodeConfig,
    *,
    admitted_pods: int = 0,
    namespace_deleting: bool = False,
) -> Verdict:
    """Rule 7: may `old` be deleted?"""
    label = old.describe()
    if not old.is_leaf:
        children = sorted(c.name for c in configs.values() if c.parent == old.name)
        if children:
            shown = ", ".join(children[:10]) + (
                f" and {len(children) - 10} more" if len(children) > 10 else ""
            )
            return Verdict.deny(
                f"{label}: cannot delete a Cohort that has children ({shown}); "
                "move or delete them first"
            )
        return Verdict(True)
    if admitted_pods > 0 and not namespace_deleting:
        return Verdict.deny(
            f"{label}: cannot delete an ElasticQuota with {admitted_pods} admitted pods "
            "still running; delete them first"
        )
    return Verdict(True)
