"""Which cluster nodes count toward the capacity, and for how much: decided here only.

Why a module of its own: the operator (from its Node watch) and `quotree
simulate` (from Node documents) must agree on the root's total, so both hand
the Node object to `node_allocatable` and the engine to `Engine.set_cluster_node`.

The rule (the semantics, "Capacity": Ready, schedulable nodes): a cluster node
counts unless it is being deleted (`metadata.deletionTimestamp`), cordoned
(`spec.unschedulable`), or reports a `Ready` condition other than "True". A
node with no `Ready` condition at all counts: the kubelet always reports one,
so only hand-written simulator input lacks it. It counts for
`status.allocatable` (or `status.capacity` when allocatable is absent). A
quantity that does not parse is left out of the total, the rest of the node
still counts, and the caller is given one line per skipped resource to show
(the operator logs it, the simulator prints it as a warning).

Resource flavors (docs/reference/objects.md, "ResourceFlavor"): a flavor's capacity of a resource,
`<resource>@<flavor>`, is the allocatable of the counted nodes that carry all
of the flavor's nodeLabels (`flavor_matches`, `cluster_capacity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.flavor_spec import FlavorConfig
from quotree.models import GPU_MEMORY, flavored
from quotree.quantity import QuantityError, add_amounts, parse_quantity

__all__ = ["NodeCapacity", "cluster_capacity", "flavor_matches", "node_allocatable"]


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """What one cluster node adds to the capacity (None: it does not count), and warnings."""

    allocatable: dict[str, int] | None
    warnings: list[str] = field(default_factory=list)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def node_allocatable(body: Mapping[str, Any]) -> NodeCapacity:
    """The allocatable, in base units, that a Node object adds to the cluster's capacity."""
    metadata, spec, status = (_mapping(body.get(k)) for k in ("metadata", "spec", "status"))
    if metadata.get("deletionTimestamp") or spec.get("unschedulable"):
        return NodeCapacity(None)
    for condition in status.get("conditions") or ():
        if _mapping(condition).get("type") == "Ready" and condition.get("status") != "True":
            return NodeCapacity(None)
    amounts = _mapping(status.get("allocatable") or status.get("capacity"))
    out: dict[str, int] = {}
    warnings = []
    for resource, value in amounts.items():
        try:
            out[str(resource)] = parse_quantity(value, str(resource))
        except QuantityError as exc:
            warnings.append(
                f"Node {metadata.get('name', '(no name)')}: allocatable {resource} {value!r} "
                f"left out of the capacity: {exc}"
            )
    return NodeCapacity(out, warnings)


def flavor_matches(flavor: FlavorConfig, node_labels: Mapping[str, str]) -> bool:
    """Is a cluster node of this flavor: does it carry every one of the flavor's nodeLabels?"""
    return all(node_labels.get(key) == value for key, value in flavor.node_labels.items())


def cluster_capacity(
    nodes: Mapping[str, tuple[Mapping[str, int], Mapping[str, str]]],
    flavors: Mapping[str, FlavorConfig],
) -> dict[str, int]:
    """The root's capacity from the counted nodes (allocatable, labels) and the flavors.

    Each resource counts under its own name over every node, and under
    `<resource>@<flavor>` over the nodes of each flavor (a node of two flavors counts
    toward both). A flavor with `gpuMemoryPerGPU` adds `quotree.io/gpu-memory@<flavor>`
    (its nodes' GPUs times the memory per GPU), and `quotree.io/gpu-memory` counts each
    node once, by the first such flavor in name order that it belongs to.
    """
    total: dict[str, int] = {}
    ordered = [flavors[name] for name in sorted(flavors)]
    for allocatable, labels in nodes.values():
        add_amounts(total, allocatable)
        memory_counted = False
        for flavor in ordered:
            if not flavor_matches(flavor, labels):
                continue
            add_amounts(total, {flavored(r, flavor.name): a for r, a in allocatable.items()})
            per_gpu = flavor.gpu_memory_per_gpu
            if per_gpu is not None:
                memory = allocatable.get(flavor.gpu_resource, 0) * per_gpu
                add_amounts(total, {flavored(GPU_MEMORY, flavor.name): memory})
                if not memory_counted:
                    add_amounts(total, {GPU_MEMORY: memory})
                    memory_counted = True
    return total
