"""Decisions: admission, in-quota preemption, reclaim and labels, one quota at a time.

Why a module of its own: `Engine` (engine.py) keeps its records current from
what the cluster shows; `Decider` holds those records and takes the
decisions of the semantics on them ("Admission", "In-quota preemption",
"Reclaim", "In-quota and over-quota pods"), asking `admission` and `eviction`
for the rules and the words. `decide(now)` returns what the cluster should be
made to look like; time comes in as an argument.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from quotree import admission
from quotree.accounts import TreeNode
from quotree.eviction import (
    Eviction,
    over_runtime,
    preemption_victims,
    reclaim_reason,
    reclaim_victims,
)
from quotree.pods import PodRecord, PodState, QuotaPods
from quotree.runtime import QuotaTree

__all__ = ["Decider", "Decisions"]


@dataclass(slots=True)
class Decisions:
    """What the cluster should be made to look like after one `decide()`."""

    admitted: list[tuple[str, str]] = field(default_factory=list)  # (pod, message)
    evictions: list[Eviction] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # pod -> in-quota / over-quota
    pending: dict[str, str] = field(default_factory=dict)  # pod -> why it waits (when it changed)

    def __bool__(self) -> bool:
        return bool(self.admitted or self.evictions or self.labels or self.pending)


class Decider:
    """The engine's records and the decisions taken on them; `Engine` feeds the records."""

    def __init__(self, reclaim_delay: float) -> None:
        self.tree = QuotaTree()
        self.reclaim_delay = reclaim_delay
        self.pods: dict[str, PodRecord] = {}
        self._quota_pods: dict[str, QuotaPods] = {}
        self._touched: set[str] = set()  # quotas whose pods or configuration changed
        self._over_since: dict[str, float] = {}  # quota -> since when used > runtime
        self._admissions = itertools.count(1)

    # ------------------------------------------------------------ records

    def _set_evicting(self, record: PodRecord, evicting: bool) -> None:
        assert record.quota is not None
        self._quota_pods[record.quota].set_evicting(record, evicting)

    def _admit(self, record: PodRecord, message: str) -> None:
        assert record.quota is not None
        record.state = PodState.ADMITTED
        record.admitted_seq = next(self._admissions)
        record.reason = message
        record.victims = frozenset()
        self._quota_pods[record.quota].add_admitted(record)
        self.tree.add_used(record.quota, record.request)

    # ------------------------------------------------------------ decisions

    def decide(self, now: float = 0.0) -> Decisions:
        """Admit what fits, preempt within quotas, reclaim lent quota."""
        out = Decisions()
        self._decide_round(now, out)
        return out

    def _decide_round(self, now: float, out: Decisions) -> bool:
        """One pass over the quotas that may have changed; True when it evicted."""
        changed = self.tree.settle()
        touched, self._touched = self._touched, set()
        evicted = False
        for name in sorted(changed | touched | set(self._over_since)):
            evicted |= self._decide_quota(name, now, out, relabel=name in touched)
        return evicted

    def _decide_quota(self, name: str, now: float, out: Decisions, *, relabel: bool) -> bool:
        pods = self._quota_pods.get(name)
        node = self.tree.node(name)
        if pods is None:
            self._over_since.pop(name, None)
            return False
        if node is None or not node.is_quota:
            self._over_since.pop(name, None)
            pods.room = None  # when it comes back, look at its pods again
            problem = self.tree.problems.get(name)
            why = problem.message if problem else f"ElasticQuota {name} does not exist"
            for _, key in pods.pending:
                self._set_reason(self.pods[key], f"waiting: {why}", out)
            return False
        evicted = self._reclaim(name, node, pods, now, out)
        admitted_before = len(pods.admitted)
        evicted |= self._admit_pending(name, node, pods, out)
        if relabel or evicted or admitted_before != len(pods.admitted):
            for key, label in admission.capacity_labels(node, pods).items():
                record = pods.admitted[key]
                if record.capacity != label:
                    record.capacity = label
                    out.labels[key] = label
        return evicted

    def _set_reason(self, record: PodRecord, reason: str, out: Decisions) -> None:
        record.reason_key = None
        if record.reason != reason:
            record.reason = reason
            out.pending[record.key] = reason

    def _set_why(
        self,
        name: str,
        node: TreeNode,
        record: PodRecord,
        short: Mapping[str, int],
        out: Decisions,
        *,
        non_preemptible: bool = False,
    ) -> None:
        """Why the pod does not fit; the message is built only when its numbers change."""
        key = admission.reason_key(node, short, non_preemptible=non_preemptible)
        if record.reason_key == key:
            return
        pods = self._quota_pods[name]
        reason = admission.why_not(name, node, pods, record, short, non_preemptible=non_preemptible)
        record.reason_key = key
        if record.reason != reason:
            record.reason = reason
            out.pending[record.key] = reason

    def _reclaim(
        self, name: str, node: TreeNode, pods: QuotaPods, now: float, out: Decisions
    ) -> bool:
        over = over_runtime(node, pods)
        if not over:
            self._over_since.pop(name, None)
            return False
        since = self._over_since.setdefault(name, now)
        if now - since < self.reclaim_delay:
            return False
        victims = reclaim_victims(pods, over)
        if not victims:
            return False
        reason = reclaim_reason(name, node, pods, over)
        for victim in victims:
            self._evict(victim, "Reclaimed", reason, out)
        self._over_since.pop(name, None)
        return True

    def _evict(
        self,
        record: PodRecord,
        kind: Literal["Preempted", "Reclaimed"],
        reason: str,
        out: Decisions,
    ) -> None:
        """Ask for the pod's eviction."""
        assert record.quota is not None
        out.evictions.append(Eviction(record.key, record.quota, kind, reason))
        self._eviction_asked(record, kind, reason)

    def _eviction_asked(self, record: PodRecord, kind: str, reason: str) -> None:
        """The pod's resources count as on their way back until the pod is gone."""
        self._set_evicting(record, True)

    def _admit_pending(
        self, name: str, node: TreeNode, pods: QuotaPods, out: Decisions, *, force: bool = False
    ) -> bool:
        if not pods.pending:
            return False
        room = admission.room(node, pods)
        before = pods.room
        if (
            not force
            and before is not None
            and before.keys() == room.keys()
            and all(room[r][0] <= before[r][0] and room[r][1] <= before[r][1] for r in room)
        ):
            return False
        evicted = self._scan_pending(name, node, pods, out)
        pods.room = admission.room(node, pods)
        return evicted

    def refresh_reasons(self) -> Decisions:
        """Bring every pending pod's reason up to date with the current numbers."""
        out = Decisions()
        for name, pods in self._quota_pods.items():
            node = self.tree.node(name)
            if node is not None and node.is_quota:
                self._admit_pending(name, node, pods, out, force=True)
        return out

    def _scan_pending(self, name: str, node: TreeNode, pods: QuotaPods, out: Decisions) -> bool:
        evicted = False
        may_preempt = node.config is not None and node.config.preempt_within_quota
        lowest: int | None = None  # lowest priority among the possible victims, when needed
        for _, key in list(pods.pending):
            record = self.pods.get(key)
            if record is None or record.state is not PodState.PENDING:
                continue
            np_short = admission.non_preemptible_shortfall(node, pods, record)
            if np_short:
                self._set_why(name, node, record, np_short, out, non_preemptible=True)
                continue
            short = admission.shortfall(node, record)
            if not short:
                self._admit(record, f"fits in ElasticQuota {name}")
                out.admitted.append((key, admission.fit_message(name, node, record)))
                continue
            if record.victims and any(
                v in self.pods and self.pods[v].evicting for v in record.victims
            ):
                self._set_reason(record, admission.waiting_for_victims(record), out)
                continue
            if may_preempt and lowest is None:
                lowest = min(
                    (
                        r.facts.priority
                        for r in pods.admitted.values()
                        if r.preemptible and not r.evicting
                    ),
                    default=record.facts.priority,
                )
            if may_preempt and lowest is not None and lowest < record.facts.priority:
                victims = preemption_victims(pods, record, short)
                if victims:
                    lowest = None  # victims are gone: look again for the next pod
                    reason = (
                        f"preempted by {key} (priority {record.facts.priority}) "
                        f"within ElasticQuota {name}"
                    )
                    for victim in victims:
                        self._evict(victim, "Preempted", reason, out)
                    evicted = True
                    record.victims = frozenset(v.key for v in victims)
                    # Victims still count as used until they are gone, unless the eviction
                    # took effect at once (the simulator): then the pod may fit now.
                    if not admission.shortfall(node, record):
                        self._admit(record, f"fits in ElasticQuota {name} after preemption")
                        out.admitted.append((key, admission.fit_message(name, node, record)))
                    else:
                        self._set_reason(record, admission.waiting_for_victims(record), out)
                    continue
            self._set_why(name, node, record, short, out)
        return evicted
