"""What the operator sends to the API for a pod, as plain dicts (pure, no I/O).

Kept apart from client.py, which only knows how to send: these bodies are where the
operator's choices about the API show (a `test` op guards the gate removal, the standing
label goes in the same patch, Events carry our component), and they are tested without a
client (tests/unit/operator/test_bodies.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from quotree.models import ADMISSION_GATE, FLAVOR_LABEL, GROUP, STANDING_LABEL, VERSION

__all__ = [
    "COMPONENT",
    "EVICTED_ANNOTATION",
    "admission_patch",
    "eviction",
    "finalizers_patch",
    "job_suspension",
    "object_event",
    "pod_event",
]

COMPONENT = "quotree-operator"
#: On a Job quotree suspended to evict its pod group: it resumes the Job (and removes the
#: annotation) once the Job's pods are gone, also after a restart of the operator.
EVICTED_ANNOTATION = "quotree.io/evicted"
#: The API server keeps an Event's message to this many characters.
EVENT_MESSAGE_LIMIT = 1024


def _escape(key: str) -> str:
    """A map key as a JSON-pointer segment."""
    return key.replace("~", "~0").replace("/", "~1")


def admission_patch(
    gates: Sequence[str],
    has_labels: bool,
    standing: str | None,
    flavor: tuple[str, Mapping[str, str]] | None = None,
    *,
    has_node_selector: bool = False,
) -> list[dict[str, Any]]:
    """The JSON patch that removes our scheduling gate and sets the standing label at once.

    `gates` are the pod's gate names as last seen; the `test` op makes the patch fail (422)
    instead of removing someone else's gate if the list has changed since. `flavor` (its
    name and nodeLabels): the same patch adds the nodeLabels to `spec.nodeSelector` (the
    API allows adding scheduling constraints while the pod is gated) and sets the label
    `quotree.io/flavor`, so the scheduler places the pod on that kind of node.
    """
    index = list(gates).index(ADMISSION_GATE)
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": ADMISSION_GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]
    if flavor is not None and flavor[1]:
        if not has_node_selector:
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": dict(flavor[1])})
        else:
            for key, value in sorted(flavor[1].items()):
                ops.append(
                    {"op": "add", "path": f"/spec/nodeSelector/{_escape(key)}", "value": value}
                )
    labels = {}
    if standing is not None:
        labels[STANDING_LABEL] = standing
    if flavor is not None:
        labels[FLAVOR_LABEL] = flavor[0]
    if labels and not has_labels:
        ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
    for key, value in labels.items():
        ops.append({"op": "add", "path": f"/metadata/labels/{_escape(key)}", "value": value})
    return ops


def finalizers_patch(before: Sequence[str], after: Sequence[str]) -> list[dict[str, Any]]:
    """A JSON patch that sets an object's finalizers to `after` only if they are still
    `before`: a finalizer another controller wrote meanwhile makes it fail (422), never
    lost. An object without finalizers has none in its JSON: the test is then `null`
    (which the API server's JSON patch takes for "absent")."""
    return [
        {"op": "test", "path": "/metadata/finalizers", "value": list(before) or None},
        {"op": "add", "path": "/metadata/finalizers", "value": list(after)},
    ]


def eviction(namespace: str, name: str) -> dict[str, Any]:
    """A policy/v1 Eviction of the pod (PodDisruptionBudgets hold)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }


def pod_event(
    namespace: str,
    name: str,
    *,
    event_name: str,
    uid: str | None,
    reason: str,
    message: str,
    warning: bool,
    now: datetime,
) -> dict[str, Any]:
    """A core/v1 Event on the pod (kubectl describe pod shows it)."""
    involved = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}
    return object_event(
        namespace,
        involved,
        event_name=event_name,
        uid=uid,
        reason=reason,
        message=message,
        warning=warning,
        now=now,
    )


def object_event(
    namespace: str,
    involved: dict[str, str],
    *,
    event_name: str,
    uid: str | None,
    reason: str,
    message: str,
    warning: bool,
    now: datetime,
) -> dict[str, Any]:
    """A core/v1 Event in `namespace` on the object `involved` (apiVersion, kind, name and,
    for a namespaced object, namespace); a cluster-scoped object's go in "default"."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name, "namespace": namespace},
        "involvedObject": {**involved, **({"uid": uid} if uid else {})},
        "reason": reason,
        "message": message[:EVENT_MESSAGE_LIMIT],
        "type": "Warning" if warning else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": f"{GROUP}/operator",
        "reportingInstance": COMPONENT,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def quota_event(
    namespace: str,
    name: str,
    *,
    event_name: str,
    reason: str,
    message: str,
    now: datetime,
) -> dict[str, Any]:
    """A core/v1 Event on an ElasticQuota (kubectl describe elasticquota shows it)."""
    body = pod_event(
        namespace,
        name,
        event_name=event_name,
        uid=None,
        reason=reason,
        message=message,
        warning=False,
        now=now,
    )
    body["involvedObject"] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ElasticQuota",
        "namespace": namespace,
        "name": name,
    }
    return body


def job_suspension(suspend: bool, why: str | None = None) -> dict[str, Any]:
    """The merge patch that suspends a Job (marked EVICTED_ANNOTATION, `why`: the eviction's
    kind) or resumes it (the mark removed)."""
    return {
        "metadata": {"annotations": {EVICTED_ANNOTATION: (why or "true") if suspend else None}},
        "spec": {"suspend": suspend},
    }
