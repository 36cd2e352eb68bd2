"""Which admitted pods to evict: in-quota preemption victims, and the orders reclaim uses.

Why a module of its own: the semantics' "In-quota preemption" and "Reclaim"
are two questions with one shape (free this much from admitted, preemptible pods,
taking the least important first), and the rule for which pods go is a promise users
read in the in-quota / over-quota labels. Pure functions over a quota's pods and its
tree member; reclaim's choice across quotas, and whether it pays, is `reclaim.py`'s; the
engine carries them out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from quotree.accounts import TreeMember
from quotree.pods import Claimant, PodRecord, QuotaPods, least_important_first
from quotree.quantity import format_quantity
from quotree.victims import Candidates

if TYPE_CHECKING:
    from quotree.group_ledger import GroupLedger

__all__ = [
    "EXACT_SEARCH_LIMIT",
    "Eviction",
    "cover",
    "fewest_victims",
    "over_runtime",
    "preemption_victims",
    "reclaim_order",
    "reclaim_reason",
]


@dataclass(frozen=True, slots=True)
class Eviction:
    """One pod the cluster should evict, and why (its event).

    `group` is the pod group ("namespace/name") the pod belongs to, whose every pod is
    evicted in the same round; `job` the name of the Job whose pods form that group (the
    operator suspends the Job instead of evicting its pods one by one). "Requeued": an
    admitted group the Nodes did not place within the scheduling timeout.
    """

    pod: str
    quota: str
    kind: Literal["Preempted", "Reclaimed", "Requeued"]
    reason: str
    group: str | None = None
    job: str | None = None


def over_runtime(member: TreeMember, pods: QuotaPods) -> dict[str, int]:
    """Resources where used (less what is already being evicted) is above runtime."""
    over = {}
    for resource in member.resources:
        excess = member.used[resource] - pods.evicting.get(resource, 0) - member.runtime[resource]
        if excess > 0:
            over[resource] = excess
    return over


def reclaim_reason(name: str, member: TreeMember, pods: QuotaPods, over: Mapping[str, int]) -> str:
    """The Reclaimed event's text: which resources are over, with the numbers."""
    used_now = {r: member.used[r] - pods.evicting.get(r, 0) for r in over}
    detail = ", ".join(
        f"{r} used {format_quantity(used_now[r], r)} > runtime "
        f"{format_quantity(member.runtime[r], r)}"
        for r in sorted(over)
    )
    return f"ElasticQuota {name} is above its runtime ({detail}); lent quota is reclaimed"


def cover(
    need: Mapping[str, int],
    candidates: list[PodRecord],
    quota: str,
    *,
    partial: bool = False,
    importance: Callable[[PodRecord], Any] = PodRecord.order,
    may_give_back: Callable[[PodRecord, list[PodRecord]], bool] | None = None,
) -> list[PodRecord]:
    """Take candidates in order until `need` is freed, then give back the ones not needed
    (what each frees: its charge in `quota`, in that quota's tree's resource names).

    Victims are given back most important first (`importance`), each when what
    remains still frees enough and `may_give_back(victim, chosen)` allows it.
    When even all candidates do not free enough: [] (preemption: evicting would
    admit nobody), or with `partial` every candidate that helps (reclaim: get as
    close as the preemptible pods allow).
    """
    missing = dict(need)
    chosen: list[PodRecord] = []
    for record in candidates:
        if all(amount <= 0 for amount in missing.values()):
            break
        request = record.request_in(quota)
        if not any(request.get(r, 0) > 0 for r, a in missing.items() if a > 0):
            continue
        chosen.append(record)
        for resource in missing:
            missing[resource] -= request.get(resource, 0)
    if any(amount > 0 for amount in missing.values()):
        return chosen if partial else []
    for record in sorted(chosen, key=importance):
        if may_give_back is not None and not may_give_back(record, chosen):
            continue
        request = record.request_in(quota)
        if all(missing[r] + request.get(r, 0) <= 0 for r in missing):
            chosen.remove(record)
            for resource in missing:
                missing[resource] += request.get(resource, 0)
    return chosen


def reclaim_order(record: PodRecord) -> tuple[int, int]:
    """Among pods of one standing, reclaim takes the lowest priority, then the latest admitted
    (the reverse of the in-quota order)."""
    return (record.facts.priority, -record.admitted_seq)


#: In-quota preemption searches every set of victims exactly when there are at most this
#: many candidates (at most 2**12 = 4,096 sets, a few milliseconds); above it, greedily.
EXACT_SEARCH_LIMIT = 12


def _frees(victims: tuple[PodRecord, ...], need: Mapping[str, int], quota: str) -> bool:
    return all(
        sum(v.request_in(quota).get(r, 0) for v in victims) >= amount
        for r, amount in need.items()
        if amount > 0
    )


def fewest_victims(
    need: Mapping[str, int],
    candidates: list[PodRecord],
    quota: str,
    *,
    joined: Container[str] = (),
) -> list[PodRecord]:
    """The fewest candidates that free `need`, then the least important (lowest
    priorities, then pods that joined a group above its min, then newest); [] when even
    all of them do not.

    Exact (every set, smallest first) up to EXACT_SEARCH_LIMIT candidates that help;
    above it, greedy least important first, then every victim not needed is given back.
    """
    helpful = [
        c
        for c in candidates
        if any(c.request_in(quota).get(r, 0) > 0 for r, a in need.items() if a > 0)
    ]

    def least_important(record: PodRecord) -> tuple[int, bool, float, str]:
        priority, newest, name = least_important_first(record)
        return (priority, record.key not in joined, newest, name)

    helpful.sort(key=least_important)
    if not _frees(tuple(helpful), need, quota):
        return []
    if len(helpful) > EXACT_SEARCH_LIMIT:
        return cover(need, helpful, quota)
    for size in range(1, len(helpful) + 1):
        best: tuple[PodRecord, ...] | None = None
        best_key: tuple[tuple[int, bool, float, str], ...] = ()
        for victims in itertools.combinations(helpful, size):
            if not _frees(victims, need, quota):
                continue
            # Compare the most important victim first: the set whose is less important wins.
            key = tuple(sorted(map(least_important, victims), reverse=True))
            if best is None or key < best_key:
                best, best_key = victims, key
        if best is not None:
            return list(best)
    return []  # not reached: all of them free enough


def preemption_victims(
    pods: QuotaPods,
    record: Claimant,
    short: Mapping[str, int],
    *,
    taken: Container[str] = (),
    freed: Mapping[str, int] | None = None,
    book: GroupLedger | None = None,
) -> list[PodRecord]:
    """Lower-priority preemptible pods of the quota whose eviction makes `record` fit (a
    pod group's core pods all or none, `book`: the groups, `victims.Candidates`).

    Pods already being evicted count as freed (`freed`: what they free, when not
    `pods.evicting`); `taken`: pods already chosen (by key), never chosen again; [] when
    no choice makes it fit.
    """
    priority = record.facts.priority
    gone = pods.evicting if freed is None else freed
    need = {r: short[r] - gone.get(r, 0) for r in short}
    if all(amount <= 0 for amount in need.values()):
        return []
    may_go = {
        r.key
        for r in pods.admitted.values()
        if r.preemptible and not r.evicting and r.facts.priority < priority and r.key not in taken
    }
    # Pod groups whole (their core pods as one candidate); their joined pods first.
    whole = Candidates(book)
    candidates = whole.whole(pods.admitted.values(), may_go)
    return whole.expand(fewest_victims(need, candidates, pods.name, joined=whole.joined))
