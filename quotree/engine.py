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

import dataclasses
import itertools
from collections.abc import Iterable, Mapping

from quotree.capacity import cluster_capacity, flavor_matches
from quotree.decide import Decider, Decisions
from quotree.eviction import Eviction
from quotree.flavor_spec import FlavorConfig
from quotree.flavors import needs_flavor
from quotree.models import DEFAULT_TREE, FLAVOR_LABEL, NodeConfig, flavored
from quotree.options import EngineOptions
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState, QuotaPods
from quotree.quantity import add_amounts
from quotree.resolution import (
    DEFAULT_SYSTEM_NAMESPACES,
    Coverage,
    Resolution,
    namespaces_of,
    never_gated,
)
from quotree.rules import Problem
from quotree.runtime import OUTSIDE, QuotaTree
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
        options: EngineOptions | None = None,
    ) -> None:
        super().__init__(reclaim_delay, options or EngineOptions())
        #: Namespaces never gated (`resolution.never_gated`, plus Kubernetes' own).
        self.system_namespaces = never_gated(None, system_namespaces)
        self.coverage = Coverage(self.system_namespaces, default_quota)
        # cluster node -> (allocatable, labels), for the nodes that count
        self._cluster_nodes: dict[str, tuple[dict[str, int], dict[str, str]]] = {}
        self._capacity: dict[str, int] = {}
        self._unmanaged: dict[str, int] = {}  # requests of bound pods no tree charges
        # Objects whose name another tree already holds (rule 6 across trees, the webhook
        # bypassed): the engine keeps the first, and takes these when it goes.
        self._shadowed: dict[str, list[NodeConfig]] = {}
        self._ns_pods: dict[str, set[str]] = {}  # namespace -> keys of its pods
        self._arrivals = itertools.count()

    # ------------------------------------------------------------ configuration

    def set_config(self, config: NodeConfig) -> None:
        """A Cohort or ElasticQuota was added or changed."""
        home = self.tree_of(config.name)
        old = home.structure.object(config.name, config.kind, config.namespace)
        if old == config:
            return  # e.g. our own status write coming back through the watch
        if config.tree != DEFAULT_TREE or self._forest:
            if self._set_forest_config(config, home, old):
                return
        else:
            self.tree.set_config(config)
        if old is not None:
            self.coverage.remove(old)
        if config.is_leaf:
            self.coverage.add(config)
        self._touched.add(config.name)
        self.holds.sync(config.name)  # its min may have changed
        self._reresolve(namespaces_of(old) | namespaces_of(config))
        if (
            config.is_leaf
            and old is not None
            and (old.flavors, old.flavored_resources) != (config.flavors, config.flavored_resources)
        ):
            self._recharge({config.name})

    # ------------------------------------------------------------ several trees

    def _set_forest_config(
        self, config: NodeConfig, home: QuotaTree, old: NodeConfig | None
    ) -> bool:
        """`set_config` when more than one tree is in play; True when nothing more is to do."""
        name = config.name
        target = self._grow_tree(config.tree)
        if home is not target and name in home.structure:
            if old is None:
                # Another object holds the name in another tree: keep the first (rule 6).
                shadowed = self._shadowed.setdefault(name, [])
                shadowed[:] = [
                    c for c in shadowed if (c.kind, c.namespace) != (config.kind, config.namespace)
                ]
                shadowed.append(config)
                return True
            # The object moves to another tree: its pods are charged anew.
            moved = self._release_pods_of(name)
            home.remove_config(name, config.kind, config.namespace)
            target.set_config(config)
            self._tree_by_name[name] = target
            self.coverage.remove(old)
            if config.is_leaf:
                self.coverage.add(config)
            self._touched.add(name)
            for facts in moved:
                self.observe_pod(facts)
            self._reresolve(namespaces_of(old) | namespaces_of(config))
            return True
        target.set_config(config)
        if target is not self.tree:
            self._tree_by_name[name] = target
        return False

    def _grow_tree(self, tree: str) -> QuotaTree:
        """The tree called `tree`, made (with the cluster's capacity and what is already
        admitted, which it does not charge) when it is new."""
        existing = self.trees.get(tree)
        if existing is not None:
            return existing
        new = QuotaTree()
        new.set_capacity(self._capacity)
        new.add_unmanaged(self._unmanaged)
        for record in self.pods.values():
            if record.state is PodState.ADMITTED:
                new.add_used(OUTSIDE, record.request)
        self.trees[tree] = new
        self._forest = True
        return new

    def _release_pods_of(self, name: str) -> list[PodFacts]:
        """Forget every pod charged to quota `name`; their facts, to be observed again."""
        facts = []
        for record in list(self.pods.values()):
            if name == record.quota or name in record.also:
                pod = record.facts
                if record.state is PodState.ADMITTED and pod.gated:
                    pod = dataclasses.replace(pod, gated=False)
                self.forget_pod(record.key)
                facts.append(pod)
        return facts

    def _add_unmanaged(self, request: Mapping[str, int], sign: int = 1) -> None:
        add_amounts(self._unmanaged, request, sign)
        for tree in self.trees.values():
            tree.add_unmanaged(request, sign)

    def all_configs(self) -> dict[str, NodeConfig]:
        """Every Cohort and ElasticQuota the engine holds, by name, over all trees."""
        if not self._forest:
            return dict(self.tree.configs())
        out: dict[str, NodeConfig] = {}
        for tree in self.trees.values():
            out.update(tree.configs())
        return out

    def tree_configs(self) -> dict[str, Mapping[str, NodeConfig]]:
        """Each tree's Cohorts and ElasticQuotas by name (the `Structure`), by tree name."""
        return {name: tree.configs() for name, tree in self.trees.items()}

    def problems(self) -> dict[str, Problem]:
        """Nodes outside the live trees, by name, and why (every tree)."""
        out: dict[str, Problem] = {}
        for tree in self.trees.values():
            out.update(tree.problems)
        return out

    def remove_config(
        self, name: str, *, kind: str | None = None, namespace: str | None = None
    ) -> None:
        """A Cohort or ElasticQuota is gone: the one of `kind` in `namespace` (kind None:
        every object called `name`). Another object of the same name stays."""
        shadowed = self._shadowed.get(name)
        if shadowed:
            shadowed[:] = [
                c
                for c in shadowed
                if kind is not None and (c.kind, c.namespace) != (kind, namespace)
            ]
        home = self.tree_of(name)
        gone = [
            o
            for o in home.structure.objects(name)
            if kind is None or (o.kind, o.namespace) == (kind, namespace)
        ]
        home.remove_config(name, kind, namespace)
        namespaces: set[str] = set()
        for old in gone:
            self.coverage.remove(old)
            namespaces |= namespaces_of(old)
        for other in home.structure.objects(name):
            if other.is_leaf:
                self.coverage.add(other)  # it may share namespaces with the one removed
        if name not in home.structure:
            self._tree_by_name.pop(name, None)
        self._touched.add(name)
        self.holds.sync(name)  # no min any more (or another object's)
        self._reresolve(namespaces)
        if shadowed and name not in home.structure:
            self.set_config(shadowed.pop(0))  # the name is free: the next object takes it

    def _reresolve(self, namespaces: set[str]) -> None:
        """After a quota change, pods of the namespaces it covers (or covered) may move."""
        for namespace in sorted(namespaces):
            # In the order they arrived: admitted ones are admitted again in that order, so
            # which of them is "admitted last" (reclaim's order) does not depend on hashing.
            keys = sorted(self._ns_pods.get(namespace, ()), key=lambda k: self.pods[k].arrival)
            for key in keys:
                record = self.pods[key]
                now = self.resolve(record.facts.namespace, record.facts.labels)
                if now.quota != record.quota or now.others != record.also:
                    facts = record.facts
                    if record.state is PodState.ADMITTED and facts.gated:
                        # Admitted, its gate removal not seen yet: it runs without the gate.
                        facts = dataclasses.replace(facts, gated=False)
                    if record.state is PodState.ADMITTED and record.flavor is not None:
                        labels = {**facts.labels, FLAVOR_LABEL: record.flavor}
                        facts = dataclasses.replace(facts, labels=labels)
                    self.forget_pod(key)
                    self.observe_pod(facts)

    def set_cluster_node(
        self,
        name: str,
        allocatable: Mapping[str, int] | None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """A cluster node's allocatable (None: gone or not counted; `capacity.node_allocatable`)
        and its labels (which flavors it belongs to)."""
        if allocatable is None:
            self._cluster_nodes.pop(name, None)
        else:
            self._cluster_nodes[name] = (dict(allocatable), dict(labels or {}))
        self._set_capacity()

    def _set_capacity(self) -> None:
        """Every tree shares out the whole cluster (flavors' capacities included)."""
        self._capacity = cluster_capacity(self._cluster_nodes, self.flavors)
        for tree in self.trees.values():
            tree.set_capacity(self._capacity)

    # ------------------------------------------------------------ resource flavors

    def set_flavor(self, flavor: FlavorConfig) -> None:
        """A ResourceFlavor was added or changed: capacities and the pods that may use it."""
        if self.flavors.get(flavor.name) == flavor:
            return
        self.flavors[flavor.name] = flavor
        self.flavor_generation += 1
        self._flavor_changed(flavor.name)

    def remove_flavor(self, name: str) -> None:
        """A ResourceFlavor is gone: its capacity is 0; admitted pods stay charged to it."""
        if self.flavors.pop(name, None) is not None:
            self.flavor_generation += 1
            self._flavor_changed(name)

    def _flavor_changed(self, name: str) -> None:
        self._set_capacity()
        self._recharge(
            {
                q
                for tree in self.trees.values()
                for q, cfg in tree.structure.items()
                if cfg.is_leaf and name in cfg.flavors
            }
        )

    def _recharge(self, quotas: set[str]) -> None:
        """Charge the pods of `quotas` again (their flavors or a flavor they name changed).

        Admitted pods keep their flavor and their place in the in-quota order; pending
        pods are placed again.
        """
        for quota in sorted(quotas):
            pods = self._quota_pods.get(quota)
            if pods is None:
                continue
            for key in [k for _, k in pods.pending] + list(pods.admitted):
                record = self.pods[key]
                facts = record.facts
                if record.state is PodState.ADMITTED:
                    if facts.gated:
                        facts = dataclasses.replace(facts, gated=False)
                    if record.flavor is not None:
                        labels = {**facts.labels, FLAVOR_LABEL: record.flavor}
                        facts = dataclasses.replace(facts, labels=labels)
                seq, capacity = record.admitted_seq, record.capacity
                self.forget_pod(key)
                again = self.observe_pod(facts)
                if again is not None and again.state is PodState.ADMITTED:
                    again.admitted_seq, again.capacity = seq, capacity

    def _charge_new(self, record: PodRecord) -> None:
        """Which flavor a new pod of a quota that splits its request by flavor is charged to.

        A gated pod starts on the first flavor it allows (the decider moves it to the
        first where it fits, `Decider._place_on_flavor`). A running pod stays where it
        is: its `quotree.io/flavor` label, else the flavor of the node it is bound to,
        else the first flavor it allows.
        """
        assert record.quota is not None
        config = self.tree_of(record.quota).config(record.quota)
        facts = record.facts
        if config is None or not needs_flavor(config, facts.request, self.flavors):
            return
        record.flavor_needed = True
        allowed = self._placing(record, config).allowed
        flavor = allowed[0] if allowed else None
        if not facts.gated:
            labelled = facts.labels.get(FLAVOR_LABEL)
            node = self._cluster_nodes.get(facts.node_name or "")
            on_node = [
                f
                for f in config.flavors
                if node is not None
                and f in self.flavors
                and flavor_matches(self.flavors[f], node[1])
            ]
            if labelled in config.flavors:
                flavor = labelled
            elif on_node:
                flavor = on_node[0]
        if flavor is not None:
            record.flavor = flavor
            record.charged = self._charge_on(record, config, flavor)

    def _unmanaged_charge(self, facts: PodFacts) -> dict[str, int]:
        """What a bound pod outside the tree holds: its request, also on its node's flavors."""
        node = self._cluster_nodes.get(facts.node_name or "")
        held = dict(facts.request)
        if node is not None:
            for flavor in self.flavors.values():
                if flavor_matches(flavor, node[1]):
                    for resource, amount in facts.request.items():
                        held[flavored(resource, flavor.name)] = amount
        return held

    # ------------------------------------------------------------ resolution

    def covering(self, namespace: str, tree: str = DEFAULT_TREE) -> list[str]:
        """The ElasticQuotas of `tree` whose namespaces include `namespace`, by name."""
        return self.coverage.covering(namespace, tree)

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
            elif (
                record.state is PodState.PENDING
                and record.flavor_needed
                and (
                    (facts.node_selector, facts.node_affinity)
                    != (record.facts.node_selector, record.facts.node_affinity)
                )
            ):
                # A gated pod may gain scheduling constraints: the flavors it allows, and so
                # where it is placed and what it holds, are taken afresh.
                self.forget_pod(key)
                return self.observe_pod(facts)
            if (
                record.state is PodState.UNMANAGED
                and facts.node_name
                and not record.facts.node_name
            ):
                record.charged = self._unmanaged_charge(facts)
                self._add_unmanaged(record.request)  # bound now: it holds capacity
            record.facts = facts
            record.placing = None  # its allowed flavors may differ now
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
                record.charged = self._unmanaged_charge(facts)
                self._add_unmanaged(record.request)
            return record
        record = PodRecord(
            facts, quota, PodState.PENDING, next(self._arrivals), also=resolution.others
        )
        self.pods[key] = record
        self._ns_pods.setdefault(facts.namespace, set()).add(key)
        if quota is None:
            # Gated, but no quota will take it (its label names a deleted quota, its
            # namespace became ambiguous): it waits, says why, and is counted.
            record.reason = f"cannot be charged to a quota: {resolution.error}"
            self._unresolved[key] = record
            self._unannounced[key] = record.reason
            return record
        pods = self._quota_pods.setdefault(quota, QuotaPods())
        self._charge_new(record)
        self.tree_of(quota).add_request(quota, record.request)
        self._touched.add(quota)
        for other in record.also:
            other_pods = self._quota_pods.setdefault(other, QuotaPods())
            self.tree_of(other).add_request(other, record.request)
            if facts.gated:
                other_pods.add_also_pending(record)
        if facts.gated:
            pods.enqueue(record)
            if self._hold_pending(record):
                return record  # its quotas' holds are synced on its flavors already
        else:
            self._admit(record, "running without the gate")
        self.holds.changed((quota, *record.also), record.request)
        return record

    def forget_pod(self, key: str) -> PodRecord | None:
        """The pod is gone (deleted, finished, evicted); returns what the engine knew of it."""
        record = self.pods.pop(key, None)
        if record is None:
            return None
        self._ns_pods[record.facts.namespace].discard(key)
        self._unresolved.pop(key, None)
        self._unannounced.pop(key, None)
        if record.quota is None:
            if record.state is PodState.UNMANAGED and record.facts.node_name:
                self._add_unmanaged(record.request, -1)
            return record
        pods = self._quota_pods[record.quota]
        self._touched.add(record.quota)
        tree = self.tree_of(record.quota)
        tree.add_request(record.quota, record.request, -1)
        pods.unqueue(record)
        admitted = pods.remove_admitted(record)
        if admitted:
            tree.add_used(record.quota, record.request, -1)
        for other in record.also:
            other_pods = self._quota_pods[other]
            other_tree = self.tree_of(other)
            self._released_in.add(other)
            other_tree.add_request(other, record.request, -1)
            other_pods.remove_also_pending(record)
            if other_pods.remove_admitted(record):
                other_tree.add_used(other, record.request, -1)
        if admitted and self._forest:
            self._charge_outside(record, -1)
        if not admitted and self.holds.remove(key):
            return record  # its quotas' holds are synced on its flavors already
        self.holds.changed((record.quota, *record.also), record.request)
        return record

    def eviction_refused(self, key: str) -> None:
        """The Eviction API said no (a PodDisruptionBudget): the pod stays; try again later."""
        record = self.pods.get(key)
        if record is not None and record.evicting:
            self._set_evicting(record, False)
            if record.quota:
                self._quota_pods[record.quota].room = None
                self._touched.add(record.quota)
                self._released_in.update(record.also)

    # ------------------------------------------------------------ views

    def report(self, name: str) -> NodeReport:
        """status for a Cohort or ElasticQuota: request (demand), runtime, used, pod counts."""
        tree = self.tree_of(name)
        config = tree.config(name)
        covered = namespaces_of(config)
        unresolved = sum(1 for r in self._unresolved.values() if r.facts.namespace in covered)
        return node_report(tree, self._quota_pods, name, unresolved=unresolved)

    def unresolved_pods(self) -> list[PodRecord]:
        """Gated pods no quota will take, each with its reason (counted in the pendingPods
        of the ElasticQuotas covering its namespace, if any)."""
        return list(self._unresolved.values())

    def admitted_count(self, name: str) -> int:
        """How many admitted, non-terminal pods ElasticQuota `name` holds (rule 7)."""
        pods = self._quota_pods.get(name)
        return len(pods.admitted) if pods else 0

    def pod_records(self) -> Iterable[PodRecord]:
        """Every pod the engine knows (the simulator adds the ones it evicted)."""
        return self.pods.values()
