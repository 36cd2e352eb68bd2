"""The numbers a Cohort's or ElasticQuota's status shows, in base units (`MemberReport`).

Why a module of its own: the operator's status writer and `quotree simulate`
print the same report; it reads the tree and the pods and decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from quotree.pods import QuotaPods
from quotree.rules import Problem
from quotree.runtime import QuotaTree

__all__ = ["MemberReport", "member_report"]


@dataclass(frozen=True, slots=True)
class MemberReport:
    """status of a Cohort or ElasticQuota, in base units (`request` shows demand)."""

    request: dict[str, int]
    runtime: dict[str, int]
    used: dict[str, int]
    admitted_pods: int
    pending_pods: int
    problem: Problem | None
    #: Pod groups of an ElasticQuota waiting whole (complete or not) and admitted (0 for
    #: a Cohort).
    pending_groups: int = 0
    admitted_groups: int = 0


def member_report(
    tree: QuotaTree,
    pods_of: Mapping[str, QuotaPods],
    name: str,
    *,
    unresolved: int = 0,
    groups: tuple[int, int] = (0, 0),
) -> MemberReport:
    """status for tree member `name`: demand, runtime, used, pod counts, its problem, as of
    the tree's last `QuotaTree.refresh` (the reader refreshes first).

    `unresolved`: gated pods of its namespaces that no quota will take, and its pods
    held before the intake (pods of an incomplete pod group, or waiting for their Job);
    they count as pending here, so that they are seen. `groups`: its pending and
    admitted pod groups.
    """
    member = tree.member(name)
    pods = pods_of.get(name)
    admitted = len(pods.admitted) if pods else 0
    # Pods charged here that wait in another tree's quota queue count here too.
    pending = (len(pods.pending) + len(pods.also_pending) if pods else 0) + unresolved
    if member is not None:
        resources = sorted(member.resources)
        return MemberReport(
            request={r: member.demand[r] for r in resources},
            runtime={r: member.runtime[r] for r in resources},
            used={r: member.used[r] for r in resources},
            admitted_pods=admitted,
            pending_pods=pending,
            problem=None,
            pending_groups=groups[0],
            admitted_groups=groups[1],
        )
    config = tree.config(name)
    named = sorted(set(config.min) | set(config.max)) if config else []
    used = tree.quota_used(name)
    return MemberReport(
        request={},
        runtime=dict.fromkeys(named, 0),
        used={r: used.get(r, 0) for r in named},
        admitted_pods=admitted,
        pending_pods=pending,
        problem=tree.problems.get(name),
        pending_groups=groups[0],
        admitted_groups=groups[1],
    )
