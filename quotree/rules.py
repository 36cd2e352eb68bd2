"""The configuration rules of the semantics, each written once.

Why a module of its own: the same rules are asked two ways. The validating
webhook (and `quotree simulate` while it loads its input) asks "may this
change be made?" (`check_apply`; a deletion: delete_rules.py); the operator asks "what is
wrong with the tree as it stands?" (`tree_problems`, the `Valid` condition
of each member). Both call the one function per rule below, and each rule's
function returns a `Problem`: the object, the rule (the condition's reason),
the resource and the numbers, and the one-line message built from them.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from quotree.models import MemberConfig
from quotree.quantity import add_amounts, format_quantity
from quotree.structure import PendingView, Structure

__all__ = [
    "Problem",
    "Verdict",
    "as_structure",
    "check_apply",
    "check_apply_forest",
    "cycle_problem",
    "min_above_max",
    "min_sum_problem",
    "missing_flavor",
    "name_taken",
    "names_shared",
    "parent_in_other_tree",
    "parent_problem",
    "tree_problems",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """A broken rule: which object, which rule (a condition reason), the numbers, the text."""

    subject: str  # the object, as its condition or denial names it ("Cohort research")
    reason: str  # MinAboveMax, ParentNotFound, ParentNotCohort, CycleDetected, ...
    message: str
    resource: str | None = None
    amounts: tuple[int, ...] = ()
    own: bool = True  # True: the member's own configuration; False: an ancestor's (Active)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to a proposed change: allowed or not, why, and warnings."""

    allowed: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def deny(cls, message: str) -> Verdict:
        return cls(False, message)


def _owner(config: MemberConfig) -> str:
    if config.is_leaf:
        return f"ElasticQuota {config.namespace}/{config.name}"
    return f"Cohort {config.name}"


# ---------------------------------------------------------------- one function per rule


def min_above_max(config: MemberConfig) -> Problem | None:
    """Rule 2: for each resource named in both, min <= max."""
    for resource in sorted(config.min):
        low, high = config.min[resource], config.max.get(resource)
        if high is not None and low > high:
            return Problem(
                config.describe(),
                "MinAboveMax",
                f"{config.describe()}: min {resource} {format_quantity(low, resource)} is "
                f"above max {format_quantity(high, resource)}",
                resource,
                (low, high),
            )
    return None


def parent_problem(config: MemberConfig, configs: Mapping[str, MemberConfig]) -> Problem | None:
    """Rule 3: the parent is a Cohort (ParentNotCohort) that exists (ParentNotFound).

    A missing parent is allowed at `kubectl apply` (a warning) and keeps the
    member inactive until the parent exists.
    """
    if config.parent is None:
        return None
    label = config.describe()
    parent = configs.get(config.parent)
    if parent is None:
        return Problem(
            label,
            "ParentNotFound",
            f"{label}: parent Cohort {config.parent} does not exist yet; "
            "the node stays inactive until it does",
        )
    if parent.is_leaf:
        return Problem(
            label,
            "ParentNotCohort",
            f"{label}: parent {config.parent} is an ElasticQuota; only a Cohort can be a parent",
        )
    return None


def missing_flavor(config: MemberConfig, flavors: Collection[str]) -> Problem | None:
    """Flavors: a flavor a member names must exist; until it does, a warning (like rule 3's
    missing parent), and no pod is charged to it."""
    missing = [name for name in config.flavors if name not in flavors]
    if not missing:
        return None
    names = ", ".join(missing)
    return Problem(
        config.describe(),
        "FlavorNotFound",
        f"{config.describe()}: ResourceFlavor {names} does not exist yet; no pod is "
        "charged to it until it does",
    )


def cycle_problem(config: MemberConfig, loop: list[str]) -> Problem:
    """Rule 4: `loop` is the parent chain from `config` back to itself (child -> parent)."""
    label = config.describe()
    if len(loop) == 1:
        return Problem(label, "CycleDetected", f"{label}: parent {loop[0]} is the object itself")
    text = " -> ".join([*loop, loop[0]])
    return Problem(label, "CycleDetected", f"{label}: parent {loop[1]} would make a cycle ({text})")


def min_sum_problem(
    cohort: MemberConfig,
    children: Iterable[MemberConfig],
    *,
    changed: MemberConfig | None = None,
    proposed: bool = False,
) -> Problem | None:
    """Rule 5: the children's mins add up to at most the Cohort's min, per resource.

    `children` are the Cohort's children as they would be. The problem is the
    changed child's when `changed` is given (it names only the resources that
    child asks a min of), else the Cohort's. `proposed`: the Cohort's own new
    min is what is being checked (the webhook's wording), not the tree as it
    stands (the `Valid` condition's).
    """
    sums: dict[str, int] = {}
    for child in children:
        add_amounts(sums, child.min)
    resources = sorted(r for r in changed.min if changed.min[r] > 0) if changed else sorted(sums)
    for resource in resources:
        total, own = sums.get(resource, 0), cohort.min.get(resource, 0)
        if total <= own:
            continue
        amounts = (total, own)
        q_total, q_own = format_quantity(total, resource), format_quantity(own, resource)
        if changed is not None:
            mine = format_quantity(changed.min[resource], resource)
            text = (
                f"{changed.describe()}: min {resource} {mine} would make the children of "
                f"Cohort {cohort.name} need {q_total} in all, over {cohort.name}'s min of {q_own}"
            )
            return Problem(changed.describe(), "MinSumExceeded", text, resource, amounts)
        if proposed:
            text = (
                f"{cohort.describe()}: min {resource} {q_own} is below the {q_total} "
                "its children's min add up to"
            )
        else:
            text = (
                f"{cohort.describe()}: its children's min {resource} add up to {q_total}, "
                f"over its own min of {q_own}"
            )
        return Problem(cohort.describe(), "MinSumExceeded", text, resource, amounts)
    return None


def name_taken(old: MemberConfig, new: MemberConfig) -> Problem | None:
    """Rule 6: names are unique across Cohorts and ElasticQuotas (and namespaces)."""
    if old.kind == new.kind and old.name == new.name and old.namespace == new.namespace:
        return None
    return Problem(
        new.describe(),
        "DuplicateName",
        f"{new.describe()}: the name {new.name} is already taken by {_owner(old)}; "
        "Cohort and ElasticQuota names share one namespace",
    )


def names_shared(objects: list[MemberConfig]) -> Problem | None:
    """Rule 6 as the tree stands: objects that share a name (the webhook was bypassed).

    None of them is active until one is renamed or deleted; both report it.
    """
    if len(objects) < 2:
        return None
    owners = " and ".join(_owner(o) for o in objects)
    name = objects[0].name
    return Problem(
        f"name {name}",
        "DuplicateName",
        f"{owners} share the name {name}; Cohort and ElasticQuota names share one "
        "namespace, so none of them is active until one is renamed or deleted",
        amounts=(len(objects),),
    )


# ---------------------------------------------------------------- the two ways of asking


def as_structure(configs: Mapping[str, MemberConfig]) -> Structure:
    """The configs as a Structure, without rebuilding the graph when there is one.

    The webhook passes the engine's Structure, or a ChainMap of recently allowed
    objects over it (`quotree_webhooks.decisions.RecentlyAllowed.view`).
    """
    if isinstance(configs, Structure):
        return configs
    if isinstance(configs, ChainMap) and isinstance(configs.maps[-1], Structure):
        pending: dict[str, MemberConfig] = {}
        for layer in reversed(configs.maps[:-1]):
            pending.update(layer)
        return PendingView(configs.maps[-1], pending)
    return Structure(configs)


def check_apply(
    configs: Mapping[str, MemberConfig],
    new: MemberConfig,
    flavors: Collection[str] | None = None,
) -> Verdict:
    """May `new` be created, or replace the object of the same name, in `configs`?

    `configs` is the current tree by name (the object's old version included,
    if it exists); pass a `Structure` to avoid building its graph again.
    `flavors`: the ResourceFlavors that exist (None: not checked).
    Quantities were already parsed and found >= 0 (rule 1) by `parse_member`.
    """
    structure = as_structure(configs)
    old = structure.get(new.name)
    problem = name_taken(old, new) if old is not None else None
    problem = problem or min_above_max(new)
    if problem is None and new.parent is not None:
        loop = structure.loop_if_parent(new.name, new.parent)
        if loop is not None and (len(loop) == 1 or not new.is_leaf):
            problem = cycle_problem(new, loop)
    warnings: list[str] = []
    if problem is None:
        problem = parent_problem(new, structure)
        if problem is not None and problem.reason == "ParentNotFound":
            warnings.append(problem.message)
            problem = None
    if problem is None and new.parent is not None and new.parent in structure:
        parent = structure[new.parent]
        moved = old is None or old.parent != new.parent or dict(old.min) != dict(new.min)
        if moved and not parent.is_leaf:
            siblings = [structure[c] for c in structure.children(parent.name) if c != new.name]
            problem = min_sum_problem(parent, [*siblings, new], changed=new)
    if problem is None and not new.is_leaf and (old is None or dict(old.min) != dict(new.min)):
        children = [structure[c] for c in structure.children(new.name)]
        problem = min_sum_problem(new, children, proposed=True)
    if problem is not None:
        return Verdict.deny(problem.message)
    absent = missing_flavor(new, flavors) if flavors is not None else None
    if absent is not None:
        warnings.append(absent.message)
    return Verdict(True, warnings=warnings)


def parent_in_other_tree(config: MemberConfig, parent_tree: str) -> Problem:
    """Several trees: a member's parent must be in the member's own tree."""
    return Problem(
        config.describe(),
        "ParentInOtherTree",
        f"{config.describe()}: parent {config.parent} is in tree {parent_tree}, not in tree "
        f"{config.tree}; a parent must be in the same tree",
    )


def check_apply_forest(
    forest: Mapping[str, Mapping[str, MemberConfig]],
    new: MemberConfig,
    flavors: Collection[str] | None = None,
) -> Verdict:
    """`check_apply` over several trees (docs/reference/objects.md, "Several trees"): names are
    unique across trees (rule 6), a parent is in the member's own tree, a Cohort does not leave its
    children behind in another tree, and the other rules hold within the member's tree.

    `forest` maps each tree's name to its configs by name; `flavors` as in `check_apply`.
    """
    own = forest.get(new.tree, {})
    for tree, configs in forest.items():
        if tree == new.tree:
            continue
        old = configs.get(new.name)
        if old is not None:
            problem = name_taken(old, new)
            if problem is not None:
                return Verdict.deny(problem.message + " (in tree " + tree + ")")
            children = as_structure(configs).children(new.name)
            if children:
                return Verdict.deny(
                    f"{new.describe()}: cannot move to tree {new.tree} while it has children "
                    f"in tree {tree} ({', '.join(children)})"
                )
        if new.parent is not None and new.parent not in own and new.parent in configs:
            return Verdict.deny(parent_in_other_tree(new, tree).message)
    return check_apply(own, new, flavors=flavors)


def tree_problems(structure: Structure) -> dict[str, Problem]:
    """The members whose own configuration breaks a rule as the tree stands (rules 2 to 5)."""
    problems: dict[str, Problem] = {}
    for name, config in structure.items():
        problem = (
            names_shared(structure.objects(name))
            or min_above_max(config)
            or parent_problem(config, structure)
        )
        if problem is not None:
            problems[name] = problem
    for loop in structure.cycles():
        for i, member in enumerate(loop):
            if problems.get(member) is None or problems[member].reason != "DuplicateName":
                problems[member] = cycle_problem(structure[member], loop[i:] + loop[:i])
    for name, config in structure.items():
        if config.is_leaf or name in problems:
            continue
        children = [structure[c] for c in structure.children(name)]
        if children:
            problem = min_sum_problem(config, children)
            if problem is not None:
                problems[name] = problem
    return problems
