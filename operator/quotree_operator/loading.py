"""The start-up load: every list read into the engine before the watches start.

Why a module of its own: this is the restart safety (the engine rebuilt from what the
cluster holds, every later watch event newer than what was loaded) and most of the time
a start takes (docs/operator.md, "Start-up"), and its order matters: flavors and nodes,
then Cohorts and ElasticQuotas, then pods, so that pods find their quotas and capacity.
The pod list is asked for before the quota objects are read, and its helper process
(pod_reader.py) parses it meanwhile: the entries wait in a queue until the quotas are
in, so the time the API server takes to send the pods overlaps with reading the quotas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from quotree_operator.api import KubeAPI
from quotree_operator.inputs import Inputs
from quotree_operator.pod_entries import PodEntry

__all__ = ["load"]

logger = logging.getLogger("quotree.operator")

Batch = tuple[list[PodEntry], str]


async def load(inputs: Inputs, kube: KubeAPI) -> str:
    """Rebuild `inputs`' engine from the API; returns the resourceVersion of the pod list,
    for the pod watch to start from."""
    for body in await kube.list_all("ResourceFlavor"):
        inputs.observe_flavor(body, deleted=False)
    for body in await kube.list_all("nodes"):
        inputs.observe_cluster_node(body, deleted=False)
    batches: asyncio.Queue[Batch | None] = asyncio.Queue()

    async def fetch() -> None:
        try:
            async with contextlib.aclosing(kube.list_pod_entries()) as pages:
                async for batch in pages:
                    batches.put_nowait(batch)
        finally:
            batches.put_nowait(None)

    fetching = asyncio.ensure_future(fetch())
    await asyncio.sleep(0)  # its request goes out now, before the quota objects are read
    try:
        started = time.monotonic()
        for kind in ("Cohort", "ElasticQuota"):
            async for page, page_version in kube.list_pages(kind):
                inputs.list_versions[kind] = page_version
                for body in page:
                    inputs.observe_quota_object(body, deleted=False)
        quotas_done = time.monotonic()
        count, version = await _take_pods(inputs, batches)
        await fetching  # the pod list's error, if it failed
    finally:
        if not fetching.done():
            fetching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await fetching
    logger.info(
        "loaded %d quota objects (%.1fs) and %d pods (%.1fs) from the API",
        len(inputs.quota_objects),
        quotas_done - started,
        count,
        time.monotonic() - quotas_done,
    )
    return version


async def _take_pods(inputs: Inputs, batches: asyncio.Queue[Batch | None]) -> tuple[int, str]:
    """The pods' entries into the engine, in the list's order, until the list ends; the
    count and the list's resourceVersion (the last batch's)."""
    # The live trees are read off the quota objects in threads meanwhile (nothing changes
    # the configuration until the load is done): the first decision only computes accounts.
    ahead = [asyncio.to_thread(tree.build_ahead) for tree in inputs.engine.trees.values()]
    building = asyncio.ensure_future(asyncio.gather(*ahead))
    count, version = 0, ""
    try:
        while (batch := await batches.get()) is not None:
            entries, version = batch
            for entry in entries:
                inputs.take_pod(entry)
            count += len(entries)
    finally:
        await building
    return count, version
