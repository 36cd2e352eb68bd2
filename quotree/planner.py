"""The eviction planner: which admitted pods to evict, and asking for their eviction.

Why a module of its own: two decisions of semantics.md evict pods, in-quota preemption
(for a waiting pod, the fewest lower-priority pods of the quota where it is short, in any
tree) and reclaim (for a quota that has held more than its runtime for the reclaim
delay). This part keeps the reclaim clock, picks the victims (`eviction.py`'s rules),
words the events and asks for the evictions (the pods' resources count as on their way
back until the cluster, or the simulator, takes them away); the decision loop calls it.
"""

from __future__ import annotations

from typing import Literal

from quotree.accounts import TreeNode
from quotree.decisions import Decisions
from quotree.eviction import (
    Eviction,
    over_runtime,
    preemption_victims,
    reclaim_reason,
    reclaim_victims,
)
from quotree.fit import Fit
from quotree.ledger import Ledger
from quotree.pods import PodRecord, QuotaPods

__all__ = ["EvictionPlanner"]


class EvictionPlanner:
    """The evictions of one engine (see module docstring)."""

    def __init__(self, ledger: Ledger, reclaim_delay: float) -> None:
        self.ledger = ledger
        self.reclaim_delay = reclaim_delay
        self.over_since: dict[str, float] = {}  # quota -> since when used > runtime

    def preempt(
        self, record: PodRecord, verdict: Fit, lowest: dict[str, int], out: Decisions
    ) -> bool:
        """In-quota preemption for a pending pod short at quota `verdict.quota` (in any tree
        that charges it): evict the fewest lower-priority preemptible pods of that quota
        that make room (semantics.md). `lowest` keeps, per quota, the lowest priority of its
        possible victims for this scan. True when it evicted."""
        quota = verdict.quota
        node = verdict.node
        if node is None or node.config is None or not node.config.preempt_within_quota:
            return False
        pods = self.ledger.quota_pods[quota]
        least = lowest.get(quota)
        if least is None:
            least = lowest[quota] = min(
                (
                    r.facts.priority
                    for r in pods.admitted.values()
                    if r.preemptible and not r.evicting
                ),
                default=record.facts.priority,
            )
        if least >= record.facts.priority:
            return False
        victims = preemption_victims(pods, record, verdict.amounts)
        if not victims:
            return False
        del lowest[quota]  # victims are gone: look again for the next pod
        reason = (
            f"preempted by {record.key} (priority {record.facts.priority}) "
            f"within ElasticQuota {quota}"
        )
        for victim in victims:
            self.evict(victim, "Preempted", reason, out)
        record.victims = frozenset(v.key for v in victims)
        return True

    def reclaim(
        self, name: str, node: TreeNode, pods: QuotaPods, now: float, out: Decisions
    ) -> bool:
        """Reclaim (semantics.md): once quota `name` has held more than its runtime for the
        reclaim delay, evict its least important preemptible pods (over-quota first) until
        it is back within it, as far as they allow. True when it evicted."""
        over = over_runtime(node, pods)
        if not over:
            self.over_since.pop(name, None)
            return False
        since = self.over_since.setdefault(name, now)
        if now - since < self.reclaim_delay:
            return False
        victims = reclaim_victims(node, pods, over)
        if not victims:
            return False
        reason = reclaim_reason(name, node, pods, over)
        for victim in victims:
            self.evict(victim, "Reclaimed", reason, out)
        self.over_since.pop(name, None)
        return True

    def evict(
        self,
        record: PodRecord,
        kind: Literal["Preempted", "Reclaimed"],
        reason: str,
        out: Decisions,
    ) -> None:
        """Ask for the pod's eviction."""
        assert record.quota is not None
        out.evictions.append(Eviction(record.key, record.quota, kind, reason))
        out.quotas.add(record.quota)
        out.quotas.update(record.also)
        # Its resources count as on their way back until the pod is gone.
        self.ledger.set_evicting(record, True)
