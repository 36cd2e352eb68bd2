"""Cluster objects in: what the operator observes, turned into engine inputs.

`Inputs` keeps the live `quotree.Engine` current from three sources: the Kopf handlers
for cluster nodes, ResourceFlavors, Cohorts and ElasticQuotas (quotree_main), the
operator's own pod watch (podwatch.py) and the start-up listing (loading.py). It also keeps
what the other parts need to write back: each pod's gates and uid (actuator.py), each
quota object's kind and namespace and whether its spec could be read (status_writer.py).
Every change raises `Signals.changed()`; no API write starts here.

The cluster, not the engine's memory, is the truth about admission: a pod shown with the
admission gate is pending, one shown without it is admitted. The one exception is a pod
whose gate removal the actuator has asked for and the cluster does not show yet
(`Inputs.admitting`): a gated view of it may be older than the write, so the engine's
admission stands until the watch shows the gate gone, the pod is gone, or a read after a
failed write shows the gate still there (actuator.py). Every other pod the engine counts
as admitted while the cluster shows it gated goes back to pending at once
(`Inputs.observe_pod`, on every watch event and on every list).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.capacity import node_allocatable
from quotree.create_admission import RESERVATION_ANNOTATION, CreateAdmission
from quotree.engine import Engine, PodState
from quotree.flavor_spec import parse_flavor
from quotree.group_book import GroupBook
from quotree.models import ADMISSION_GATE, ConfigError, parse_member
from quotree.podfacts import PodFacts
from quotree_operator.desired_status import StatusDirty, StatusMemory
from quotree_operator.in_use import CohortsInUse
from quotree_operator.pod_entries import PodEntry, pod_entry, pod_key

__all__ = ["Inputs", "PodHandle", "QuotaObject", "Signals", "object_key"]

logger = logging.getLogger("quotree.operator")


@dataclass(slots=True)
class Signals:
    """What wakes the operator's loops, and whether this replica acts (leader.py)."""

    #: Set on every input change: the decision loop decides again.
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set when statuses may have changed: the status writer compares again.
    status_dirty: asyncio.Event = field(default_factory=asyncio.Event)
    #: This replica holds the leader Lease: only then are decisions carried out.
    leading: bool = False
    #: Set once this replica, leading, has decided (and handed the admissions to the
    #: actuator); cleared when the leadership changes. The status writer's first round
    #: waits for it, so admissions never wait for statuses (status_writer.py).
    decided: asyncio.Event = field(default_factory=asyncio.Event)
    #: Gates removed so far (the actuator counts them): the status writer spaces its
    #: rounds further apart while admissions go on.
    admissions: int = 0
    #: Cohort / ElasticQuota changes the engine took in: which namespaces are managed can
    #: only change with them (or with the namespaces themselves).
    config_changes: int = 0

    def changed(self) -> None:
        self.wake.set()
        self.status_dirty.set()


@dataclass(slots=True)
class PodHandle:
    """What the actuator needs to write to a pod besides the engine's facts."""

    uid: str | None
    gates: tuple[str, ...]
    has_labels: bool
    has_node_selector: bool = False


@dataclass(frozen=True, slots=True)
class QuotaObject:
    """Where a Cohort's or ElasticQuota's status is written (and its Events point)."""

    kind: str
    namespace: str | None
    name: str = ""
    uid: str | None = None

    @property
    def key(self) -> str:
        """One object, even when another of another kind or namespace has its name."""
        return object_key(self.kind, self.namespace, self.name)


def object_key(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind}/{namespace or ''}/{name}"


class Inputs:
    """See module docstring."""

    def __init__(
        self,
        engine: Engine,
        memory: StatusMemory,
        signals: Signals,
        book: GroupBook | None = None,
        in_use: CohortsInUse | None = None,
    ) -> None:
        self.engine = engine
        #: Told of every Cohort's metadata (its finalizers, its deletionTimestamp).
        self.in_use = in_use
        #: The Jobs and group declarations the webhooks read (jobs.py fills in the Jobs).
        self.book = book if book is not None else GroupBook()
        self.memory = memory
        self.signals = signals
        self.pods: dict[str, PodHandle] = {}  # pod key -> handle, for pods not finished
        #: Pods whose gate removal was asked for (actuator.py) and not yet seen done: see
        #: the module docstring. Added when the engine's admission is handed to the
        #: actuator; removed when the cluster shows the pod ungated or gone, or when a read
        #: after a failed write shows it still gated.
        self.admitting: set[str] = set()
        #: QuotaObject.key -> object: two objects that share a name (the webhook was
        #: bypassed) are both here, and both get their status written.
        self.quota_objects: dict[str, QuotaObject] = {}
        self.bad_specs: dict[str, str] = {}  # tree member name -> why its spec cannot be read
        #: tree member name -> the QuotaObject.keys of the objects of that name
        self.keys_by_name: dict[str, set[str]] = {}
        #: Which statuses may have changed (status_writer.py takes it each round).
        self.dirty = StatusDirty()
        #: resourceVersion of the start-up's Cohort and ElasticQuota lists (loading.py): their
        #: watches start there.
        self.list_versions: dict[str, str] = {}
        #: "namespace/job" -> its pods not finished (jobs.py resumes an evicted Job when
        #: none is left).
        self.job_pods: dict[str, set[str]] = {}
        self._pod_jobs: dict[str, str] = {}  # pod key -> "namespace/job", for those pods
        #: Told of each pod admitted at its creation once the cluster shows it (the
        #: actuator's Admitted event).
        self.on_created: Callable[[str, CreateAdmission], None] | None = None

    def observe_cluster_node(self, body: Mapping[str, Any], deleted: bool) -> None:
        """A Kubernetes Node was added, changed or deleted: the cluster's capacity.

        Whether and for how much it counts is the engine's rule (quotree/capacity.py).
        """
        name = body["metadata"]["name"]
        if deleted:
            self.engine.set_cluster_node(name, None)
        else:
            capacity = node_allocatable(body)
            for warning in capacity.warnings:
                logger.warning("%s", warning)
            labels = body["metadata"].get("labels") or {}
            self.engine.set_cluster_node(name, capacity.allocatable, labels)
        self.signals.changed()

    def observe_flavor(self, body: Mapping[str, Any], deleted: bool) -> None:
        """A ResourceFlavor was added, changed or deleted."""
        name = body["metadata"]["name"]
        if deleted:
            self.engine.remove_flavor(name)
        else:
            try:
                flavor = parse_flavor(body)
            except ConfigError as exc:
                logger.warning("%s; it is left out until it is fixed", exc)
                self.engine.remove_flavor(name)
            else:
                self.engine.set_flavor(flavor)
        self.signals.changed()

    def observe_quota_object(self, body: Mapping[str, Any], deleted: bool) -> None:
        """A Cohort or ElasticQuota was added, changed or deleted."""
        metadata = body["metadata"]
        name = metadata["name"]
        identity = {"kind": body["kind"], "namespace": metadata.get("namespace")}
        obj = QuotaObject(body["kind"], metadata.get("namespace"), name, metadata.get("uid"))
        if obj.kind == "Cohort" and self.in_use is not None and self.in_use.observe(body, deleted):
            self.signals.wake.set()  # the decision loop compares its finalizer
        if deleted:
            self.dirty.all()
            self.engine.remove_config(name, **identity)
            self.quota_objects.pop(obj.key, None)
            self.keys_by_name.get(name, set()).discard(obj.key)
            self.bad_specs.pop(name, None)
            self.memory.forget(obj.key)
        else:
            key_new = obj.key not in self.quota_objects
            self.quota_objects[obj.key] = obj
            self.keys_by_name.setdefault(name, set()).add(obj.key)
            self.memory.remember_object(obj.key, body)
            try:
                config = parse_member(body)
            except ConfigError as exc:
                logger.warning("%s", exc)
                self.dirty.all()
                self.bad_specs[name] = str(exc)
                self.engine.remove_config(name, **identity)
            else:
                self.bad_specs.pop(name, None)
                if self.engine.tree_of(name).config(name) == config:
                    # Our own status or annotation write came back: nothing for the engine
                    # (set_config would re-resolve every pod, once per status write).
                    if key_new:
                        self.dirty.add(name)  # a second object of the name: compare it
                    return
                self.dirty.all()
                self.engine.set_config(config)
        self.signals.config_changes += 1
        self.signals.changed()

    def observe_pod(self, body: Mapping[str, Any], deleted: bool, *, read: bool = False) -> None:
        """A Pod was added, changed or deleted (from the pod watch or list, or a `read`).

        The watch and lists show a pod's versions in order; a read (actuator.py) may be
        newer than what the watch shows next, so only the watch or a list confirms that
        a gate removal is done.
        """
        token = (body["metadata"].get("annotations") or {}).get(RESERVATION_ANNOTATION)
        if token is not None and token in self.engine.created:
            self._arrived(body, token, deleted)
            return
        if deleted:
            self.forget_pod(pod_key(body))
            self.signals.changed()
            return
        self.take_pod(pod_entry(body), read=read)

    def _arrived(self, body: Mapping[str, Any], token: str, deleted: bool) -> None:
        """The pod of a reservation made at its creation (create_admitter.py) is here: the
        reservation gives its room back and the pod, admitted, takes it, in one step."""
        admission = self.engine.created.take(token)
        assert admission is not None
        self.dirty.add(admission.quota)
        key = pod_key(body)
        if deleted:
            self.forget_pod(key)
            self.signals.changed()
            return
        self.take_pod(pod_entry(body))
        record = self.engine.pods.get(key)
        if self.on_created is not None and record is not None:
            self.on_created(key, admission)

    def take_pod(self, entry: PodEntry, *, read: bool = False) -> None:
        """A Pod added or changed, as `pod_entries.pod_entry` read it (here, or in the
        start-up's helper process: pod_reader.py); `read` as for `observe_pod`."""
        facts = entry.facts
        if facts is None:
            logger.warning("%s", entry.problem)
            return
        key = facts.key  # the same string, kept once for the engine and here
        before = self._counted_as(key)
        gates = entry.gates
        if facts.terminal:
            self.pods.pop(key, None)
            self.admitting.discard(key)
            self._job_pod_gone(key)
        else:
            if facts.owner_job is not None and key not in self._pod_jobs:
                job = self._pod_jobs[key] = f"{facts.namespace}/{facts.owner_job}"
                self.job_pods.setdefault(job, set()).add(key)
            self.pods[key] = PodHandle(entry.uid, gates, entry.has_labels, entry.has_node_selector)
            if ADMISSION_GATE not in gates and not read:
                self.admitting.discard(key)  # the gate removal is done
        self.engine.observe_pod(facts)
        self._declare(facts)
        self._match_gate(facts)
        self.status_changed(before, self._counted_as(key), facts.namespace)
        self.signals.changed()

    def _counted_as(self, key: str) -> tuple[Any, ...] | None:
        """What of the pod's record the statuses count: quotas, state, evicting, and the
        quota that counts it while its group holds it (`GroupLedger.held_quota`)."""
        record = self.engine.pods.get(key)
        if record is None:
            return None
        held = self.engine.group_ledger.held_quota.get(key) if record.quota is None else None
        return (record.quota, record.also, record.state, record.evicting, held)

    def status_changed(
        self, before: tuple[Any, ...] | None, after: tuple[Any, ...] | None, namespace: str
    ) -> None:
        """A pod's record went from `before` to `after`: the quotas whose statuses count it
        (the ones covering its namespace, when no quota takes it) may show other numbers."""
        if before == after:
            return
        for counted in (before, after):
            if counted is None:
                continue
            quota, also, state, _, held = counted
            if quota is None:
                if held is not None:  # kept by its incomplete group: counted there only
                    self.dirty.add(held)
                elif state is PodState.PENDING:  # unresolved: pending in the covering quotas
                    for tree in self.engine.trees:
                        for name in self.engine.covering(namespace, tree):
                            self.dirty.add(name)
                continue
            self.dirty.add(quota)
            for other in also:
                self.dirty.add(other)

    def _match_gate(self, facts: PodFacts) -> None:
        """A gated pod is pending: undo an admission the cluster does not show (module doc)."""
        record = self.engine.pods.get(facts.key)
        if (
            record is None
            or record.state is not PodState.ADMITTED
            or not facts.gated
            or facts.key in self.admitting
        ):
            return
        logger.info(
            "pod %s: counted as admitted but still gated in the cluster; it waits again",
            facts.key,
        )
        self.engine.forget_pod(facts.key)
        self.engine.observe_pod(facts)

    def release(self, key: str) -> None:
        """No gate removal of ours is under way for the pod any more: its last view decides."""
        self.admitting.discard(key)
        record = self.engine.pods.get(key)
        if record is not None:
            before = self._counted_as(key)
            self._match_gate(record.facts)
            self.status_changed(before, self._counted_as(key), record.facts.namespace)
            self.signals.changed()

    def forget_pod(self, key: str) -> None:
        """The pod is gone (deleted, or a read found no such pod)."""
        before = self._counted_as(key)
        record = self.engine.forget_pod(key)
        if record is not None:
            self.status_changed(before, None, record.facts.namespace)
            self._declare(record.facts)
        self._job_pod_gone(key)
        self.pods.pop(key, None)
        self.admitting.discard(key)

    def _declare(self, facts: PodFacts) -> None:
        """What the pod's group declares now, for the webhooks (group_book.py)."""
        name = facts.pod_group or (facts.group.name if facts.group is not None else facts.owner_job)
        if name is not None:
            declared = self.engine.group_declaration(facts.namespace, name)
            self.book.declare(f"{facts.namespace}/{name}", declared)

    def _job_pod_gone(self, key: str) -> None:
        job = self._pod_jobs.pop(key, None)
        pods = self.job_pods.get(job or "")
        if job is not None and pods is not None:
            pods.discard(key)
            if not pods:
                del self.job_pods[job]

    def relist_quota_objects(self, kind: str, bodies: list[dict[str, Any]]) -> None:
        """The watch of `kind` had to list again (410 Gone): forget the objects that went
        meanwhile, take in the others."""
        listed = {
            object_key(kind, (b.get("metadata") or {}).get("namespace"), b["metadata"]["name"])
            for b in bodies
        }
        for key, obj in list(self.quota_objects.items()):
            if obj.kind == kind and key not in listed:
                gone = {"kind": kind, "metadata": {"name": obj.name, "namespace": obj.namespace}}
                self.observe_quota_object(gone, deleted=True)
        for body in bodies:
            self.observe_quota_object(body, deleted=False)
        logger.info("%s watch: listed %d objects again", kind, len(bodies))

    def relist_pods(self, bodies: list[dict[str, Any]]) -> None:
        """The pod watch had to list again (410 Gone): forget pods that went meanwhile."""
        listed = {pod_key(body) for body in bodies}
        for key in [key for key in self.engine.pods if key not in listed]:
            self.forget_pod(key)
        for body in bodies:
            self.observe_pod(body, deleted=False)
        logger.info("pod watch: listed %d pods again", len(bodies))
        self.signals.changed()
