"""Resource flavors: which flavors a pod may go to, and what it is charged on one.

Why a module of its own: docs/reference/objects.md's "ResourceFlavor" asks three small
questions the engine, the simulator and the operator must answer the same
way. Does a pod need a flavor at all (`needs_flavor`)? Which of its quota's
flavors does its own nodeSelector or required node affinity allow
(`allowed_flavors`)? What does it charge on a flavor (`charge`: the resources
its quota splits by flavor renamed `<resource>@<flavor>`, plus the derived
GPU memory)? Which flavor it is charged to (the first that fits) is the
decider's (`placement.Placement.place`), since fitting needs the tree.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotree.flavor_spec import FlavorConfig
from quotree.models import GPU_MEMORY, MemberConfig, flavored
from quotree.podfacts import PodFacts

__all__ = ["allowed_flavors", "allows", "charge", "needs_flavor"]


def _expression_may_hold(
    expression: tuple[str, str, tuple[str, ...]], labels: Mapping[str, str]
) -> bool:
    """Could a node of a flavor with `labels` satisfy one matchExpression?

    A key the flavor does not fix may hold on some of its nodes, so it does not
    rule the flavor out.
    """
    key, operator, values = expression
    if key not in labels:
        return True
    value = labels[key]
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return True
    if operator == "DoesNotExist":
        return False
    if operator in ("Gt", "Lt") and values:
        try:
            number, bound = int(value), int(values[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return True


def allows(flavor: FlavorConfig, facts: PodFacts) -> bool:
    """Does the pod's own nodeSelector / required node affinity allow this flavor's nodes?"""
    labels = flavor.node_labels
    for key, value in facts.node_selector.items():
        if key in labels and labels[key] != value:
            return False
    if not facts.node_affinity:
        return True
    return any(
        all(_expression_may_hold(expression, labels) for expression in term)
        for term in facts.node_affinity
    )


def _derives_memory(flavor: FlavorConfig, request: Mapping[str, int]) -> bool:
    return flavor.gpu_memory_per_gpu is not None and request.get(flavor.gpu_resource, 0) > 0


def needs_flavor(
    config: MemberConfig, request: Mapping[str, int], flavors: Mapping[str, FlavorConfig]
) -> bool:
    """Is a pod of this quota charged to a flavor: does it request a resource the quota
    splits by flavor, or the GPUs one of its flavors derives GPU memory from?"""
    if not config.flavors:
        return False
    if any(request.get(r, 0) > 0 for r in config.flavored_resources):
        return True
    return any(
        name in flavors and _derives_memory(flavors[name], request) for name in config.flavors
    )


def allowed_flavors(
    config: MemberConfig, facts: PodFacts, flavors: Mapping[str, FlavorConfig]
) -> list[str]:
    """The quota's flavors, in its order, that exist and that the pod allows."""
    return [name for name in config.flavors if name in flavors and allows(flavors[name], facts)]


def charge(
    config: MemberConfig, request: Mapping[str, int], flavor: FlavorConfig | None
) -> dict[str, int]:
    """What a pod with `request` is charged on `flavor` (None: no flavor, the request as is).

    The flavor's derived GPU memory is added first (its GPUs times `gpuMemoryPerGPU`,
    as `quotree.io/gpu-memory`); then every resource the quota splits by flavor is
    renamed `<resource>@<flavor>`. GPU memory is split too when the quota names it in
    its flavors, else it is charged under its plain name (a quota written in GPU
    memory over every model).
    """
    if flavor is None:
        return dict(request)
    amounts = dict(request)
    if _derives_memory(flavor, request):
        assert flavor.gpu_memory_per_gpu is not None
        amounts[GPU_MEMORY] = (
            amounts.get(GPU_MEMORY, 0) + request[flavor.gpu_resource] * flavor.gpu_memory_per_gpu
        )
    split = config.flavored_resources
    return {
        (flavored(r, flavor.name) if r in split else r): amount for r, amount in amounts.items()
    }
