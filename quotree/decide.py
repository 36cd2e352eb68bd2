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
        self._unresolved: dict[str, PodRecord] = {}  # gated pods no quota will take
        self._unannounced: dict[str, str] = {}  # their reasons, until the next decide()
        self._waiting_on_ancestor: set[str] = set()  # quotas with pods that wait for lent quota
        self._lenders: dict[str, list[admission.Lender]] = {}  # per ancestor, this round
        self._now = 0.0
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
        self._now, self._lenders = now, {}
        out.pending.update(self._unannounced)
        self._unannounced = {}
        evicted = False
        if self.skip_shrunk_quotas:
            # A quota that only lost room can neither admit nor need reclaim unless it is
            # now over its runtime: skip it without building its room (`_only_shrank`).
            grown = self.tree.grown_quotas
            changed = {
                name
                for name in changed
                if name in grown or name in touched or not self._only_shrank(name)
            }
        for name in sorted(changed | touched | set(self._over_since) | self._waiting_on_ancestor):
            evicted |= self._decide_quota(name, now, out, relabel=name in touched)
        return evicted

    #: Skip the quotas `_only_shrank` names (off: look at every changed quota; the property
    #: tests compare both).
    skip_shrunk_quotas = True

    def _only_shrank(self, name: str) -> bool:
        """True when `decide` has nothing to do for quota `name`, whose runtime changed but
        whose room grew nowhere (neither its runtime or guarantee nor any ancestor's room:
        `QuotaTree.grown_quotas`): its pending pods were looked at with at least this much
        room (`QuotaPods.room` is set), it waits for no ancestor, it was not over its
        runtime and is not now. `_decide_quota` would then change nothing."""
        if name in self._over_since or name in self._waiting_on_ancestor:
            return False
        pods = self._quota_pods.get(name)
        if pods is None:
            return True
        if pods.pending and pods.room is None:
            return False
        node = self.tree.node(name)
        if node is None or not node.is_quota:
            return False
        grown = self.tree.grown_quotas
        if any(ancestor.name in grown for ancestor in self.tree.path_up(node)):
            return False  # an ancestor's room may have grown: a waiting pod may fit now
        used, runtime = node.used, node.runtime
        return all(used[r] <= runtime[r] for r in node.resources)

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
            for record, label in admission.capacity_labels(node, pods):
                if record.capacity != label:
                    record.capacity = label
                    out.labels[record.key] = label
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

    def _waits_for_ancestor(
        self, name: str, path: list[TreeNode], node: TreeNode, record: PodRecord, out: Decisions
    ) -> bool:
        """The pod fits its quota; does an ancestor (or the cluster) still hold lent quota?

        Then it waits, with a reason that names the ancestor, the quotas that hold
        more than their runtime below it and when they are reclaimed.
        """
        blocked = admission.ancestor_shortfall(path, node, record)
        if blocked is None:
            return False
        self._waiting_on_ancestor.add(name)
        ancestor, short = blocked
        lenders = self._lent(ancestor, short)
        key = (
            "ancestor",
            ancestor.name,
            tuple((r, short[r], ancestor.used[r], ancestor.runtime[r]) for r in short),
            tuple((x.quota, x.resource, x.amount, x.seconds is None) for x in lenders),
        )
        if record.reason_key != key:
            reason = admission.why_waits(ancestor, record, short, lenders)
            record.reason_key = key
            if record.reason != reason:
                record.reason = reason
                out.pending[record.key] = reason
        return True

    def _lent(self, ancestor: TreeNode, short: Mapping[str, int]) -> list[admission.Lender]:
        """What the quotas below `ancestor` hold above their runtime in `short`'s resources."""
        lenders = self._lenders.get(ancestor.name)
        if lenders is None:
            lenders = []
            for quota in self.tree.quotas_below(ancestor):
                pods = self._quota_pods.get(quota.name)
                evicting = pods.evicting if pods else {}
                for resource in quota.resources:
                    excess = quota.used[resource] - quota.runtime[resource]
                    if excess <= 0:
                        continue
                    if excess > evicting.get(resource, 0):
                        since = self._over_since.get(quota.name, self._now)
                        seconds: float | None = since + self.reclaim_delay - self._now
                    else:
                        seconds = None
                    lenders.append(admission.Lender(quota.name, resource, excess, seconds))
            self._lenders[ancestor.name] = lenders
        out = []
        missing = dict(short)
        for lender in lenders:
            if missing.get(lender.resource, 0) > 0:
                amount = min(lender.amount, missing[lender.resource])
                missing[lender.resource] -= amount
                out.append(admission.Lender(lender.quota, lender.resource, amount, lender.seconds))
        return out

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
        victims = reclaim_victims(node, pods, over)
        if not victims:
            return False
        reason = reclaim_reason(name, node, pods, over)
        for victim in victims:
            self._evict(victim, "Reclaimed", reason, out)
        for waiting in self._waiting_on_ancestor:
            self._quota_pods[waiting].room = None  # their reasons now say "being evicted"
        self._lenders = {}
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
        path = self.tree.path_up(node)
        room = admission.room(node, path, pods)
        before = pods.room
        if (
            not force
            and before is not None
            and before.keys() == room.keys()
            and all(all(map(int.__le__, room[r], before[r])) for r in room)
        ):
            return False
        evicted = self._scan_pending(name, node, path, pods, out)
        pods.room = admission.room(node, path, pods)
        return evicted

    def refresh_reasons(self) -> Decisions:
        """Bring every pending pod's reason up to date with the current numbers."""
        out = Decisions()
        for name, pods in self._quota_pods.items():
            node = self.tree.node(name)
            if node is not None and node.is_quota:
                self._admit_pending(name, node, pods, out, force=True)
        return out

    def _scan_pending(
        self, name: str, node: TreeNode, path: list[TreeNode], pods: QuotaPods, out: Decisions
    ) -> bool:
        self._waiting_on_ancestor.discard(name)  # added back below while a pod still waits
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
                if not self._waits_for_ancestor(name, path, node, record, out):
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
                    if admission.shortfall(node, record):
                        self._set_reason(record, admission.waiting_for_victims(record), out)
                    elif not self._waits_for_ancestor(name, path, node, record, out):
                        self._admit(record, f"fits in ElasticQuota {name} after preemption")
                        out.admitted.append((key, admission.fit_message(name, node, record)))
                    continue
            self._set_why(name, node, record, short, out)
        return evicted
