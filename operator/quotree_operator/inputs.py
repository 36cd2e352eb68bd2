"""Cluster objects in: what the operator observes, turned into engine inputs.

`Inputs` keeps the live `quotree.Engine` current from three sources: the Kopf handlers
for cluster nodes, ResourceFlavors, Cohorts and ElasticQuotas (quotree_main), the
operator's own pod watch (podwatch.py) and the start-up listing (`load`). It also keeps
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.capacity import node_allocatable
from quotree.engine import Engine, PodState
from quotree.models import (
    ADMISSION_GATE,
    ConfigError,
    PodFacts,
    parse_flavor,
    parse_node,
    pod_facts,
)
from quotree_operator.client import Kube
from quotree_operator.status import StatusMemory

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


def pod_key(body: Mapping[str, Any]) -> str:
    metadata = body["metadata"]
    return f"{metadata.get('namespace')}/{metadata['name']}"


class Inputs:
    """See module docstring."""

    def __init__(self, engine: Engine, memory: StatusMemory, signals: Signals) -> None:
        self.engine = engine
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
        self.bad_specs: dict[str, str] = {}  # tree node name -> why its spec cannot be read

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
        if deleted:
            self.engine.remove_config(name, **identity)
            self.quota_objects.pop(obj.key, None)
            self.bad_specs.pop(name, None)
            self.memory.forget(obj.key)
        else:
            self.quota_objects[obj.key] = obj
            self.memory.remember_object(obj.key, body)
            try:
                config = parse_node(body)
            except ConfigError as exc:
                logger.warning("%s", exc)
                self.bad_specs[name] = str(exc)
                self.engine.remove_config(name, **identity)
            else:
                self.bad_specs.pop(name, None)
                if self.engine.tree_of(name).config(name) == config:
                    # Our own status or annotation write came back: nothing for the engine
                    # (set_config would re-resolve every pod, once per status write).
                    return
                self.engine.set_config(config)
        self.signals.config_changes += 1
        self.signals.changed()

    def observe_pod(self, body: Mapping[str, Any], deleted: bool, *, read: bool = False) -> None:
        """A Pod was added, changed or deleted (from the pod watch or list, or a `read`).

        The watch and lists show a pod's versions in order; a read (actuator.py) may be
        newer than what the watch shows next, so only the watch or a list confirms that
        a gate removal is done.
        """
        key = pod_key(body)
        if deleted:
            self.forget_pod(key)
        else:
            try:
                facts = pod_facts(body)
            except ConfigError as exc:
                logger.warning("%s", exc)
                return
            metadata = body["metadata"]
            spec = body.get("spec") or {}
            gates = tuple(g.get("name", "") for g in spec.get("schedulingGates") or ())
            if facts.terminal:
                self.pods.pop(key, None)
                self.admitting.discard(key)
            else:
                self.pods[key] = PodHandle(
                    metadata.get("uid"),
                    gates,
                    metadata.get("labels") is not None,
                    spec.get("nodeSelector") is not None,
                )
                if ADMISSION_GATE not in gates and not read:
                    self.admitting.discard(key)  # the gate removal is done
            self.engine.observe_pod(facts)
            self._match_gate(facts)
        self.signals.changed()

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
            self._match_gate(record.facts)
            self.signals.changed()

    def forget_pod(self, key: str) -> None:
        """The pod is gone (deleted, or a read found no such pod)."""
        self.engine.forget_pod(key)
        self.pods.pop(key, None)
        self.admitting.discard(key)

    def relist_pods(self, bodies: list[dict[str, Any]]) -> None:
        """The pod watch had to list again (410 Gone): forget pods that went meanwhile."""
        listed = {pod_key(body) for body in bodies}
        for key in [key for key in self.engine.pods if key not in listed]:
            self.forget_pod(key)
        for body in bodies:
            self.observe_pod(body, deleted=False)
        logger.info("pod watch: listed %d pods again", len(bodies))
        self.signals.changed()

    async def load(self, kube: Kube) -> str:
        """Rebuild the engine from the API before the watches start (restart safety).

        Cluster nodes and quota objects first, so that pods find their quotas and capacity.
        Returns the resourceVersion of the pod list, for the pod watch to start from.
        """
        for body in await kube.list_all("ResourceFlavor"):
            self.observe_flavor(body, deleted=False)
        for body in await kube.list_all("nodes"):
            self.observe_cluster_node(body, deleted=False)
        for kind in ("Cohort", "ElasticQuota"):
            for body in await kube.list_all(kind):
                self.observe_quota_object(body, deleted=False)
        pods, version = await kube.list_with_version("pods")
        for body in pods:
            self.observe_pod(body, deleted=False)
        logger.info(
            "loaded %d quota objects and %d pods from the API", len(self.quota_objects), len(pods)
        )
        return version
