"""The shape of each kind the simulator reads (checks from `quotree.shapes`).

Every kind's top-level fields are closed (an unknown one is a problem), as is
`metadata` (Kubernetes' ObjectMeta); below that, the fields the simulator reads
are checked and the rest are left alone. The specs of Cohorts, ElasticQuotas
and ResourceFlavors are checked by their own models (`quotree.models`,
`quotree.flavor_spec`), the same the webhook uses; here only that they are objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotree.shapes import (
    INT32,
    Check,
    anything,
    boolean,
    integer,
    list_of,
    obj,
    problems,
    quantity_map,
    string,
    string_map,
    timestamp,
)

__all__ = ["KINDS", "check_document", "describe"]

METADATA = obj(
    {
        "name": string,
        "generateName": string,
        "namespace": string,
        "labels": string_map,
        "annotations": string_map,
        "creationTimestamp": timestamp,
        "deletionTimestamp": timestamp,
        "deletionGracePeriodSeconds": integer(0, 2**63 - 1),
        "uid": string,
        "resourceVersion": string,
        "selfLink": string,
        "generation": integer(0, 2**63 - 1),
        "ownerReferences": list_of(obj({"kind": string, "name": string})),
        "finalizers": list_of(string),
        "managedFields": list_of(anything),
    },
    strict=True,
)

_CONTAINER = obj(
    {
        "name": string,
        "restartPolicy": string,
        "resources": obj({"requests": quantity_map, "limits": quantity_map}),
    }
)

_EXPRESSION = obj({"key": string, "operator": string, "values": list_of(string)})

_NODE_AFFINITY = obj(
    {
        "requiredDuringSchedulingIgnoredDuringExecution": obj(
            {
                "nodeSelectorTerms": list_of(
                    obj(
                        {
                            "matchExpressions": list_of(_EXPRESSION),
                            "matchFields": list_of(_EXPRESSION),
                        }
                    )
                )
            }
        )
    }
)

POD_SPEC = obj(
    {
        "containers": list_of(_CONTAINER),
        "initContainers": list_of(_CONTAINER),
        "overhead": quantity_map,
        "priority": integer(*INT32),
        "priorityClassName": string,
        "preemptionPolicy": string,
        "nodeName": string,
        "nodeSelector": string_map,
        "schedulingGates": list_of(obj({"name": string})),
        "affinity": obj({"nodeAffinity": _NODE_AFFINITY}),
        "schedulingGroup": obj({"podGroupName": string}),
    }
)

_STATUS = obj({})


def _top(spec: Check = _STATUS, status: Check = _STATUS, **more: Check) -> Check:
    fields = {"apiVersion": string, "kind": string, "metadata": METADATA, "spec": spec}
    return obj({**fields, "status": status, **more}, strict=True)


_TEMPLATE = obj({"metadata": METADATA, "spec": POD_SPEC}, required=("spec",))
_COUNT = integer(0, INT32[1])
_REPLICATED = obj({"replicas": _COUNT, "template": _TEMPLATE}, required=("template",))
#: A PodGroup's or PodGroup template's `schedulingPolicy` (native_groups.py reads which).
_POLICY = obj(
    {"basic": obj({}), "gang": obj({"minCount": integer(*INT32)}, required=("minCount",))}
)
_TEMPLATE_REF = obj({"workload": obj({"workloadName": string, "podGroupTemplateName": string})})

_JOB_SPEC = obj(
    {
        "parallelism": _COUNT,
        "completions": _COUNT,
        "suspend": boolean,
        "completionMode": string,
        "template": _TEMPLATE,
    },
    required=("template",),
)

#: Each kind the simulator reads, and its shape.
KINDS: Mapping[str, Check] = {
    "Cohort": _top(),
    "ElasticQuota": _top(),
    "ResourceFlavor": _top(),
    "Namespace": _top(),
    "Node": _top(
        spec=obj({"unschedulable": boolean}),
        status=obj(
            {
                # Quantities that do not parse are left out of the capacity with a warning
                # (quotree.capacity), so only the map itself is checked here.
                "allocatable": obj({}),
                "capacity": obj({}),
                "conditions": list_of(obj({"type": string, "status": string})),
            }
        ),
    ),
    "Pod": _top(spec=POD_SPEC, status=obj({"phase": string})),
    "PriorityClass": obj(
        {
            "apiVersion": string,
            "kind": string,
            "metadata": METADATA,
            "value": integer(*INT32),
            "globalDefault": boolean,
            "description": string,
            "preemptionPolicy": string,
        },
        strict=True,
        required=("value",),
    ),
    "Deployment": _top(spec=_REPLICATED),
    "ReplicaSet": _top(spec=_REPLICATED),
    "StatefulSet": _top(spec=_REPLICATED),
    "Job": _top(spec=_JOB_SPEC, status=obj({"succeeded": _COUNT})),
    "CronJob": _top(
        spec=obj(
            {
                "suspend": boolean,
                "jobTemplate": obj({"metadata": METADATA, "spec": _JOB_SPEC}, required=("spec",)),
            },
            required=("jobTemplate",),
        )
    ),
    "PodGroup": _top(
        spec=obj({"schedulingPolicy": _POLICY, "podGroupTemplateRef": _TEMPLATE_REF}),
        status=anything,
    ),
    "Workload": _top(
        spec=obj({"podGroupTemplates": list_of(obj({"name": string, "schedulingPolicy": _POLICY}))})
    ),
}


def describe(doc: Mapping[str, Any]) -> str:
    """`Kind namespace/name` as far as the document says it (never raises)."""
    kind = doc.get("kind")
    metadata = doc.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    text = kind if isinstance(kind, str) and kind else "object"
    if isinstance(name, str) and name:
        prefix = f"{namespace}/" if isinstance(namespace, str) and namespace else ""
        text += f" {prefix}{name}"
    return text.replace("\n", "\\n").replace("\r", "\\r")


def check_document(doc: Mapping[str, Any]) -> list[str]:
    """The problems of a document of a kind in KINDS (see `shapes.problems`)."""
    return problems(doc, KINDS[str(doc.get("kind"))])
