"""The engine: what the shells talk to, the one place where quota decisions are taken.

Why a module of its own: the operator feeds `Engine` what the cluster holds
(quotas, cohorts, cluster nodes, pods) and carries out what `decide()`
returns; `quotree simulate` does the same with no cluster and no delay
(`simulate.SimulatedEngine`); the webhooks ask it how a pod resolves to a
quota. This module turns those inputs into records (which quota a pod is
charged to, its raw request, admitted or pending); the decisions themselves
are `decide.Decider`'s, and the rules behind them live in `resolution`,
`runtime`, `admission`, `eviction` and `status`. It does no I/O and reads no
clock: time comes in as an argument.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from quotree.decide import Decider, Decisions
from quotree.eviction import Eviction
from quotree.models import NodeConfig, PodFacts
from quotree.pods import PodRecord, PodState, QuotaPods
from quotree.resolution import (
    DEFAULT_SYSTEM_NAMESPACES,
    Coverage,
    Resolution,
    namespaces_of,
    never_gated,
)
from quotree.status import NodeReport, node_report

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


class Engine(Decider):
    """Quota decisions for a set of pods; see module docstring."""

    def __init__(
        self,
        *,
        system_namespaces: Iterable[str] = (),
        default_quota: str | None = None,
        reclaim_delay: float = 30.0,
    ) -> None:
        super().__init__(reclaim_delay)
        #: Namespaces never gated (`resolution.never_gated`, plus Kubernetes' own).
        self.system_namespaces = never_gated(None, system_namespaces)
        self.coverage = Coverage(self.system_namespaces, default_quota)
        self._cluster_nodes: dict[str, dict[str, int]] = {}
        self._ns_pods: dict[str, set[str]] = {}  # namespace -> keys of its pods
        self._arrivals = itertools.count()

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
        """Which quota a pod of `namespace` with `labels` is charged to (the API's "Pods" rules)."""
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
