"""The CRDs for Cohort, ElasticQuota and ResourceFlavor, from the engine's pydantic models.

`crds/quotree.yaml` is the output of `python -m quotree_operator.crds > crds/quotree.yaml`;
tests/unit/test_crds.py regenerates it and fails if the file and the models drift. The spec
schema walks `CohortSpec` / `ElasticQuotaSpec` field by field (Kubernetes wants a structural
schema, which pydantic's JSON schema with `anyOf`/`$defs` is not). CEL rules check what one
object can check alone: quantities are not negative and `min <= max` per resource.
"""

from __future__ import annotations

import sys
import types
import typing
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from quotree.flavor_spec import ResourceFlavorSpec
from quotree.models import GROUP, VERSION, CohortSpec, ElasticQuotaSpec

__all__ = ["crd_documents", "render", "spec_schema"]

# Kubernetes' own schema for resource.Quantity, made non-negative for strings.
_QUANTITY_PATTERN = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# Bounds keep the CEL cost estimate finite (the API server rejects unbounded rule costs).
_MAX_RESOURCES = 64
_MAX_NAME = 253


def _quantity_schema() -> dict[str, Any]:
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": _QUANTITY_PATTERN,
        "maxLength": 64,
        "x-kubernetes-validations": [
            {
                "rule": (
                    "!isQuantity(string(self)) || "
                    "quantity(string(self)).compareTo(quantity('0')) >= 0"
                ),
                "message": "quantities must not be negative",
            }
        ],
    }


def _resource_list(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "maxProperties": _MAX_RESOURCES,
        "additionalProperties": _quantity_schema(),
    }


def _is_resource_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is dict


def _schema_for(annotation: Any, description: str | None) -> dict[str, Any]:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if set(args) == {str, int, float}:  # a single quantity
        out = _quantity_schema()
        if description:
            out["description"] = description
        return out
    if _is_resource_list(annotation):
        if typing.get_args(annotation) == (str, str):  # labels
            return {
                "type": "object",
                "description": description or "",
                "maxProperties": _MAX_RESOURCES,
                "additionalProperties": {"type": "string", "maxLength": 63},
            }
        return _resource_list(description or "")
    if annotation is str:
        out = {"type": "string", "maxLength": _MAX_NAME}
    elif typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            # Entries keyed by name (the flavors: an ordered list, one entry per flavor).
            out = {"type": "array", "maxItems": 16, "items": _schema_for(item, None)}
            out["x-kubernetes-list-type"] = "map"
            out["x-kubernetes-list-map-keys"] = ["name"]
        else:
            out = {"type": "array", "maxItems": 256, "items": _schema_for(item, None)}
            out["x-kubernetes-list-type"] = "set"
    elif typing.get_origin(annotation) is Literal:
        out = {"type": "string", "enum": list(typing.get_args(annotation))}
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        out = _object_schema(annotation)
    else:  # pragma: no cover - a new field type needs a mapping here
        raise TypeError(f"no CRD schema for field type {annotation!r}")
    if description:
        out["description"] = description
    return out


def _object_schema(model: type[BaseModel]) -> dict[str, Any]:
    properties = {}
    required = []
    for name, info in model.model_fields.items():
        schema = _schema_for(info.annotation, info.description)
        if isinstance(info.json_schema_extra, dict):
            schema.update(info.json_schema_extra)  # e.g. the tree name's pattern and length
        if info.is_required():
            required.append(name)
        elif info.default is not None and not isinstance(info.default, BaseModel):
            schema["default"] = info.default
        properties[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    if model.__doc__:
        out["description"] = model.__doc__.strip().splitlines()[0]
    return out


def spec_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI schema of a spec model, with the CEL rules for one object."""
    schema = _object_schema(model)
    schema["x-kubernetes-validations"] = [
        {
            "rule": (
                "!has(self.min) || !has(self.max) || self.min.all(r, !(r in self.max) || "
                f"!{_MIN_ABOVE_MAX})"
            ),
            # `kubectl apply` shows this before any webhook runs: the first resource (by
            # name) whose min is above its max, with both amounts as written, e.g. "min cpu 8
            # is above max 4". One resource only: join() over all of them is beyond the API
            # server's CEL cost budget (map keys have no length bound); the one-element list
            # stands in for a variable binding, which CRD rules do not have.
            "messageExpression": (
                f"[self.min.filter(r, r in self.max && {_MIN_ABOVE_MAX}).sort()[0]]"
                ".map(k, 'min ' + k + ' ' + string(self.min[k]) + ' is above max ' + "
                "string(self.max[k]))[0]"
            ),
            "message": "min must not be above max for any resource",
            "reason": "FieldValueInvalid",
        }
    ]
    return schema


# Resource `r` has a min above its max (both parse as quantities; r is in both lists).
_MIN_ABOVE_MAX = (
    "(isQuantity(string(self.min[r])) && isQuantity(string(self.max[r])) && "
    "quantity(string(self.min[r])).compareTo(quantity(string(self.max[r]))) > 0)"
)


def _written_list(description: str) -> dict[str, Any]:
    """A resource list the operator writes (quantity strings)."""
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {"type": "string"},
    }


def _status_schema(leaf: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "request": _written_list("Demand: what this node asks of its parent."),
        "runtime": _written_list("What this node may use now (its share of the parent)."),
        "used": _written_list("What admitted pods use."),
        "summary": {
            "type": "string",
            "description": "Per resource: used/runtime/min/max (the printer column).",
        },
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["type", "status"],
                "properties": {
                    "type": {"type": "string"},
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "reason": {"type": "string"},
                    "message": {"type": "string"},
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                },
            },
        },
    }
    if leaf:
        properties["admittedPods"] = {"type": "integer", "format": "int64"}
        properties["pendingPods"] = {"type": "integer", "format": "int64"}
        properties["admittedGroups"] = {"type": "integer", "format": "int64"}
        properties["pendingGroups"] = {"type": "integer", "format": "int64"}
        properties["queue"] = _queue_schema()
    return {"type": "object", "properties": properties}


def _queue_schema() -> dict[str, Any]:
    return {
        "type": "array",
        "description": "The first waiting units (pods and pod groups) of the quota in the "
        "order quotree admits them: position 1 is taken first (kubectl quotree pending "
        "lists them all, with their positions under each Cohort).",
        "items": {
            "type": "object",
            "required": ["position", "kind", "namespace", "name"],
            "properties": {
                "position": {"type": "integer", "format": "int64"},
                "kind": {"type": "string", "enum": ["Pod", "PodGroup"]},
                "namespace": {"type": "string"},
                "name": {"type": "string"},
                "priority": {"type": "integer", "format": "int64"},
                "pods": {
                    "type": "integer",
                    "format": "int64",
                    "description": "How many pods the unit admits at once.",
                },
            },
        },
    }


def _columns(leaf: bool) -> list[dict[str, Any]]:
    columns: list[dict[str, Any]] = [
        {"name": "Parent", "type": "string", "jsonPath": ".spec.parent"},
        {"name": "Tree", "type": "string", "jsonPath": ".spec.tree"},
        {
            "name": "Used/Runtime/Min/Max",
            "type": "string",
            "jsonPath": ".status.summary",
            "description": "Per resource: used/runtime/min/max.",
        },
    ]
    if leaf:
        columns += [
            {"name": "Admitted", "type": "integer", "jsonPath": ".status.admittedPods"},
            {"name": "Pending", "type": "integer", "jsonPath": ".status.pendingPods"},
            {
                "name": "Admitted Groups",
                "type": "integer",
                "jsonPath": ".status.admittedGroups",
                "description": "Pod groups admitted whole (kubectl get -o wide).",
                "priority": 1,
            },
            {
                "name": "Pending Groups",
                "type": "integer",
                "jsonPath": ".status.pendingGroups",
                "description": "Pod groups waiting whole (kubectl get -o wide).",
                "priority": 1,
            },
        ]
    columns += [
        {
            "name": "Valid",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Valid")].status',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return columns


def _crd(kind: str, plural: str, short: list[str], model: type[BaseModel]) -> dict[str, Any]:
    leaf = kind == "ElasticQuota"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": ["quotree"],
            },
            "scope": "Namespaced" if leaf else "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": _columns(leaf),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": (model.__doc__ or kind).strip().splitlines()[0],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(model),
                                "status": _status_schema(leaf),
                            },
                        }
                    },
                }
            ],
        },
    }


def _flavor_crd() -> dict[str, Any]:
    """ResourceFlavor: cluster-scoped, spec only (docs/reference/objects.md, "ResourceFlavor")."""
    model = ResourceFlavorSpec
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"resourceflavors.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "ResourceFlavor",
                "listKind": "ResourceFlavorList",
                "plural": "resourceflavors",
                "singular": "resourceflavor",
                "shortNames": ["rf"],
                "categories": ["quotree"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": [
                        {"name": "Node Labels", "type": "string", "jsonPath": ".spec.nodeLabels"},
                        {
                            "name": "GPU Memory",
                            "type": "string",
                            "jsonPath": ".spec.gpuMemoryPerGPU",
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": (model.__doc__ or "").strip().splitlines()[0],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": _object_schema(model),
                            },
                        }
                    },
                }
            ],
        },
    }


def crd_documents() -> list[dict[str, Any]]:
    """The three CRDs: Cohort, ElasticQuota, ResourceFlavor."""
    return [
        _crd("Cohort", "cohorts", ["coh"], CohortSpec),
        _crd("ElasticQuota", "elasticquotas", ["eq", "eqs"], ElasticQuotaSpec),
        _flavor_crd(),
    ]


def render() -> str:
    """crds/quotree.yaml as text."""
    header = (
        "# Generated by `python -m quotree_operator.crds`; do not edit (tests/unit/test_crds.py).\n"
    )
    return header + yaml.safe_dump_all(crd_documents(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
