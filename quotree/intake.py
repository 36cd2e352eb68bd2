"""Pods in: a pod as the cluster shows it becomes a record of the ledger, charged to its
quotas in every tree; a pod gone gives back what it held.

Why a module of its own: the operator's pod watch and the simulator feed every pod
through here (`Engine.observe_pod`, `Engine.forget_pod`). Taking a pod in means resolving
its quotas (api.md, "Pods"), charging it on a flavor when its quota splits its request
by flavor, counting its demand in every tree, queueing it (gated) or counting it as
admitted (not gated), and keeping the holds in step; a pod outside every tree that is
bound to a Node holds capacity instead. When a quota's configuration moves pods (another
quota covers their namespace, another flavor list, another tree), their records are taken
out and in again (`release`, `reresolve`, `recharge`), keeping admitted pods admitted.
"""

from __future__ import annotations

import dataclasses

from quotree.capacity import flavor_matches
from quotree.cluster import Cluster
from quotree.decide import Decider
from quotree.flavors import needs_flavor
from quotree.hold import Holds
from quotree.ledger import Ledger
from quotree.models import FLAVOR_LABEL
from quotree.placement import Placement
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.resolution import Coverage
from quotree.trees import Forest

__all__ = ["PodIntake"]


class PodIntake:
    """Pods in and out of one engine (see module docstring)."""

    def __init__(
        self,
        ledger: Ledger,
        forest: Forest,
        cluster: Cluster,
        *,
        coverage: Coverage,
        placement: Placement,
        holds: Holds,
        decider: Decider,
    ) -> None:
        self._ledger = ledger
        self._forest = forest
        self._cluster = cluster
        self._coverage = coverage
        self._placement = placement
        self._holds = holds
        self._decider = decider

    def observe(self, facts: PodFacts) -> PodRecord | None:
        """Take in a pod as the cluster shows it (added or changed).

        A gated pod waits; a pod without the gate is admitted (it was let
        through, or it was created before quotree or while the webhook was
        off); a terminal pod is forgotten.
        """
        key = facts.key
        record = self._ledger.pods.get(key)
        if facts.terminal:
            self.forget(key)
            return None
        if record is not None:
            if record.state is PodState.PENDING and not facts.gated:
                self._decider.admit(record, "the gate was removed outside quotree")
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
                self.forget(key)
                return self.observe(facts)
            if (
                record.state is PodState.UNMANAGED
                and facts.node_name
                and not record.facts.node_name
            ):
                record.charged = self._cluster.unmanaged_charge(facts)
                self._cluster.add_unmanaged(record.request)  # bound now: it holds capacity
            record.facts = facts
            record.placing = None  # its allowed flavors may differ now
            record.preemptible = facts.preemptible
            if facts.deleting and record.state is PodState.ADMITTED and not record.evicting:
                # It is going away: its resources are on their way back.
                self._ledger.set_evicting(record, True)
            return record
        resolution = self._coverage.resolve(facts.namespace, facts.labels)
        quota = resolution.quota
        if quota is None and (resolution.error is None or not facts.gated):
            record = PodRecord(facts, None, PodState.UNMANAGED, next(self._ledger.arrivals))
            self._ledger.pods[key] = record
            self._ledger.by_namespace.setdefault(facts.namespace, set()).add(key)
            if facts.node_name:
                record.charged = self._cluster.unmanaged_charge(facts)
                self._cluster.add_unmanaged(record.request)
            return record
        record = PodRecord(
            facts, quota, PodState.PENDING, next(self._ledger.arrivals), also=resolution.others
        )
        grouped = self._ledger.grouped.get(key)
        if grouped is not None:
            record.group, record.rank = grouped
        self._ledger.pods[key] = record
        self._ledger.by_namespace.setdefault(facts.namespace, set()).add(key)
        if quota is None:
            # Gated, but no quota will take it (its label names a deleted quota, its
            # namespace became ambiguous): it waits, says why, and is counted.
            record.reason = f"cannot be charged to a quota: {resolution.error}"
            self._ledger.unresolved[key] = record
            self._ledger.unannounced[key] = record.reason
            return record
        pods = self._ledger.queue(quota)
        self._charge_new(record)
        self._forest.tree_of(quota).add_request(quota, record.request)
        self._ledger.touched.add(quota)
        for other in record.also:
            other_pods = self._ledger.queue(other)
            self._forest.tree_of(other).add_request(other, record.request_in(other))
            if facts.gated:
                other_pods.add_also_pending(record)
        if facts.gated:
            pods.enqueue(record)
            if self._placement.hold_pending(record):
                return record  # its quotas' holds are synced on its flavors already
        else:
            self._decider.admit(record, "running without the gate")
        self._holds.changed((quota, *record.also), _charged_names(record))
        return record

    def forget(self, key: str) -> PodRecord | None:
        """The pod is gone (deleted, finished, evicted); returns what the engine knew of it."""
        record = self._ledger.pods.pop(key, None)
        if record is None:
            return None
        self._ledger.by_namespace[record.facts.namespace].discard(key)
        self._ledger.evicting.discard(key)
        self._ledger.unresolved.pop(key, None)
        self._ledger.unannounced.pop(key, None)
        if record.quota is None:
            if record.state is PodState.UNMANAGED and record.facts.node_name:
                self._cluster.add_unmanaged(record.request, -1)
            return record
        pods = self._ledger.quota_pods[record.quota]
        self._ledger.touched.add(record.quota)
        tree = self._forest.tree_of(record.quota)
        tree.add_request(record.quota, record.request, -1)
        pods.unqueue(record)
        admitted = pods.remove_admitted(record)
        if admitted:
            tree.add_used(record.quota, record.request, -1)
        for other in record.also:
            other_pods = self._ledger.quota_pods[other]
            other_tree = self._forest.tree_of(other)
            self._ledger.released_in.add(other)
            other_tree.add_request(other, record.request_in(other), -1)
            other_pods.remove_also_pending(record)
            if other_pods.remove_admitted(record):
                other_tree.add_used(other, record.request_in(other), -1)
        if admitted and self._forest.several:
            self._forest.charge_outside(record, -1)
        if not admitted and self._holds.remove(key):
            return record  # its quotas' holds are synced on its flavors already
        self._holds.changed((record.quota, *record.also), _charged_names(record))
        return record

    def eviction_refused(self, key: str) -> None:
        """The Eviction API said no (a PodDisruptionBudget): the pod stays; try again later."""
        record = self._ledger.pods.get(key)
        if record is not None and record.evicting:
            self._ledger.set_evicting(record, False)
            if record.quota:
                self._ledger.quota_pods[record.quota].room = None
                self._ledger.touched.add(record.quota)
                self._ledger.released_in.update(record.also)

    # ------------------------------------------------------------ views

    def _charge_new(self, record: PodRecord) -> None:
        """Which flavor a new pod of a quota that splits its request by flavor is charged to.

        A gated pod starts on the first flavor it allows (the decider moves it to the
        first where it fits, `Placement.place`). A running pod stays where it
        is: its `quotree.io/flavor` label, else the flavor of the node it is bound to,
        else the first flavor it allows.
        """
        assert record.quota is not None
        config = self._forest.tree_of(record.quota).config(record.quota)
        facts = record.facts
        if config is None or not needs_flavor(config, facts.request, self._placement.flavors):
            return
        record.flavor_needed = True
        allowed = self._placement.placing(record, config).allowed
        flavor = allowed[0] if allowed else None
        if not facts.gated:
            labelled = facts.labels.get(FLAVOR_LABEL)
            labels = self._cluster.labels(facts.node_name)
            flavors = self._placement.flavors
            on_node = [
                f
                for f in config.flavors
                if labels is not None and f in flavors and flavor_matches(flavors[f], labels)
            ]
            if labelled in config.flavors:
                flavor = labelled
            elif on_node:
                flavor = on_node[0]
        if flavor is not None:
            record.flavor = flavor
            record.charged = self._placement.charge_on(record, config, flavor)
            self._placement.charge_others(record)

    def release(self, name: str) -> list[PodFacts]:
        """Forget every pod charged to quota `name`; their facts, to be observed again."""
        facts = []
        for record in list(self._ledger.pods.values()):
            if name == record.quota or name in record.also:
                pod = record.facts
                if record.state is PodState.ADMITTED and pod.gated:
                    pod = dataclasses.replace(pod, gated=False)
                self.forget(record.key)
                facts.append(pod)
        return facts

    def reresolve(self, namespaces: set[str]) -> None:
        """After a quota change, pods of the namespaces it covers (or covered) may move."""
        for namespace in sorted(namespaces):
            # In the order they arrived: admitted ones are admitted again in that order, so
            # which of them is "admitted last" (reclaim's order) does not depend on hashing.
            keys = sorted(
                self._ledger.by_namespace.get(namespace, ()),
                key=lambda k: self._ledger.pods[k].arrival,
            )
            for key in keys:
                record = self._ledger.pods[key]
                now = self._coverage.resolve(record.facts.namespace, record.facts.labels)
                if now.quota != record.quota or now.others != record.also:
                    facts = _as_it_runs(record)
                    self.forget(key)
                    self.observe(facts)

    def recharge(self, quotas: set[str]) -> None:
        """Charge the pods of `quotas` again (their flavors or a flavor they name changed).

        Admitted pods keep their flavor and their place in the in-quota order; pending
        pods are placed again.
        """
        for quota in sorted(quotas):
            pods = self._ledger.quota_pods.get(quota)
            if pods is None:
                continue
            for key in [k for _, k in pods.pending] + list(pods.admitted):
                record = self._ledger.pods[key]
                facts = _as_it_runs(record)
                seq, standing = record.admitted_seq, record.standing
                self.forget(key)
                again = self.observe(facts)
                if again is not None and again.state is PodState.ADMITTED:
                    again.admitted_seq, again.standing = seq, standing
                    for name in (again.quota, *again.also):  # back in its place in the order
                        if name is not None:
                            self._ledger.quota_pods[name].standings.moved(again)


def _as_it_runs(record: PodRecord) -> PodFacts:
    """The pod's facts to observe it again: an admitted pod runs without the gate (its
    removal may not be seen yet) and on its flavor (the label the admission patch sets)."""
    facts = record.facts
    if record.state is not PodState.ADMITTED:
        return facts
    if facts.gated:
        facts = dataclasses.replace(facts, gated=False)
    if record.flavor is not None:
        facts = dataclasses.replace(facts, labels={**facts.labels, FLAVOR_LABEL: record.flavor})
    return facts


def _charged_names(record: PodRecord) -> list[str]:
    """The resources the pod is charged in any tree."""
    names = list(record.request)
    for charged in (record.charged_in or {}).values():
        names.extend(charged)
    return names
