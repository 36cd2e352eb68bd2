"""What would let a pending pod in, per resource it is short of (`kubectl quotree why`).

The engine's admission check (`Engine.admission_check`, the one `fit.check`) says where
the pod is short (its quota or one of its ancestors, in any tree) and by how much; this
module turns that into what would change it, along the short quota's ancestors.
"""

from __future__ import annotations

from quotree.accounts import TreeMember
from quotree.engine import Engine, PodRecord
from quotree.fit import Rule
from quotree.quantity import format_quantity, is_unlimited

__all__ = ["let_in", "never_fits", "q"]


def q(amount: int, resource: str) -> str:
    """`amount` of `resource` as the engine writes it ("unlimited" past any real number)."""
    return "unlimited" if is_unlimited(amount) else format_quantity(amount, resource)


def _chain(engine: Engine, member: TreeMember) -> list[TreeMember]:
    """The member and its ancestors below the cluster root, nearest first."""
    return [member, *engine.tree_of(member.name).ancestors(member)]


def _borrowers(engine: Engine, top: TreeMember, resource: str, skip: str) -> list[str]:
    """ElasticQuotas under `top` that use more `resource` than their min (idle quota lent)."""
    out = []
    tree = engine.tree_of(top.name)
    for member in tree.live_members():
        if member.name == skip or not member.is_quota or resource not in member.resources:
            continue
        if top.name not in {a.name for a in tree.ancestors(member)}:
            continue
        above = member.used[resource] - member.min[resource]
        if above > 0:
            out.append(
                f"{member.name} uses {q(member.used[resource], resource)}, "
                f"{q(above, resource)} above its min {q(member.min[resource], resource)}"
            )
    return sorted(out)


def let_in(engine: Engine, record: PodRecord, reclaim_hint: str) -> list[str]:
    """What would let a pending pod in, per resource the admission check finds it short of."""
    verdict = engine.admission_check(record.key)
    if verdict is None or verdict.fits:
        return []
    quota = verdict.quota
    tree = engine.tree_of(quota)
    member = tree.member(quota)
    if verdict.broken is Rule.MISSING or member is None:
        problem = tree.problems.get(quota)
        why = problem.message if problem else f"ElasticQuota {quota} does not exist"
        return [f"the quota is not part of the live tree: {why}"]
    lines: list[str] = []
    request = record.request_in(quota)
    short_of = set(verdict.amounts) if verdict.broken is not Rule.NON_PREEMPTIBLE else None
    for resource in sorted(member.resources):
        amount = request.get(resource, 0)
        if not amount or (short_of is not None and resource not in short_of):
            continue
        used, runtime = member.used[resource], member.runtime[resource]
        short = used + amount - runtime
        guarantee, own_min = member.guarantee[resource], member.min[resource]
        lines.append(
            f"{resource}: {quota} uses {q(used, resource)} + request "
            f"{q(amount, resource)} against a runtime of {q(runtime, resource)}"
            + (f": short by {q(short, resource)}" if short > 0 else "")
        )
        capped: TreeMember | None = None
        for ancestor in _chain(engine, member):
            config = ancestor.config
            kind = "Cohort" if config is not None and not config.is_leaf else "ElasticQuota"
            at_cap = ancestor.used[resource] + amount > ancestor.cap[resource]
            if at_cap and capped is None:
                capped = ancestor
            lines.append(
                f"    {kind} {ancestor.name}: used {q(ancestor.used[resource], resource)}, "
                f"runtime {q(ancestor.runtime[resource], resource)}, min "
                f"{q(ancestor.min[resource], resource)}, "
                f"cap {q(ancestor.cap[resource], resource)}"
                + ("  (the request goes over the cap)" if at_cap else "")
            )
        if not record.preemptible:
            lines.append(
                f"  - a non-preemptible pod is admitted only within the min: raise "
                f"{quota}'s min {resource} to at least "
                f"{q(used + amount, resource)} (its min is {q(own_min, resource)})"
            )
            continue
        if capped is not None:
            lines.append(
                f"  - {capped.name} may never use more than {q(capped.cap[resource], resource)} "
                f"{resource} (its max, or its min plus its borrowingLimit): only pods under "
                f"{capped.name} finishing, or a higher max or borrowingLimit on "
                f"{capped.name}, let this pod in (preview with `kubectl quotree what-if`)"
            )
            continue
        if verdict.broken is Rule.ANCESTOR and verdict.member is not None:
            above = verdict.member
            lines.append(
                f"  - {quota} has room, {above.name} does not: "
                f"{q(verdict.amounts.get(resource, 0), resource)} {resource} held below "
                f"{above.name} above their runtime comes back by reclaim {reclaim_hint}, "
                f"or as pods under {above.name} finish"
            )
            continue
        lines.append(f"  - {q(short, resource)} freed by {quota}'s own admitted pods finishing")
        if used + amount <= guarantee:
            lines.append(
                f"  - it is within {quota}'s min ({q(own_min, resource)}): the quota "
                f"lent to others comes back by reclaim {reclaim_hint}"
            )
        else:
            lines.append(
                f"  - idle quota: it needs {q(short, resource)} more {resource} that nobody "
                f"else in its cohorts asks for (it is above its min of "
                f"{q(own_min, resource)}), or a min raised by that much "
                f"(preview with `kubectl quotree what-if`)"
            )
        top = _chain(engine, member)[-1]
        borrowers = _borrowers(engine, top, resource, quota)
        if borrowers:
            lines.append(
                "  - lent now: "
                + "; ".join(borrowers)
                + f" (reclaimed only while {quota} is owed its min)"
            )
    return lines


def _bound(member: TreeMember, resource: str) -> tuple[int, str]:
    """The most `member` may ever hold of `resource`, and what sets it, in words."""
    if member.config is None:
        return member.runtime[resource], "the cluster's capacity"
    config = member.config
    kind = "ElasticQuota" if config.is_leaf else "Cohort"
    cap = member.cap[resource]
    limit, high = config.borrowing_limit.get(resource), config.max.get(resource)
    if limit is not None and (high is None or member.min[resource] + limit < high):
        return cap, f"{kind} {member.name}'s min plus borrowingLimit"
    return cap, f"{kind} {member.name}'s max"


def never_fits(engine: Engine, record: PodRecord) -> list[str]:
    """Why a pending pod can never be admitted as the tree stands, one line per bound it is
    over: its request alone above its quota's or an ancestor's cap (a max, or min plus
    borrowingLimit), or above the cluster's capacity; a non-preemptible pod's request above
    its quota's min. Empty when waiting can let it in."""
    quota = record.quota
    if quota is None:
        return []
    tree = engine.tree_of(quota)
    member = tree.member(quota)
    if member is None:
        return []
    request = record.request_in(quota)
    lines = []
    for resource in sorted(member.resources):
        amount = request.get(resource, 0)
        if not amount:
            continue
        if not record.preemptible and amount > member.min[resource]:
            lines.append(
                f"{resource}: the non-preemptible request {q(amount, resource)} is over "
                f"ElasticQuota {quota}'s min {q(member.min[resource], resource)} by "
                f"{q(amount - member.min[resource], resource)}"
            )
            continue
        for holder in (member, *tree.path_up(member)):
            bound, what = _bound(holder, resource)
            if amount > bound:
                lines.append(
                    f"{resource}: the request {q(amount, resource)} is over {what} "
                    f"{q(bound, resource)} by {q(amount - bound, resource)}"
                )
                break
    return lines
