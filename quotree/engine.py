"""The engine: the one place where quota decisions are taken, glued from the modules beside it.

Why a module of its own: the operator feeds `Engine` what the cluster holds
(quotas, cohorts, cluster nodes, pods) and carries out what `decide()`
returns; `quotree simulate` does the same with no cluster and no delay
(`simulate.SimulatedEngine`); the webhooks ask it how a pod resolves to a
quota. The rules themselves live in `resolution`, `runtime`, `admission`,
`eviction` and `report`; this module keeps the records current and calls
them in order. It does no I/O and reads no clock: time comes in as an argument.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from quotree import admission
from quotree.accounts import TreeNode
from quotree.eviction import Eviction, over_runtime, preemption_victims, reclaim_victims
from quotree.models import NodeConfig, PodFacts
from quotree.pods import PodRecord, PodState, QuotaPods
from quotree.quantity import format_quantity
from quotree.report import NodeReport, node_report
from quotree.resolution import (
    DEFAULT_SYSTEM_NAMESPACES,
    Coverage,
    Resolution,
    namespaces_of,
    never_gated,
)
from quotree.runtime import QuotaTree

__all__ = [
    "DEFAULT_SYSTEM_NAMESPACES",
    "Decisions",
    "Engine",
    "Eviction",
    "NodeReport",
    "PodRecord",
    "PodState",
    "Resolution",
]


@dataclass(slots=True)
class Decisions:
    """What the cluster should be made to look like after one `decide()`."""

    admitted: list[tuple[str, str]] = field(default_factory=list)  # (pod, message)
    evictions: list[Eviction] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # pod -> in-quota / over-quota
    pending: dict[str, str] = field(default_factory=dict)  # pod -> why it waits (when it changed)

    def __bool__(self) -> bool:
        return bool(self.admitted or self.evictions or self.labels or self.pending)


class Engine:
    """Quota decisions for a set of pods; see module docstring."""

    def __init__(
        self,
        *,
        system_namespaces: Iterable[str] = (),
        default_quota: str | None = None,
        reclaim_delay: float = 30.0,
    ) -> None:
        self.tree = QuotaTree()
        #: Namespaces never gated (`resolution.never_gated`, plus Kubernetes' own).
        self.system_namespaces = never_gated(None, system_namespaces)
        self.coverage = Coverage(self.system_namespaces, default_quota)
        self.default_quota = default_quota
        self.reclaim_delay = reclaim_delay
        self.pods: dict[str, PodRecord] = {}
        self._quota_pods: dict[str, QuotaPods] = {}
        self._touched: set[str] = set()
        self._over_since: dict[str, float] = {}
        self._cluster_nodes: dict[str, dict[str, int]] = {}
        self._ns_pods: dict[str, set[str]] = {}  # namespace -> keys of its pods
        self._arrivals = itertools.count()
        self._admissions = itertools.count(1)

    # ------------------------------------------------------------ configuration

    def set_config(self, config: NodeConfig) -> None:
        old = self.tree.config(config.name)
        if old == config:
            return  # e.g. our own status write coming back through the watch
        self.tree.set_config(config)
        if old is not None:
            self.coverage.remove(old)
        if config.is_leaf:
            self.coverage.add(config)
            self._touched.add(config.name)
        self._reresolve(namespaces_of(old) | namespaces_of(config))

    def remove_config(self, name: str) -> None:
        old = self.tree.config(name)
        self.tree.remove_config(name)
        if old is not None:
            self.coverage.remove(old)
        self._reresolve(namespaces_of(old))

    def _reresolve(self, namespaces: set[str]) -> None:
        """After a quota change, pods of the namespaces it covers (or covered) may move."""
        for namespace in namespaces:
            for key in list(self._ns_pods.get(namespace, ())):
                record = self.pods[key]
                if self.resolve(record.facts.namespace, record.facts.labels).quota != record.quota:
                    self.forget_pod(key)
                    self.observe_pod(record.facts)

    def set_cluster_node(self, name: str, allocatable: Mapping[str, int] | None) -> None:
        """A cluster node's allocatable (None: gone or not counted; `capacity.node_allocatable`)."""
        if allocatable is None:
            self._cluster_nodes.pop(name, None)
        else:
            self._cluster_nodes[name] = dict(allocatable)
        total: dict[str, int] = {}
        for amounts in self._cluster_nodes.values():
            for resource, amount in amounts.items():
                total[resource] = total.get(resource, 0) + amount
        self.tree.set_capacity(total)

    # ------------------------------------------------------------ resolution

    def covering(self, namespace: str) -> list[str]:
        """The ElasticQuotas whose namespaces include `namespace`, by name."""
        return self.coverage.covering(namespace)

    def resolve(self, namespace: str, labels: Mapping[str, str]) -> Resolution:
        """Which quota a pod of `namespace` with `labels` is charged to (api.md, Pods)."""
        return self.coverage.resolve(namespace, labels)

    # ------------------------------------------------------------ pods

    def observe_pod(self, facts: PodFacts) -> PodRecord | None:
        """Take in a pod as the cluster shows it (added or changed).

        A gated pod waits; a pod without the gate is admitted (it was let
        through, or it was created before quotree or while the webhook was
        off); a terminal pod is forgotten.
        """
        key = facts.key
        record = self.pods.get(key)
        if facts.terminal:
            self.forget_pod(key)
            return None
        if record is not None:
            if record.state is PodState.PENDING and not facts.gated:
                self._admit(record, "the gate was removed outside quotree")
            if (
                record.state is PodState.UNMANAGED
                and facts.node_name
                and not record.facts.node_name
            ):
                self.tree.add_unmanaged(facts.request)  # bound now: it holds capacity
            record.facts = facts
            record.preemptible = facts.preemptible
            if facts.deleting and record.state is PodState.ADMITTED and not record.evicting:
                # It is going away: its resources are on their way back.
                self._set_evicting(record, True)
            return record
        resolution = self.resolve(facts.namespace, facts.labels)
        quota = resolution.quota
        if quota is None and (resolution.error is None or not facts.gated):
            record = PodRecord(facts, None, PodState.UNMANAGED, next(self._arrivals))
            self.pods[key] = record
            self._ns_pods.setdefault(facts.namespace, set()).add(key)
            if facts.node_name:
                self.tree.add_unmanaged(facts.request)
            return record
        record = PodRecord(facts, quota, PodState.PENDING, next(self._arrivals))
        record.reason = resolution.error or ""
        self.pods[key] = record
        self._ns_pods.setdefault(facts.namespace, set()).add(key)
        if quota is None:
            return record  # gated, but no quota will take it: it waits with the reason
        pods = self._quota_pods.setdefault(quota, QuotaPods())
        self.tree.add_request(quota, facts.request)
        self._touched.add(quota)
        if facts.gated:
            pods.enqueue(record)
        else:
            self._admit(record, "running without the gate")
        return record

    def forget_pod(self, key: str) -> PodRecord | None:
        """The pod is gone (deleted, finished, evicted); returns what the engine knew of it."""
        record = self.pods.pop(key, None)
        if record is None:
            return None
        self._ns_pods[record.facts.namespace].discard(key)
        if record.quota is None:
            if record.state is PodState.UNMANAGED and record.facts.node_name:
                self.tree.add_unmanaged(record.request, -1)
            return record
        pods = self._quota_pods[record.quota]
        self._touched.add(record.quota)
        self.tree.add_request(record.quota, record.request, -1)
        pods.unqueue(record)
        if pods.remove_admitted(record):
            self.tree.add_used(record.quota, record.request, -1)
        return record

    def eviction_refused(self, key: str) -> None:
        """The Eviction API said no (a PodDisruptionBudget): the pod stays; try again later."""
        record = self.pods.get(key)
        if record is not None and record.evicting:
            self._set_evicting(record, False)
            if record.quota:
                self._quota_pods[record.quota].room = None
                self._touched.add(record.quota)

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
        key = (
            non_preemptible,
            tuple(
                (r, short[r], node.used[r], node.runtime[r], node.guarantee[r], node.cap[r])
                for r in short
            ),
        )
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
        used_now = {r: node.used[r] - pods.evicting.get(r, 0) for r in node.resources}
        detail = ", ".join(
            f"{r} used {format_quantity(used_now[r], r)} > runtime "
            f"{format_quantity(node.runtime[r], r)}"
            for r in sorted(over)
        )
        reason = f"ElasticQuota {name} is above its runtime ({detail}); lent quota is reclaimed"
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
        """Ask for the pod's eviction; its resources count as freed until it is gone."""
        assert record.quota is not None
        out.evictions.append(Eviction(record.key, record.quota, kind, reason))
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

    # ------------------------------------------------------------ views

    def report(self, name: str) -> NodeReport:
        """status for a Cohort or ElasticQuota: request (demand), runtime, used, pod counts."""
        return node_report(self.tree, self._quota_pods, name)

    def admitted_count(self, name: str) -> int:
        """How many admitted, non-terminal pods ElasticQuota `name` holds (rule 7)."""
        pods = self._quota_pods.get(name)
        return len(pods.admitted) if pods else 0

    def pod_records(self) -> Iterable[PodRecord]:
        """Every pod the engine knows (the simulator adds the ones it evicted)."""
        return self.pods.values()
