"""Rule 7 of the semantics: what may be deleted (a Cohort with children, an ElasticQuota
with admitted pods), asked by the validating webhook as `check_delete`.

Why a module of its own: a deletion's rule reads other things than the rules of a change
(which children are already leaving, the Cohort's in-use finalizer, the admitted pods),
and it answers a third way: a Cohort that still has children is refused, or, when the
operator's in-use finalizer holds it, accepted with a warning (it stays until they are gone).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from quotree.models import MemberConfig
from quotree.rules import Problem, Verdict, as_structure

__all__ = ["check_delete", "cohort_has_children", "cohort_stays", "quota_has_pods"]


def _shown(names: list[str]) -> str:
    """At most ten names, then how many more."""
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return ", ".join(names[:10]) + more


def cohort_has_children(cohort: MemberConfig, children: list[str]) -> Problem | None:
    """Rule 7 (Cohorts): a Cohort with children cannot be deleted (unless it carries the
    in-use finalizer: `check_delete`)."""
    if not children:
        return None
    shown = _shown(children)
    return Problem(
        cohort.describe(),
        "HasChildren",
        f"{cohort.describe()}: cannot delete a Cohort that has children ({shown}); "
        "move or delete them first",
        amounts=(len(children),),
    )


def cohort_stays(cohort: MemberConfig, children: list[str]) -> str:
    """Rule 7's warning for a Cohort deleted while it has children and the in-use finalizer."""
    return f"{cohort.describe()} stays until its children ({_shown(children)}) are deleted or moved"


def quota_has_pods(quota: MemberConfig, admitted_pods: int) -> Problem | None:
    """Rule 7 (ElasticQuotas): not while it holds admitted, non-terminal pods."""
    if admitted_pods <= 0:
        return None
    return Problem(
        quota.describe(),
        "HasAdmittedPods",
        f"{quota.describe()}: cannot delete an ElasticQuota with {admitted_pods} admitted pods "
        "still running; delete them first",
        amounts=(admitted_pods,),
    )


def check_delete(
    configs: Mapping[str, MemberConfig],
    old: MemberConfig,
    *,
    admitted_pods: int = 0,
    namespace_deleting: bool = False,
    leaving: Collection[str] = (),
    in_use_finalizer: bool = False,
) -> Verdict:
    """Rule 7: may `old` be deleted? Children in `leaving` (being deleted, or gone from
    the API though the tree has not heard yet) are no longer children: a Cohort and its
    children deleted together, as `kubectl delete -f` or a GitOps prune does, all go.

    A Cohort that still has children is refused, unless it carries the in-use finalizer
    (`in_use_finalizer`, models.IN_USE_FINALIZER): then the deletion is accepted with a
    warning, and the Cohort stays a parent like any other until its children are gone."""
    if not old.is_leaf:
        children = [c for c in as_structure(configs).children(old.name) if c not in leaving]
        if children and in_use_finalizer:
            return Verdict(True, warnings=[cohort_stays(old, children)])
        problem = cohort_has_children(old, children)
    else:
        problem = None if namespace_deleting else quota_has_pods(old, admitted_pods)
    return Verdict(True) if problem is None else Verdict.deny(problem.message)
