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
from collections.abc import Iterable, Mapping

from quotree.capacity import cluster_capacity, flavor_matches
from quotree.decide import Decider
from quotree.decisions import Decisions
from quotree.eviction import Eviction
from quotree.flavor_spec import FlavorConfig
from quotree.flavors import needs_flavor
from quotree.hold import Holds
from quotree.ledger import Ledger
from quotree.models import DEFAULT_TREE, FLAVOR_LABEL, NodeConfig, flavored
from quotree.options import EngineOptions
from quotree.placement import Placement
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.quantity import add_amounts
from quotree.resolution import (
    DEFAULT_SYSTEM_NAMESPACES,
    Coverage,
    Resolution,
    namespaces_of,
    never_gated,
)
from quotree.rules import Problem
from quotree.runtime import QuotaTree
from quotree.status import NodeReport, node_report
from quotree.trees import Forest

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


class Engine:
    """Quota decisions for a set of pods; see module docstring."""

    def __init__(
        self,
        *,
        system_namespaces: Iterable[str] = (),
        default_quota: str | None = None,
        reclaim_delay: float = 30.0,
        options: EngineOptions | None = None,
    ) -> None:
        options = options or EngineOptions()
        self.options = options
        #: The pods and their queues (`ledger.py`); `pods` is its records by key.
        self.ledger = Ledger()
        self.pods = self.ledger.pods
        #: Every tree by name, and which tree each node is in (`trees.py`).
        self.forest = Forest()
        self.tree = self.forest.default  # the default tree
        self.trees = self.forest.trees
        #: What pending pods hold on the flavors they do not wait on (`hold.py`).
        self.holds = Holds(self.forest.tree_of, enabled=options.holds)
        #: Which flavor a pending pod is charged to (`placement.py`).
        self.placement = Placement(self.forest.tree_of, self.ledger.quota_pods, self.holds, options)
        #: ResourceFlavors by name (the placement's; changed through `set_flavor`).
        self.flavors = self.placement.flavors
        #: The decision loop (`decide.py`).
        self.decider = Decider(
            self.ledger,
            self.forest,
            self.placement,
            self.holds,
            options=options,
            reclaim_delay=reclaim_delay,
        )
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

    # ------------------------------------------------------------ decisions

    def decide(self, now: float = 0.0) -> Decisions:
        """Admit what fits, preempt within quotas, reclaim lent quota (`Decider.decide`)."""
        return self.decider.decide(now)

    def refresh_reasons(self) -> Decisions:
        """Bring every pending pod's reason up to date with the current numbers."""
        return self.decider.refresh_reasons()

    def set_maintenance(self, reason: str | None) -> None:
        """Enter maintenance mode for the whole cluster (reason: why) or, with None, leave it."""
        self.decider.set_maintenance(reason)

    @property
    def maintenance(self) -> str | None:
        """Why the whole cluster is in maintenance mode (None: it is not)."""
        return self.decider.maintenance

    def tree_of(self, name: str) -> QuotaTree:
        """The tree Cohort or ElasticQuota `name` belongs to (the default tree if unknown)."""
        return self.forest.tree_of(name)

    # ------------------------------------------------------------ configuration

    def set_config(self, config: NodeConfig) -> None:
        """A Cohort or ElasticQuota was added or changed."""
        home = self.tree_of(config.name)
        old = home.structure.object(config.name, config.kind, config.namespace)
        if old == config:
            return  # e.g. our own status write coming back through the watch
        if config.tree != DEFAULT_TREE or self.forest.several:
            if self._set_forest_config(config, home, old):
                return
        else:
            self.tree.set_config(config)
        if old is not None:
            self.coverage.remove(old)
        if config.is_leaf:
            self.coverage.add(config)
        self.ledger.touched.add(config.name)
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
        target = self.forest.grow(
            config.tree,
            self._capacity,
            self._unmanaged,
            (r.request for r in self.pods.values() if r.state is PodState.ADMITTED),
        )
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
            self.forest.settle(target, name)
            self.coverage.remove(old)
            if config.is_leaf:
                self.coverage.add(config)
            self.ledger.touched.add(name)
            for facts in moved:
                self.observe_pod(facts)
            self._reresolve(namespaces_of(old) | namespaces_of(config))
            return True
        target.set_config(config)
        self.forest.settle(target, name)
        return False

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
        self.forest.add_unmanaged(request, sign)

    def all_configs(self) -> dict[str, NodeConfig]:
        """Every Cohort and ElasticQuota the engine holds, by name, over all trees."""
        return self.forest.configs()

    def tree_configs(self) -> dict[str, Mapping[str, NodeConfig]]:
        """Each tree's Cohorts and ElasticQuotas by name (the `Structure`), by tree name."""
        return self.forest.tree_configs()

    def problems(self) -> dict[str, Problem]:
        """Nodes outside the live trees, by name, and why (every tree)."""
        return self.forest.problems()

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
            self.forest.forget(name)
        self.ledger.touched.add(name)
        self.holds.sync(name)  # no min any more (or another object's)
        self._reresolve(namespaces)
        if shadowed and name not in home.structure:
            self.set_config(shadowed.pop(0))  # the name is free: the next object takes it

    def _reresolve(self, namespaces: set[str]) -> None:
        """After a quota change, pods of the namespaces it covers (or covered) may move."""
        for namespace in sorted(namespaces):
            # In the order they arrived: admitted ones are admitted again in that order, so
            # which of them is "admitted last" (reclaim's order) does not depend on hashing.
            keys = sorted(
                self.ledger.by_namespace.get(namespace, ()), key=lambda k: self.pods[k].arrival
            )
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
        self.forest.set_capacity(self._capacity)

    # ------------------------------------------------------------ resource flavors

    def set_flavor(self, flavor: FlavorConfig) -> None:
        """A ResourceFlavor was added or changed: capacities and the pods that may use it."""
        if self.placement.set_flavor(flavor):
            self._flavor_changed(flavor.name)

    def remove_flavor(self, name: str) -> None:
        """A ResourceFlavor is gone: its capacity is 0; admitted pods stay charged to it."""
        if self.placement.remove_flavor(name):
            self._flavor_changed(name)

    def _flavor_changed(self, name: str) -> None:
        self._set_capacity()
        self._recharge(
            {
                q
                for tree in self.forest
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
            pods = self.ledger.quota_pods.get(quota)
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
        first where it fits, `Placement.place`). A running pod stays where it
        is: its `quotree.io/flavor` label, else the flavor of the node it is bound to,
        else the first flavor it allows.
        """
        assert record.quota is not None
        config = self.tree_of(record.quota).config(record.quota)
        facts = record.facts
        if config is None or not needs_flavor(config, facts.request, self.flavors):
            return
        record.flavor_needed = True
        allowed = self.placement.placing(record, config).allowed
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
            record.charged = self.placement.charge_on(record, config, flavor)
            self.placement.charge_others(record)

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
                self.decider.admit(record, "the gate was removed outside quotree")
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
                self.ledger.set_evicting(record, True)
            return record
        resolution = self.resolve(facts.namespace, facts.labels)
        quota = resolution.quota
        if quota is None and (resolution.error is None or not facts.gated):
            record = PodRecord(facts, None, PodState.UNMANAGED, next(self.ledger.arrivals))
            self.pods[key] = record
            self.ledger.by_namespace.setdefault(facts.namespace, set()).add(key)
            if facts.node_name:
                record.charged = self._unmanaged_charge(facts)
                self._add_unmanaged(record.request)
            return record
        record = PodRecord(
            facts, quota, PodState.PENDING, next(self.ledger.arrivals), also=resolution.others
        )
        self.pods[key] = record
        self.ledger.by_namespace.setdefault(facts.namespace, set()).add(key)
        if quota is None:
            # Gated, but no quota will take it (its label names a deleted quota, its
            # namespace became ambiguous): it waits, says why, and is counted.
            record.reason = f"cannot be charged to a quota: {resolution.error}"
            self.ledger.unresolved[key] = record
            self.ledger.unannounced[key] = record.reason
            return record
        pods = self.ledger.queue(quota)
        self._charge_new(record)
        self.tree_of(quota).add_request(quota, record.request)
        self.ledger.touched.add(quota)
        for other in record.also:
            other_pods = self.ledger.queue(other)
            self.tree_of(other).add_request(other, record.request_in(other))
            if facts.gated:
                other_pods.add_also_pending(record)
        if facts.gated:
            pods.enqueue(record)
            if self.placement.hold_pending(record):
                return record  # its quotas' holds are synced on its flavors already
        else:
            self.decider.admit(record, "running without the gate")
        self.holds.changed((quota, *record.also), _charged_names(record))
        return record

    def forget_pod(self, key: str) -> PodRecord | None:
        """The pod is gone (deleted, finished, evicted); returns what the engine knew of it."""
        record = self.pods.pop(key, None)
        if record is None:
            return None
        self.ledger.by_namespace[record.facts.namespace].discard(key)
        self.ledger.unresolved.pop(key, None)
        self.ledger.unannounced.pop(key, None)
        if record.quota is None:
            if record.state is PodState.UNMANAGED and record.facts.node_name:
                self._add_unmanaged(record.request, -1)
            return record
        pods = self.ledger.quota_pods[record.quota]
        self.ledger.touched.add(record.quota)
        tree = self.tree_of(record.quota)
        tree.add_request(record.quota, record.request, -1)
        pods.unqueue(record)
        admitted = pods.remove_admitted(record)
        if admitted:
            tree.add_used(record.quota, record.request, -1)
        for other in record.also:
            other_pods = self.ledger.quota_pods[other]
            other_tree = self.tree_of(other)
            self.ledger.released_in.add(other)
            other_tree.add_request(other, record.request_in(other), -1)
            other_pods.remove_also_pending(record)
            if other_pods.remove_admitted(record):
                other_tree.add_used(other, record.request_in(other), -1)
        if admitted and self.forest.several:
            self.forest.charge_outside(record, -1)
        if not admitted and self.holds.remove(key):
            return record  # its quotas' holds are synced on its flavors already
        self.holds.changed((record.quota, *record.also), _charged_names(record))
        return record

    def eviction_refused(self, key: str) -> None:
        """The Eviction API said no (a PodDisruptionBudget): the pod stays; try again later."""
        record = self.pods.get(key)
        if record is not None and record.evicting:
            self.ledger.set_evicting(record, False)
            if record.quota:
                self.ledger.quota_pods[record.quota].room = None
                self.ledger.touched.add(record.quota)
                self.ledger.released_in.update(record.also)

    # ------------------------------------------------------------ views

    def report(self, name: str) -> NodeReport:
        """status for a Cohort or ElasticQuota: request (demand), runtime, used, pod counts."""
        tree = self.tree_of(name)
        config = tree.config(name)
        covered = namespaces_of(config)
        unresolved = sum(1 for r in self.ledger.unresolved.values() if r.facts.namespace in covered)
        return node_report(tree, self.ledger.quota_pods, name, unresolved=unresolved)

    def unresolved_pods(self) -> list[PodRecord]:
        """Gated pods no quota will take, each with its reason (counted in the pendingPods
        of the ElasticQuotas covering its namespace, if any)."""
        return list(self.ledger.unresolved.values())

    def admitted_count(self, name: str) -> int:
        """How many admitted, non-terminal pods ElasticQuota `name` holds (rule 7)."""
        pods = self.ledger.quota_pods.get(name)
        return len(pods.admitted) if pods else 0

    def pod_records(self) -> Iterable[PodRecord]:
        """Every pod the engine knows (the simulator adds the ones it evicted)."""
        return self.pods.values()


def _charged_names(record: PodRecord) -> list[str]:
    """The resources the pod is charged in any tree."""
    names = list(record.request)
    for charged in (record.charged_in or {}).values():
        names.extend(charged)
    return names
