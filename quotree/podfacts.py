"""What the engine needs to know about a pod, read from a Pod object.

Why a module of its own: every shell (operator, webhooks, simulator, plugin)
reads pods the same way, through `pod_facts`, and the engine sees nothing
else of them. The effective-request rule is Kubernetes' own: containers
summed, init containers by peak with the sidecars started before them,
sidecars beside the containers, overhead on top, a limit without a request
counting as the request.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from quotree.groups import (
    POD_GROUP_MIN_ANNOTATION,
    POD_GROUP_SIZE_ANNOTATION,
    GroupSpec,
    controller_job,
    group_spec,
)
from quotree.models import ADMISSION_GATE, PREEMPTIBLE_LABEL, ConfigError
from quotree.native_groups import pod_group_name
from quotree.quantity import QuantityError, add_amounts, parse_quantity

__all__ = [
    "NodeSelectorTerm",
    "PodFacts",
    "effective_request",
    "facts_from_wire",
    "facts_to_wire",
    "pod_facts",
    "shared_request",
]


#: One term of a required node affinity: (key, operator, values) expressions, all must hold.
NodeSelectorTerm = tuple[tuple[str, str, tuple[str, ...]], ...]


@dataclass(slots=True)
class PodFacts:
    """What the engine needs to know about one pod."""

    namespace: str
    name: str
    request: dict[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    priority: int = 0
    created: float = 0.0
    node_name: str | None = None
    phase: str = "Pending"
    gated: bool = False
    deleting: bool = False
    #: spec.nodeSelector, and the required node affinity's terms (ORed), each a tuple of
    #: (key, operator, values) expressions (ANDed): which flavors the pod allows.
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    #: The pod group it declares (`groups.group_spec`), None when on its own or when its
    #: group comes from its Job (`owner_job`), which only the Job's facts complete.
    group: GroupSpec | None = None
    #: The `batch/v1` Job that controls it, if one does.
    owner_job: str | None = None
    #: Its pod-group annotations (size, min) as written; most pods have none.
    group_notes: Mapping[str, str] = field(default_factory=dict)
    #: The Kubernetes PodGroup it names (`spec.schedulingGroup.podGroupName`), if any: that
    #: group, when it is a gang, is its group (native_groups.py).
    pod_group: str | None = None
    #: `spec.preemptionPolicy: Never` (from its PriorityClass): it never preempts by priority.
    never_preempts: bool = False

    #: `key`, made once: every map of the engine and the operator holds this one string
    #: (a new string per lookup would be ~120 bytes a pod at 30,000 pods).
    _key: str = field(default="", init=False, repr=False, compare=False)

    @property
    def key(self) -> str:
        key = self._key
        if not key:
            key = self._key = sys.intern(f"{self.namespace}/{self.name}")
        return key

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def preemptible(self) -> bool:
        return self.labels.get(PREEMPTIBLE_LABEL, "true").lower() != "false"


def _container_requests(container: Mapping[str, Any], pod_label: str) -> dict[str, int]:
    """A container's requests; a limit without a request counts as the request (API defaulting)."""
    resources = container.get("resources") or {}
    requests = dict(resources.get("limits") or {})
    requests.update(resources.get("requests") or {})
    out: dict[str, int] = {}
    for name, value in requests.items():
        try:
            out[sys.intern(name)] = parse_quantity(value, name)
        except QuantityError as exc:
            cname = container.get("name", "?")
            raise ConfigError(
                f"Pod {pod_label}: container {cname} resources {name}: {exc}"
            ) from None
    return out


def _max_into(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > into.get(name, 0):
            into[name] = amount


def effective_request(pod_spec: Mapping[str, Any], pod_label: str = "?") -> dict[str, int]:
    """The pod's effective request by the Kubernetes rule.

    Regular containers are summed; each regular init container counts with the
    sidecars (init containers with restartPolicy Always) started before it, and
    the pod needs the largest of those moments; sidecars keep running beside
    the regular containers; the pod overhead is added on top.
    """
    running: dict[str, int] = {}
    for container in pod_spec.get("containers") or ():
        add_amounts(running, _container_requests(container, pod_label))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in pod_spec.get("initContainers") or ():
        requests = _container_requests(container, pod_label)
        if container.get("restartPolicy") == "Always":
            add_amounts(sidecars, requests)
            _max_into(init_peak, sidecars)
        else:
            moment = dict(sidecars)
            add_amounts(moment, requests)
            _max_into(init_peak, moment)
    add_amounts(running, sidecars)
    _max_into(running, init_peak)
    overhead = pod_spec.get("overhead") or {}
    for name, value in overhead.items():
        try:
            running[name] = running.get(name, 0) + parse_quantity(value, name)
        except QuantityError as exc:
            raise ConfigError(f"Pod {pod_label}: overhead {name}: {exc}") from None
    return {name: amount for name, amount in running.items() if amount > 0}


#: One dict per distinct request, shared by the pods that ask it (a Deployment's or a Job's
#: pods ask the same): a request dict is never changed once made (what a pod is charged
#: elsewhere is a dict of its own, `PodRecord.charged`). Up to `_SHARED_KEPT` distinct
#: requests are kept; a request beyond them keeps a dict of its own.
_SHARED: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
_SHARED_KEPT = 4096


def shared_request(request: dict[str, int]) -> dict[str, int]:
    """The dict equal to `request` that earlier pods hold, else `request` itself (kept for
    the next pods): about 120 bytes less for each pod that asks what another asked."""
    key = tuple(request.items())
    found = _SHARED.get(key)
    if found is not None:
        return found
    if len(_SHARED) < _SHARED_KEPT:
        _SHARED[key] = request
    return request


def _timestamp(value: object) -> float | None:
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.timestamp()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _affinity_terms(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """The required node affinity's matchExpressions, term by term (matchFields are left out:
    they name nodes, not kinds of nodes)."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or ():
        terms.append(
            tuple(
                (
                    str(expr.get("key", "")),
                    str(expr.get("operator", "")),
                    tuple(str(v) for v in expr.get("values") or ()),
                )
                for expr in (term or {}).get("matchExpressions") or ()
            )
        )
    return tuple(terms)


def _interned(labels: Mapping[str, Any]) -> dict[str, Any]:
    """The labels with their keys and string values kept once (thousands of pods repeat them)."""
    return {sys.intern(k): sys.intern(v) if type(v) is str else v for k, v in labels.items()}


#: The node selector of every pod that has none (read-only, shared).
_NO_SELECTOR: Mapping[str, str] = MappingProxyType({})


def pod_facts(obj: Mapping[str, Any], *, default_created: float = 0.0) -> PodFacts:
    """Read a Pod object (a dict as the API serves it) into PodFacts."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    namespace = metadata.get("namespace") or "default"
    name = metadata.get("name") or metadata.get("generateName") or "?"
    label = f"{namespace}/{name}"
    created = _timestamp(metadata.get("creationTimestamp"))
    gates = spec.get("schedulingGates") or ()
    priority = spec.get("priority")
    node_name = spec.get("nodeName") or None
    selector = spec.get("nodeSelector")
    labels = _interned(metadata.get("labels") or {})
    annotations = metadata.get("annotations") or {}
    notes: Mapping[str, str] = _NO_SELECTOR  # the same shared empty map
    if POD_GROUP_SIZE_ANNOTATION in annotations or POD_GROUP_MIN_ANNOTATION in annotations:
        notes = {
            k: str(annotations[k])
            for k in (POD_GROUP_SIZE_ANNOTATION, POD_GROUP_MIN_ANNOTATION)
            if k in annotations
        }
    owner = controller_job(obj)
    native = pod_group_name(spec)
    try:
        group = group_spec(labels, notes, f"Pod {label}")
    except ConfigError:
        if owner is None and native is None:
            raise
        group = None  # its Job's facts or its PodGroup complete it
    # Strings that thousands of pods repeat are kept once (interned): namespaces, label
    # keys and values, node names, phases, resource names (memory per pod); pods
    # that ask the same share one request dict (`shared_request`).
    return PodFacts(
        namespace=sys.intern(namespace),
        name=name,
        request=shared_request(effective_request(spec, label)),
        labels=labels,
        priority=int(priority) if isinstance(priority, int) else 0,
        created=default_created if created is None else created,
        node_name=sys.intern(node_name) if isinstance(node_name, str) else None,
        phase=sys.intern(status.get("phase") or "Pending"),
        gated=any(gate.get("name") == ADMISSION_GATE for gate in gates),
        deleting=bool(metadata.get("deletionTimestamp")),
        node_selector={str(k): str(v) for k, v in selector.items()} if selector else _NO_SELECTOR,
        node_affinity=_affinity_terms(spec),
        group=group,
        owner_job=sys.intern(owner) if owner else None,
        group_notes=notes,
        pod_group=sys.intern(native) if native else None,
        never_preempts=spec.get("preemptionPolicy") == "Never",
    )


#: `PodFacts` as plain values (`facts_to_wire`), for a process that reads pods for another.
Wire = tuple[Any, ...]


def facts_to_wire(facts: PodFacts) -> Wire:
    """The pod's facts as a tuple of plain values that pickle cheaply (the operator's
    start-up reads its pod list in a helper process: quotree_operator/pod_reader.py)."""
    return (
        facts.namespace,
        facts.name,
        facts.request,
        facts.labels,
        facts.priority,
        facts.created,
        facts.node_name,
        facts.phase,
        facts.gated,
        facts.deleting,
        facts.node_selector or None,  # the shared empty map does not pickle
        facts.node_affinity,
        facts.group,
        facts.owner_job,
        facts.group_notes or None,
        facts.pod_group,
        facts.never_preempts,
    )


def facts_from_wire(wire: Wire) -> PodFacts:
    """`facts_to_wire` undone, with the strings that many pods repeat kept once again and
    the request shared, as `pod_facts` keeps them."""
    (
        namespace,
        name,
        request,
        labels,
        priority,
        created,
        node_name,
        phase,
        gated,
        deleting,
        selector,
        affinity,
        group,
        owner,
        notes,
        pod_group,
        never_preempts,
    ) = wire
    intern = sys.intern
    return PodFacts(
        namespace=intern(namespace),
        name=name,
        request=shared_request({intern(k): v for k, v in request.items()}),
        labels=_interned(labels),
        priority=priority,
        created=created,
        node_name=intern(node_name) if node_name is not None else None,
        phase=intern(phase),
        gated=gated,
        deleting=deleting,
        node_selector=selector if selector is not None else _NO_SELECTOR,
        node_affinity=affinity,
        group=group,
        owner_job=intern(owner) if owner is not None else None,
        group_notes=notes if notes is not None else _NO_SELECTOR,
        pod_group=intern(pod_group) if pod_group is not None else None,
        never_preempts=never_preempts,
    )
