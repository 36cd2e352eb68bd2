"""ResourceFlavors: the spec users write, as a pydantic model, and its parsed form.

Why a module of its own: a ResourceFlavor is an object of its own kind, with
its own CRD (generated from `ResourceFlavorSpec`, like the Cohort's and the
ElasticQuota's from `models.py`) and its own parsed form, `FlavorConfig`,
which capacity, placement and the derived GPU memory read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from quotree.models import DNS_SUBDOMAIN, GPU_MEMORY, RESOURCE_NAME, ConfigError, Quantity
from quotree.quantity import QuantityError, parse_quantity
from quotree.spec_errors import one_line, validation_message

__all__ = ["FlavorConfig", "ResourceFlavorSpec", "parse_flavor"]


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
        if not RESOURCE_NAME.match(value):
            raise ValueError(f"{value!r} is not a resource name")
        return value


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
    if not isinstance(name, str) or not DNS_SUBDOMAIN.match(name):
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
