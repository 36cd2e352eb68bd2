"""The objects users write, as pydantic models, and the parsed forms the engine uses.

`CohortSpec` and `ElasticQuotaSpec` are the single source of the CRD schemas
(crds/ is generated from them and a test fails if the two drift) and of what
the webhooks accept. `NodeConfig` is the same spec parsed into integers in
base units; `PodFacts` is what the engine needs to know about a pod.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from quotree.quantity import QuantityError, add_amounts, parse_quantity
from quotree.spec_errors import one_line, validation_message

__all__ = [
    "ADMISSION_GATE",
    "CAPACITY_LABEL",
    "DEFAULT_TREE",
    "FLAVOR_LABEL",
    "GPU_MEMORY",
    "GROUP",
    "MAINTENANCE_ANNOTATION",
    "MANAGED_LABEL",
    "PREEMPTIBLE_LABEL",
    "QUOTA_LABEL",
    "VERSION",
    "CohortSpec",
    "ConfigError",
    "ElasticQuotaSpec",
    "FlavorConfig",
    "FlavorQuotaSpec",
    "NodeConfig",
    "NodeSelectorTerm",
    "PodFacts",
    "PreemptionSpec",
    "ResourceFlavorSpec",
    "effective_request",
    "flavored",
    "parse_flavor",
    "parse_node",
    "pod_facts",
    "quota_label",
]

GROUP = "quotree.io"
VERSION = "v1alpha1"
QUOTA_LABEL = "quotree.io/quota-name"
PREEMPTIBLE_LABEL = "quotree.io/preemptible"
CAPACITY_LABEL = "quotree.io/capacity"
ADMISSION_GATE = "quotree.io/admission"
#: The tree of a Cohort or ElasticQuota that sets no `spec.tree` (api.md, "Several trees").
DEFAULT_TREE = "default"
#: Tree names: a DNS label short enough that `quotree.io/quota-name.<tree>` is a label key.
_TREE_NAME = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,50}[a-z0-9])?$")


def quota_label(tree: str) -> str:
    """The pod label that picks the ElasticQuota a pod is charged to in `tree`."""
    return QUOTA_LABEL if tree == DEFAULT_TREE else f"{QUOTA_LABEL}.{tree}"


#: On a pod admitted to a flavor (api.md, "Resource flavors"): the flavor's name.
FLAVOR_LABEL = "quotree.io/flavor"
#: "true" on a top-level Cohort or ElasticQuota: maintenance mode for its subtree (MCAD's).
MAINTENANCE_ANNOTATION = "quotree.io/maintenance"
#: The derived resource a flavor with `gpuMemoryPerGPU` charges (nos's GPU memory).
GPU_MEMORY = "quotree.io/gpu-memory"
#: On every namespace some ElasticQuota covers (api.md, "Managed namespaces"); set and
#: removed by the operator only. The pod webhooks select namespaces by it.
MANAGED_LABEL = "quotree.io/managed"

Kind = Literal["Cohort", "ElasticQuota"]

# Kubernetes resource names: an optional DNS prefix and a qualified name.
_RESOURCE_NAME = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$")

Quantity = str | int | float
ResourceList = dict[str, Quantity]


class ConfigError(ValueError):
    """A Cohort or ElasticQuota that cannot be read; the message is one line for people."""


def _check_resource_list(value: ResourceList | None) -> ResourceList | None:
    if value is None:
        return value
    for name, amount in value.items():
        if not _RESOURCE_NAME.match(name):
            raise ValueError(f"{name!r} is not a resource name")
        try:
            parse_quantity(amount, name)
        except QuantityError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return value


class PreemptionSpec(BaseModel):
    """How pods of one quota may preempt each other."""

    model_config = ConfigDict(extra="forbid")

    withinQuota: Literal["LowerPriority", "Never"] = Field(
        default="LowerPriority",
        description="LowerPriority: a pending pod may evict lower-priority pods of its own quota.",
    )


class _ResourceLists(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min: ResourceList | None = Field(default=None, description="Guaranteed amounts.")
    max: ResourceList | None = Field(default=None, description="Ceiling; omitted: unlimited.")
    sharedWeight: ResourceList | None = Field(
        default=None,
        description="Weight for sharing idle quota; default max when set, else min, else 1.",
    )
    lendingLimit: ResourceList | None = Field(
        default=None, description="How much of the unused min may be lent; default all."
    )
    borrowingLimit: ResourceList | None = Field(
        default=None, description="How much above min may be borrowed; default unlimited."
    )

    _lists = field_validator("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit")(
        _check_resource_list
    )


class FlavorQuotaSpec(_ResourceLists):
    """One entry of `flavors`: a ResourceFlavor and this node's resource lists for it."""

    name: str = Field(description="A ResourceFlavor.")

    @field_validator("name")
    @classmethod
    def _flavor_name(cls, value: str) -> str:
        if not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a valid object name")
        return value


class _NodeSpec(_ResourceLists):
    parent: str | None = Field(
        default=None, description="The parent Cohort; omitted: a top-level node."
    )
    tree: str = Field(
        default=DEFAULT_TREE,
        description="The tree this node belongs to; each tree shares out the whole cluster.",
        json_schema_extra={"pattern": _TREE_NAME.pattern, "maxLength": 52},
    )
    flavors: list[FlavorQuotaSpec] | None = Field(
        default=None,
        description="Per ResourceFlavor, in order of preference: the resource lists of "
        "the resources this node splits by flavor (each charged as <resource>@<flavor>).",
    )

    @field_validator("flavors")
    @classmethod
    def _flavor_names_unique(
        cls, value: list[FlavorQuotaSpec] | None
    ) -> list[FlavorQuotaSpec] | None:
        seen: set[str] = set()
        for entry in value or ():
            if entry.name in seen:
                raise ValueError(f"flavor {entry.name} is listed twice")
            seen.add(entry.name)
        return value

    @field_validator("parent")
    @classmethod
    def _parent_name(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a valid object name")
        return value

    @field_validator("tree")
    @classmethod
    def _tree_name(cls, value: str) -> str:
        if not _TREE_NAME.match(value):
            raise ValueError(
                f"{value!r} is not a valid tree name (lower-case letters, digits and '-', "
                "at most 52 characters)"
            )
        return value


class ResourceFlavorSpec(BaseModel):
    """spec of a ResourceFlavor: a kind of cluster node (e.g. a GPU model)."""

    model_config = ConfigDict(extra="forbid")

    nodeLabels: dict[str, str] | None = Field(
        default=None,
        description="The labels of the nodes of this flavor; they count toward its capacity, "
        "and pods admitted to it get them as nodeSelector.",
    )
    gpuMemoryPerGPU: Quantity | None = Field(
        default=None,
        description="Memory of one GPU of this flavor (e.g. 80Gi): a pod admitted to it is "
        "also charged quotree.io/gpu-memory = its GPUs times this.",
    )
    gpuResource: str = Field(
        default="nvidia.com/gpu", description="The GPU resource gpuMemoryPerGPU derives from."
    )

    @field_validator("gpuMemoryPerGPU")
    @classmethod
    def _memory(cls, value: Quantity | None) -> Quantity | None:
        if value is not None:
            try:
                parse_quantity(value, GPU_MEMORY)
            except QuantityError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("gpuResource")
    @classmethod
    def _gpu_resource(cls, value: str) -> str:
        if not _RESOURCE_NAME.match(value):
            raise ValueError(f"{value!r} is not a resource name")
        return value


class CohortSpec(_NodeSpec):
    """spec of a Cohort: an inner node of the quota tree."""


class ElasticQuotaSpec(_NodeSpec):
    """spec of an ElasticQuota: a leaf of the quota tree that pods are charged to."""

    namespaces: list[str] | None = Field(
        default=None, description="More namespaces whose pods may use this quota."
    )
    preemption: PreemptionSpec | None = None

    @field_validator("namespaces")
    @classmethod
    def _namespace_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            if not _DNS_SUBDOMAIN.match(name):
                raise ValueError(f"{name!r} is not a valid namespace name")
        return value


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """A Cohort or ElasticQuota, parsed: every amount in base units."""

    kind: Kind
    name: str
    parent: str | None = None
    namespace: str | None = None
    min: Mapping[str, int] = field(default_factory=dict)
    max: Mapping[str, int] = field(default_factory=dict)
    shared_weight: Mapping[str, int] = field(default_factory=dict)
    lending_limit: Mapping[str, int] = field(default_factory=dict)
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()
    preempt_within_quota: bool = True
    tree: str = DEFAULT_TREE
    #: The ResourceFlavors of `spec.flavors`, in order. Their resource lists are merged
    #: into min, max, ... above under the names `<resource>@<flavor>`.
    flavors: tuple[str, ...] = ()
    #: The resources `spec.flavors` names (plain names): a pod's request for one of them
    #: is charged to a flavor.
    flavored_resources: frozenset[str] = frozenset()
    #: The annotation MAINTENANCE_ANNOTATION is "true" (it acts on top-level nodes).
    maintenance: bool = False

    @property
    def is_leaf(self) -> bool:
        return self.kind == "ElasticQuota"

    def covers(self, namespace: str) -> bool:
        """True when pods of `namespace` may be charged to this quota."""
        return self.is_leaf and (namespace == self.namespace or namespace in self.namespaces)

    def describe(self) -> str:
        return f"{self.kind} {self.name}"


def _parsed(values: ResourceList | None) -> dict[str, int]:
    return {name: parse_quantity(amount, name) for name, amount in (values or {}).items()}


def flavored(resource: str, flavor: str) -> str:
    """The tree resource of `resource` on `flavor`: `nvidia.com/gpu@a100`."""
    return f"{resource}@{flavor}"


def _lists_with_flavors(spec: _NodeSpec) -> dict[str, dict[str, int]]:
    """The node's five resource lists, its flavors' entries merged in as `<resource>@<flavor>`."""
    fields = ("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit")
    out = {f: _parsed(getattr(spec, f)) for f in fields}
    for entry in spec.flavors or ():
        for f in fields:
            for resource, amount in _parsed(getattr(entry, f)).items():
                out[f][flavored(resource, entry.name)] = amount
    return out


def parse_node(obj: Mapping[str, Any]) -> NodeConfig:
    """Parse a Cohort or ElasticQuota object (as `kubectl apply` sends it).

    Raises ConfigError with one line naming the object, the field and the problem.
    """
    kind = obj.get("kind")
    metadata = obj.get("metadata") or {}
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    label = one_line(f"{kind} {name}" if name else f"{kind or 'object'} (no name)")
    if kind not in ("Cohort", "ElasticQuota"):
        raise ConfigError(f"{label}: kind must be Cohort or ElasticQuota")
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name):
        raise ConfigError(f"{label}: metadata.name must be a valid object name")
    namespace = metadata.get("namespace")
    if kind == "ElasticQuota" and not namespace:
        raise ConfigError(f"{label}: an ElasticQuota needs metadata.namespace")
    spec_obj = obj.get("spec") or {}
    if not isinstance(spec_obj, Mapping):
        raise ConfigError(f"{label}: spec must be an object")
    model: type[_NodeSpec] = CohortSpec if kind == "Cohort" else ElasticQuotaSpec
    try:
        spec = model.model_validate(dict(spec_obj))
    except ValidationError as exc:
        raise ConfigError(f"{label}: {validation_message(exc)}") from None
    quota = spec if isinstance(spec, ElasticQuotaSpec) else None
    lists = _lists_with_flavors(spec)
    annotations = metadata.get("annotations") or {}
    fields = ("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit")
    return NodeConfig(
        kind=kind,
        name=name,
        parent=spec.parent,
        namespace=namespace if kind == "ElasticQuota" else None,
        min=lists["min"],
        max=lists["max"],
        shared_weight=lists["sharedWeight"],
        lending_limit=lists["lendingLimit"],
        borrowing_limit=lists["borrowingLimit"],
        flavors=tuple(entry.name for entry in spec.flavors or ()),
        flavored_resources=frozenset(
            resource
            for entry in spec.flavors or ()
            for f in fields
            for resource in getattr(entry, f) or ()
        ),
        namespaces=tuple(quota.namespaces or ()) if quota else (),
        preempt_within_quota=not (
            quota and quota.preemption and quota.preemption.withinQuota == "Never"
        ),
        tree=spec.tree,
        maintenance=isinstance(annotations, Mapping)
        and str(annotations.get(MAINTENANCE_ANNOTATION, "")).lower() == "true",
    )


@dataclass(frozen=True, slots=True)
class FlavorConfig:
    """A ResourceFlavor, parsed."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    gpu_memory_per_gpu: int | None = None  # base units (bytes) of GPU_MEMORY per GPU
    gpu_resource: str = "nvidia.com/gpu"


def parse_flavor(obj: Mapping[str, Any]) -> FlavorConfig:
    """Parse a ResourceFlavor object; ConfigError with one line naming it and the field."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    label = one_line(f"ResourceFlavor {name}" if name else "ResourceFlavor (no name)")
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name):
        raise ConfigError(f"{label}: metadata.name must be a valid object name")
    spec_obj = obj.get("spec") or {}
    if not isinstance(spec_obj, Mapping):
        raise ConfigError(f"{label}: spec must be an object")
    try:
        spec = ResourceFlavorSpec.model_validate(dict(spec_obj))
    except ValidationError as exc:
        raise ConfigError(f"{label}: {validation_message(exc)}") from None
    per_gpu = spec.gpuMemoryPerGPU
    return FlavorConfig(
        name=name,
        node_labels=dict(spec.nodeLabels or {}),
        gpu_memory_per_gpu=None if per_gpu is None else parse_quantity(per_gpu, GPU_MEMORY),
        gpu_resource=spec.gpuResource,
    )


# ---------------------------------------------------------------- pods


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

    #: `key`, made once: every map of the engine and the operator holds this one string
    #: (at 30,000 pods a new string per lookup was ~120 bytes a pod; issue 12).
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
    # Strings that thousands of pods repeat are kept once (interned): namespaces, label
    # keys, node names, phases, resource names (issue 12: memory per pod).
    return PodFacts(
        namespace=sys.intern(namespace),
        name=name,
        request=effective_request(spec, label),
        labels={sys.intern(k): v for k, v in (metadata.get("labels") or {}).items()},
        priority=int(priority) if isinstance(priority, int) else 0,
        created=default_created if created is None else created,
        node_name=sys.intern(node_name) if isinstance(node_name, str) else None,
        phase=sys.intern(status.get("phase") or "Pending"),
        gated=any(gate.get("name") == ADMISSION_GATE for gate in gates),
        deleting=bool(metadata.get("deletionTimestamp")),
        node_selector={str(k): str(v) for k, v in selector.items()} if selector else _NO_SELECTOR,
        node_affinity=_affinity_terms(spec),
    )
