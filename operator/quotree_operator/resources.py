"""Which API call lists or watches each kind of object the operator follows.

Why a module of its own: the list and the watch of one kind are the same call with other
options, for core objects (Nodes, Pods), batch Jobs, Kubernetes' PodGroups and quotree's own
custom objects; one
table keeps them in step. It only picks the call on the client's API objects (typed `Any`:
client.py owns kubernetes_asyncio) and reads a watch's stream into events.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from quotree.models import GROUP, VERSION
from quotree.native_groups import POD_GROUP_API

__all__ = ["EVENTS_PER_TURN", "PLURALS", "call_for", "events_of"]

#: Watch events taken in between two turns of the event loop.
EVENTS_PER_TURN = 8

logger = logging.getLogger(__name__)

#: quotree's custom objects by kind, and their plural in the API (client.py's patches and
#: webhook_api.py's reads name them by it too).
PLURALS = {
    "Cohort": "cohorts",
    "ElasticQuota": "elasticquotas",
    "ResourceFlavor": "resourceflavors",
}


def call_for(apis: Any, what: str, options: dict[str, Any]) -> tuple[Any, str]:
    """(the list or watch call for `what` with `options`, the kind of its items).

    `apis`: the client, whose `core`, `batch` and `custom` API objects make the calls.

    `what`: "nodes", "pods", "jobs", "podgroups", or a custom object's kind ("Cohort", ...).
    """
    if what == "nodes":
        return apis.core.list_node(**options), "Node"
    if what == "pods":
        return apis.core.list_pod_for_all_namespaces(**options), "Pod"
    if what == "jobs":
        return apis.batch.list_job_for_all_namespaces(**options), "Job"
    if what == "podgroups":  # Kubernetes' own, alpha: through the generic call
        group, version = POD_GROUP_API.split("/")
        return apis.custom.list_cluster_custom_object(group, version, what, **options), "PodGroup"
    plural = PLURALS.get(what)
    if plural is None:
        raise ValueError(f"no list call for {what!r}")
    return apis.custom.list_cluster_custom_object(GROUP, VERSION, plural, **options), what


async def events_of(response: Any, what: str) -> AsyncGenerator[dict[str, Any], None]:
    """The events of a watch's stream (one JSON object a line), parsed; unreadable lines
    are logged and skipped."""
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for index, line in enumerate(lines):
            if index and not index % EVENTS_PER_TURN:
                # A burst's chunk holds many events: the webhook answers waiting on this
                # loop (admission at creation) get their turn between them.
                await asyncio.sleep(0)
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                logger.warning("%s watch: unreadable event %r", what, line[:200])
                continue
            yield event
