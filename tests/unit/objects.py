"""Kubernetes objects as the API sends them (Cohort, ElasticQuota, Node, Pod), for the
shells' unit tests, and the engine's configuration parsed from them.

builders.py makes the engine's own values (`MemberConfig`, `PodFacts`) directly, in base
units; this module makes the objects the operator, the webhooks and the plugin read, in
the API's spelling. The keyword arguments name what a test varies; everything else is the
smallest object the parsers accept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from quotree import ADMISSION_GATE, Engine, parse_member
from quotree.models import MemberConfig

API_VERSION = "quotree.io/v1alpha1"


def cohort(name: str, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"parent": parent, **spec} if parent else dict(spec)
    return {
        "apiVersion": API_VERSION,
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": body,
    }


def quota(name: Any, namespace: str, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    """An ElasticQuota (`name` may be anything, to test what the parser says of it)."""
    body: dict[str, Any] = {"parent": parent, **spec} if parent else dict(spec)
    return {
        "apiVersion": API_VERSION,
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def cohort_config(name: str, parent: str | None = None, **spec: Any) -> MemberConfig:
    """`cohort(...)` as the engine takes it."""
    return parse_member(cohort(name, parent, **spec))


def quota_config(
    name: str, parent: str | None = None, *, namespace: str | None = None, **spec: Any
) -> MemberConfig:
    """`quota(...)` as the engine takes it, in the namespace of its own name by default."""
    return parse_member(quota(name, namespace or name, parent, **spec))


def engine_with(*objects: dict[str, Any]) -> Engine:
    """An engine that has seen these objects (as the operator's watch would feed them)."""
    engine = Engine()
    for obj in objects:
        engine.set_config(parse_member(obj))
    engine.refresh()  # settled for the reads that follow
    return engine


def node(
    name: str = "n1",
    allocatable: Mapping[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    ready: str | None = None,
    unschedulable: bool | None = None,
    deleting: bool = False,
    api_version: bool = False,
) -> dict[str, Any]:
    """A Node with this allocatable (default cpu 4, memory 8Gi); `ready` ("True", "False",
    "Unknown") adds the Ready condition, `unschedulable` the spec field."""
    metadata: dict[str, Any] = {"name": name}
    if labels is not None:
        metadata["labels"] = dict(labels)
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-22T08:00:00Z"
    body: dict[str, Any] = {"kind": "Node", "metadata": metadata}
    if api_version:
        body = {"apiVersion": "v1", **body}
    if unschedulable is not None:
        body["spec"] = {"unschedulable": unschedulable}
    status: dict[str, Any] = {"allocatable": dict(allocatable or {"cpu": "4", "memory": "8Gi"})}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    body["status"] = status
    return body


_UNSET: Any = object()


def pod(
    namespace: str,
    name: str = "p",
    requests: Mapping[str, str] | None = None,
    *,
    gates: Sequence[str] | None = (ADMISSION_GATE,),
    uid: str | None = None,
    labels: Mapping[str, str] | None = _UNSET,
    container: str = "c",
    image: str | None = None,
    created: str | None = None,
    phase: str | None = "Pending",
    api_version: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A Pod whose one container asks for `requests` (default cpu 1; `{}`: no resources).

    `gates`: its scheduling gates (default quotree's; None leaves the field out); `labels`
    (default `{}`; None leaves the field out); `phase` None leaves the status out; `spec`:
    more spec fields (nodeName, priority, ...).
    """
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid is not None:
        metadata["uid"] = uid
    if labels is _UNSET:
        labels = {}
    if labels is not None:
        metadata["labels"] = dict(labels)
    if created is not None:
        metadata["creationTimestamp"] = created
    main: dict[str, Any] = {"name": container}
    if image is not None:
        main["image"] = image
    requests = {"cpu": "1"} if requests is None else requests
    if requests:
        main["resources"] = {"requests": dict(requests)}
    body_spec: dict[str, Any] = {"containers": [main]}
    if gates is not None:
        body_spec["schedulingGates"] = [{"name": g} for g in gates]
    body_spec.update(spec)
    body: dict[str, Any] = {"kind": "Pod", "metadata": metadata, "spec": body_spec}
    if api_version:
        body = {"apiVersion": "v1", **body}
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


def user_pod(
    namespace: str, name: str = "p", labels: Mapping[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A Pod as a user submits it (no resources, gates or status): what the webhooks see."""
    return pod(
        namespace,
        name,
        {},
        gates=None,
        labels=labels or {},
        image="x",
        phase=None,
        api_version=True,
        **spec,
    )
