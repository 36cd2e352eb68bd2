"""Pods in: a pod as the cluster shows it becomes a record of the ledger, charged to its
quotas in every tree; a pod gone gives back what it held.

Why a module of its own: the operator's pod watch and the simulator feed every pod
through here (`Engine.observe_pod`, `Engine.forget_pod`). Taking a pod in means resolving
its quotas (docs/reference/pods.md, "Which quota a pod is charged to"), charging it on a
flavor when its quota splits its request by flavor, counting its demand in every tree,
queueing it (gated) or counting it as admitted (not gated), and keeping the holds in step;
a pod outside every tree that is bound to a Node holds capacity instead. Changing a pod
is an operation of its own (`move`): when a quota's configuration moves pods (another
quota covers their namespace, another flavor list, another tree) or a gated pod's
constraints change, its charge leaves the quotas it was in and goes to the new ones; its
record stays (an admitted pod stays admitted, on its flavor, in its place in the in-quota
order).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from quotree.capacity import flavor_matches
from quotree.cluster import Cluster
from quotree.decide import Decider
from quotree.flavors import needs_flavor
from quotree.hold import Holds
from quotree.ledger import Ledger
from quotree.models import FLAVOR_LABEL, STANDING_LABEL
from quotree.placement import Placement
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.resolution import Coverage
from quotree.trees import Forest

__all__ = ["Lifted", "PodIntake"]


class Lifted(NamedTuple):
    """A pod taken out of its quotas by `PodIntake.move`'s first half, to be put in again."""

    record: PodRecord
    admitted: bool  # it was admitted: it stays admitted, on its flavor
    evicting: bool  # it was being evicted: it still is


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
                self.move(record, facts)
                return record
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
        record = PodRecord(facts, None, PodState.PENDING, next(self._ledger.arrivals))
        self._ledger.pods[key] = record
        self._ledger.by_namespace.setdefault(facts.namespace, set()).add(key)
        self._put_in(record, running=not facts.gated)
        return record

    def forget(self, key: str) -> PodRecord | None:
        """The pod is gone (deleted, finished, evicted); returns what the engine knew of it."""
        record = self._ledger.pods.pop(key, None)
        if record is None:
            return None
        self._ledger.by_namespace[record.facts.namespace].discard(key)
        if key in self._ledger.evicting:
            self._ledger.evicting.discard(key)
            self._ledger.eviction_changes += 1  # a victim gone: the evictions under way changed
        self._take_out(record)
        return record

    def move(self, record: PodRecord, facts: PodFacts | None = None) -> None:
        """Charge a pod anew where the configuration puts it now (its quota in every tree,
        its flavor), with its new `facts` if they changed: what it is charged leaves the
        quotas it was in and goes to the new ones. The record stays: an admitted pod stays
        admitted, on its flavor, in its place in the in-quota order, being evicted if it was;
        a pending pod is placed again."""
        self.land(self._lift(record), facts)

    def lift(self, name: str) -> list[Lifted]:
        """`move`'s first half for every pod charged to quota `name`, which is about to move
        to another tree: taken out of its quotas (the ledger keeps the record); `land` puts
        each in again once the quota has moved."""
        return [
            self._lift(record)
            for record in list(self._ledger.pods.values())
            if name == record.quota or name in record.also
        ]

    def land(self, lifted: Lifted, facts: PodFacts | None = None) -> None:
        """`move`'s second half: the pod, taken out of its quotas, charged where it resolves
        now; an admitted one stays admitted, on its flavor and in its place in the order."""
        record = lifted.record
        if facts is not None:
            record.facts = facts
        if lifted.admitted and record.facts.gated:
            # It runs without the gate (its removal may not be seen yet).
            record.facts = dataclasses.replace(record.facts, gated=False)
        flavor = record.flavor if lifted.admitted else None
        record.preemptible = record.facts.preemptible
        record.flavor, record.charged, record.charged_in = None, None, None
        record.flavor_needed, record.placing, record.reason_key = False, None, None
        record.victims = frozenset()
        self._put_in(record, running=lifted.admitted or not record.facts.gated, flavor=flavor)
        if lifted.evicting and record.state is PodState.ADMITTED:
            self._ledger.set_evicting(record, True)

    def _lift(self, record: PodRecord) -> Lifted:
        admitted = record.state is PodState.ADMITTED
        evicting = admitted and record.evicting
        if evicting:
            self._ledger.set_evicting(record, False)
        self._take_out(record)
        return Lifted(record, admitted, evicting)

    def _put_in(self, record: PodRecord, *, running: bool, flavor: str | None = None) -> None:
        """Charge a pod (new, or taken out by `move`) to the quotas that cover it now, in
        every tree: queued, or admitted when `running` (on `flavor` if its quota has it);
        unmanaged when no tree covers it (a bound one holds capacity)."""
        facts, key = record.facts, record.key
        resolution = self._coverage.resolve(facts.namespace, facts.labels)
        quota = resolution.quota
        if quota is None and (resolution.error is None or running):
            record.quota, record.also, record.state = None, (), PodState.UNMANAGED
            record.standing = None
            if facts.node_name:
                record.charged = self._cluster.unmanaged_charge(facts)
                self._cluster.add_unmanaged(record.request)
            return
        record.quota, record.also = quota, resolution.others
        if record.state is PodState.UNMANAGED:
            record.state = PodState.PENDING
        grouped = self._ledger.grouped.get(key)
        if grouped is not None:
            record.group, record.rank = grouped
        if quota is None:
            # Gated, but no quota will take it (its label names a deleted quota, its
            # namespace became ambiguous): it waits, says why, and is counted.
            record.state = PodState.PENDING
            record.reason = f"cannot be charged to a quota: {resolution.error}"
            self._ledger.unresolved[key] = record
            self._ledger.unannounced[key] = record.reason
            return
        pods = self._ledger.queue(quota)
        self._charge_new(record, flavor)
        self._forest.tree_of(quota).add_request(quota, record.request)
        self._ledger.touched.add(quota)
        for other in record.also:
            other_pods = self._ledger.queue(other)
            self._forest.tree_of(other).add_request(other, record.request_in(other))
            if not running:
                other_pods.add_also_pending(record)
        if not running:
            record.state = PodState.PENDING
            pods.enqueue(record)
            if self._placement.hold_pending(record):
                return  # its quotas' holds are synced on its flavors already
        else:
            # A pod that was admitted keeps its place in the in-quota order.
            seq = record.admitted_seq if record.state is PodState.ADMITTED else 0
            record.state = PodState.PENDING
            if record.standing is None:  # what it shows: relabelled only if that is wrong
                record.standing = facts.labels.get(STANDING_LABEL)
            self._decider.admit(record, "running without the gate", seq=seq)
        self._holds.changed((quota, *record.also), _charged_names(record))

    def _take_out(self, record: PodRecord) -> None:
        """Give back what the pod holds where it is charged now (the ledger keeps the record)."""
        key = record.key
        self._ledger.unresolved.pop(key, None)
        self._ledger.unannounced.pop(key, None)
        if record.quota is None:
            if record.state is PodState.UNMANAGED and record.facts.node_name:
                self._cluster.add_unmanaged(record.request, -1)
            return
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
            return  # its quotas' holds are synced on its flavors already
        self._holds.changed((record.quota, *record.also), _charged_names(record))

    def eviction_refused(self, key: str) -> None:
        """The Eviction API said no (a PodDisruptionBudget): the pod stays; try again later."""
        record = self._ledger.pods.get(key)
        if record is not None and record.evicting:
            self._ledger.set_evicting(record, False)
            if record.quota:
                self._ledger.quota_pods[record.quota].room = None
                self._ledger.touched.add(record.quota)
                self._ledger.released_in.update(record.also)

    # ------------------------------------------------------------ charges

    def _charge_new(self, record: PodRecord, kept: str | None = None) -> None:
        """Which flavor a pod of a quota that splits its request by flavor is charged to.

        A gated pod starts on the first flavor it allows (the decider moves it to the
        first where it fits, `Placement.place`). A running pod stays where it
        is: `kept` (an admitted pod `move`d keeps its flavor), its `quotree.io/flavor`
        label, else the flavor of the node it is bound to, else the first flavor it allows.
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
            if kept in config.flavors:
                flavor = kept
            elif labelled in config.flavors:
                flavor = labelled
            elif on_node:
                flavor = on_node[0]
        if flavor is not None:
            record.flavor = flavor
            record.charged = self._placement.charge_on(record, config, flavor)
            self._placement.charge_others(record)

    def reresolve(self, namespaces: set[str]) -> None:
        """After a quota change, pods of the namespaces it covers (or covered) may move."""
        for namespace in sorted(namespaces):
            # In the order they arrived, so that what follows does not depend on hashing.
            keys = sorted(
                self._ledger.by_namespace.get(namespace, ()),
                key=lambda k: self._ledger.pods[k].arrival,
            )
            for key in keys:
                record = self._ledger.pods[key]
                now = self._coverage.resolve(record.facts.namespace, record.facts.labels)
                if now.quota != record.quota or now.others != record.also:
                    self.move(record)

    def recharge(self, quotas: set[str]) -> None:
        """Charge the pods of `quotas` again (their flavors or a flavor they name changed):
        admitted pods keep their flavor, pending pods are placed again (`move`)."""
        for quota in sorted(quotas):
            pods = self._ledger.quota_pods.get(quota)
            if pods is None:
                continue
            for key in [k for _, k in pods.pending] + list(pods.admitted):
                self.move(self._ledger.pods[key])


def _charged_names(record: PodRecord) -> list[str]:
    """The resources the pod is charged in any tree."""
    names = list(record.request)
    for charged in (record.charged_in or {}).values():
        names.extend(charged)
    return names
