"""The Cohorts and ElasticQuotas users write, as pydantic models, and their parsed form.

`CohortSpec` and `ElasticQuotaSpec` are the single source of the CRD schemas
(crds/ is generated from them and a test fails if the two drift) and of what
the webhooks accept. `MemberConfig` is the same spec parsed into integers in
base units. The labels and annotations quotree reads and writes are named here.
ResourceFlavors have their own models (`flavor_spec.py`); what the engine
needs to know about a pod is `podfacts.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from quotree.quantity import QuantityError, parse_quantity
from quotree.spec_errors import one_line, validation_message

__all__ = [
    "ADMISSION_GATE",
    "DEFAULT_TREE",
    "DNS_SUBDOMAIN",
    "FLAVOR_LABEL",
    "GPU_MEMORY",
    "GROUP",
    "IN_USE_FINALIZER",
    "MAINTENANCE_ANNOTATION",
    "MANAGED_LABEL",
    "PREEMPTIBLE_LABEL",
    "QUOTA_LABEL",
    "RESOURCE_NAME",
    "STANDING_LABEL",
    "VERSION",
    "CohortSpec",
    "ConfigError",
    "ElasticQuotaSpec",
    "FlavorQuotaSpec",
    "MemberConfig",
    "PreemptionSpec",
    "Quantity",
    "flavored",
    "parse_member",
    "quota_label",
]

GROUP = "quotree.io"
VERSION = "v1alpha1"
QUOTA_LABEL = "quotree.io/quota-name"
PREEMPTIBLE_LABEL = "quotree.io/preemptible"
STANDING_LABEL = "quotree.io/capacity"
ADMISSION_GATE = "quotree.io/admission"
#: The tree of a Cohort or ElasticQuota that sets no `spec.tree` (docs/reference/objects.md,
#: "Several trees").
DEFAULT_TREE = "default"
#: Tree names: a DNS label short enough that `quotree.io/quota-name.<tree>` is a label key.
_TREE_NAME = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,50}[a-z0-9])?$")


def quota_label(tree: str) -> str:
    """The pod label that picks the ElasticQuota a pod is charged to in `tree`."""
    return QUOTA_LABEL if tree == DEFAULT_TREE else f"{QUOTA_LABEL}.{tree}"


#: On a pod admitted to a flavor (docs/reference/objects.md, "ResourceFlavor"): the flavor's name.
FLAVOR_LABEL = "quotree.io/flavor"
#: "true" on a top-level Cohort or ElasticQuota: maintenance mode for its subtree (MCAD's).
MAINTENANCE_ANNOTATION = "quotree.io/maintenance"
#: The derived resource a flavor with `gpuMemoryPerGPU` charges (nos's GPU memory).
GPU_MEMORY = "quotree.io/gpu-memory"
#: On every namespace some ElasticQuota covers (docs/reference/pods.md, "System and managed
#: namespaces"); set and removed by the operator only. The pod webhooks select namespaces by it.
MANAGED_LABEL = "quotree.io/managed"
#: On every Cohort that has children, kept by the operator (Kubernetes' in-use protection,
#: as `kubernetes.io/pvc-protection` on a PersistentVolumeClaim): a Cohort deleted while it
#: has children stays, a parent like any other, until its last child is gone.
IN_USE_FINALIZER = "quotree.io/in-use"

Kind = Literal["Cohort", "ElasticQuota"]

#: Kubernetes resource names: an optional DNS prefix and a qualified name.
RESOURCE_NAME = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
#: Object and namespace names.
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$")

Quantity = str | int | float
ResourceList = dict[str, Quantity]


class ConfigError(ValueError):
    """A Cohort or ElasticQuota that cannot be read; the message is one line for people."""


def _check_resource_list(value: ResourceList | None) -> ResourceList | None:
    if value is None:
        return value
    for name, amount in value.items():
        if not RESOURCE_NAME.match(name):
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
        if not DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a valid object name")
        return value


class _MemberSpec(_ResourceLists):
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
        if value is not None and not DNS_SUBDOMAIN.match(value):
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


class CohortSpec(_MemberSpec):
    """spec of a Cohort: an inner node of the quota tree."""


class ElasticQuotaSpec(_MemberSpec):
    """spec of an ElasticQuota: a leaf of the quota tree that pods are charged to."""

    namespaces: list[str] | None = Field(
        default=None, description="More namespaces whose pods may use this quota."
    )
    preemption: PreemptionSpec | None = None

    @field_validator("namespaces")
    @classmethod
    def _namespace_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            if not DNS_SUBDOMAIN.match(name):
                raise ValueError(f"{name!r} is not a valid namespace name")
        return value


@dataclass(frozen=True, slots=True)
class MemberConfig:
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
    #: The annotation MAINTENANCE_ANNOTATION is "true" (it acts on top-level members).
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


def _lists_with_flavors(spec: _MemberSpec) -> dict[str, dict[str, int]]:
    """The member's five resource lists, its flavors' entries merged in as `<resource>@<flavor>`."""
    fields = ("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit")
    out = {f: _parsed(getattr(spec, f)) for f in fields}
    for entry in spec.flavors or ():
        for f in fields:
            for resource, amount in _parsed(getattr(entry, f)).items():
                out[f][flavored(resource, entry.name)] = amount
    return out


def parse_member(obj: Mapping[str, Any]) -> MemberConfig:
    """Parse a Cohort or ElasticQuota object (as `kubectl apply` sends it).

    Raises ConfigError with one line naming the object, the field and the problem.
    """
    kind = obj.get("kind")
    metadata = obj.get("metadata") or {}
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    label = one_line(f"{kind} {name}" if name else f"{kind or 'object'} (no name)")
    if kind not in ("Cohort", "ElasticQuota"):
        raise ConfigError(f"{label}: kind must be Cohort or ElasticQuota")
    if not isinstance(name, str) or not DNS_SUBDOMAIN.match(name):
        raise ConfigError(f"{label}: metadata.name must be a valid object name")
    namespace = metadata.get("namespace")
    if kind == "ElasticQuota" and not namespace:
        raise ConfigError(f"{label}: an ElasticQuota needs metadata.namespace")
    spec_obj = obj.get("spec") or {}
    if not isinstance(spec_obj, Mapping):
        raise ConfigError(f"{label}: spec must be an object")
    model: type[_MemberSpec] = CohortSpec if kind == "Cohort" else ElasticQuotaSpec
    try:
        spec = model.model_validate(dict(spec_obj))
    except ValidationError as exc:
        raise ConfigError(f"{label}: {validation_message(exc)}") from None
    quota = spec if isinstance(spec, ElasticQuotaSpec) else None
    lists = _lists_with_flavors(spec)
    annotations = metadata.get("annotations") or {}
    fields = ("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit")
    return MemberConfig(
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
