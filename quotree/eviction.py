"""Which admitted pods to evict: in-quota preemption victims and reclaim victims.

Why a module of its own: the semantics' "In-quota preemption" and "Reclaim"
are two questions with one shape (free this much from a quota's admitted,
preemptible pods, taking the least important first), and the rule for which
pods go is a promise users read in the in-quota / over-quota labels. Pure
functions over a quota's pods and its tree node; the engine carries them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from quotree.accounts import TreeNode
from quotree.pods import PodRecord, QuotaPods, least_important_first
from quotree.quantity import format_quantity

__all__ = [
    "Eviction",
    "cover",
    "over_runtime",
    "preemption_victims",
    "reclaim_reason",
    "reclaim_victims",
]


@dataclass(frozen=True, slots=True)
class Eviction:
    """One pod the cluster should evict, and why (its event)."""

    pod: str
    quota: str
    kind: Literal["Preempted", "Reclaimed"]
    reason: str


def over_runtime(node: TreeNode, pods: QuotaPods) -> dict[str, int]:
    """Resources where used (less what is already being evicted) is above runtime."""
    over = {}
    for resource in node.resources:
        excess = node.used[resource] - pods.evicting.get(resource, 0) - node.runtime[resource]
        if excess > 0:
            over[resource] = excess
    return over


def reclaim_reason(name: str, node: TreeNode, pods: QuotaPods, over: Mapping[str, int]) -> str:
    """The Reclaimed event's text: which resources are over, with the numbers."""
    used_now = {r: node.used[r] - pods.evicting.get(r, 0) for r in over}
    detail = ", ".join(
        f"{r} used {format_quantity(used_now[r], r)} > runtime "
        f"{format_quantity(node.runtime[r], r)}"
        for r in sorted(over)
    )
    return f"ElasticQuota {name} is above its runtime ({detail}); lent quota is reclaimed"


def cover(
    need: Mapping[str, int], candidates: list[PodRecord], *, partial: bool = False
) -> list[PodRecord]:
    """Take candidates in order until `need` is freed, then give back the ones not needed.

    When even all candidates do not free enough: [] (preemption: evicting would admit
    nobody), or with `partial` every candidate that helps (reclaim: get as close as
    the preemptible pods allow).
    """
    missing = dict(need)
    chosen: list[PodRecord] = []
    for record in candidates:
        if all(amount <= 0 for amount in missing.values()):
            break
        if not any(record.request.get(r, 0) > 0 for r, a in missing.items() if a > 0):
            continue
        chosen.append(record)
        for resource in missing:
            missing[resource] -= record.request.get(resource, 0)
    if any(amount > 0 for amount in missing.values()):
        return chosen if partial else []
    # Keep the most important victims if what remains still frees enough.
    for record in sorted(chosen, key=lambda r: r.order()):
        if all(missing[r] + record.request.get(r, 0) <= 0 for r in missing):
            chosen.remove(record)
            for resource in missing:
                missing[resource] += record.request.get(resource, 0)
    return chosen


def reclaim_victims(pods: QuotaPods, over: Mapping[str, int]) -> list[PodRecord]:
    """Admitted preemptible pods to evict so that the quota gets back within its runtime."""
    candidates = [
        r
        for r in pods.admitted.values()
        if r.preemptible and not r.evicting and any(r.request.get(res, 0) > 0 for res in over)
    ]
    candidates.sort(key=least_important_first)
    return cover(over, candidates, partial=True)


def preemption_victims(
    pods: QuotaPods, record: PodRecord, short: Mapping[str, int]
) -> list[PodRecord]:
    """Lower-priority preemptible pods of the quota whose eviction makes `record` fit.

    Pods already being evicted count as freed; [] when no choice makes it fit.
    """
    priority = record.facts.priority
    need = {r: short[r] - pods.evicting.get(r, 0) for r in short}
    if all(amount <= 0 for amount in need.values()):
        return []
    candidates = [
        r
        for r in pods.admitted.values()
        if r.preemptible and not r.evicting and r.facts.priority < priority
    ]
    candidates.sort(key=least_important_first)
    return cover(need, candidates)
