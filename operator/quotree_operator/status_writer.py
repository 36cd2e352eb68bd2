"""Writes what changed in the Cohorts' and ElasticQuotas' statuses and annotations.

One coalescing writer: woken by `Signals.status_dirty`, it compares each quota object's
desired status (status.py, pure) with what it last wrote (`StatusMemory`) and patches only
the difference. Writes are spaced by at least STATUS_INTERVAL and by STATUS_BACKOFF times
as long as the last round took, so under a burst of pod events the statuses cost a bounded
share of the API server, and admissions keep the rest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from quotree_operator.client import Kube, KubeError
from quotree_operator.inputs import Inputs, QuotaObject
from quotree_operator.status import Desired, StatusMemory, desired

__all__ = ["STATUS_BACKOFF", "STATUS_BUSY_INTERVAL", "STATUS_INTERVAL", "StatusWriter"]

logger = logging.getLogger("quotree.operator")

STATUS_INTERVAL = 0.5  # status writes are coalesced over at least this long
# ... and over STATUS_BACKOFF times as long as the last round of writes took: under a burst
# every quota's status changes all the time, and rewriting all of them every 0.5 s would
# take most of the API server from the admissions (the writer keeps to ~1/(1+3) of the time).
STATUS_BACKOFF = 3.0
# While pods are being admitted, at least this long: a status round rewrites every quota
# whose numbers moved (all of them in a burst), which took as many API writes as the
# admissions themselves; the numbers are current again within this long (issue 12).
STATUS_BUSY_INTERVAL = 2.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusWriter:
    """See module docstring."""

    def __init__(self, kube: Kube, inputs: Inputs, memory: StatusMemory, concurrency: int) -> None:
        self.kube = kube
        self.inputs = inputs
        self.memory = memory
        self._writes = asyncio.Semaphore(max(4, concurrency // 6))

    async def run(self) -> None:
        """Write what changed, coalesced (see STATUS_BACKOFF), while this replica leads."""
        signals = self.inputs.signals
        admissions = signals.admissions
        while True:
            await signals.status_dirty.wait()
            signals.status_dirty.clear()
            started = time.monotonic()
            if signals.leading:
                try:
                    await self.write_statuses()
                except Exception:
                    logger.exception("status writing failed; retrying")
            spent = time.monotonic() - started
            busy = signals.admissions != admissions
            admissions = signals.admissions
            interval = STATUS_BUSY_INTERVAL if busy else STATUS_INTERVAL
            await asyncio.sleep(max(interval, spent * STATUS_BACKOFF))

    async def write_statuses(self) -> None:
        now = _now()
        writes = []
        for name, obj in list(self.inputs.quota_objects.items()):
            is_quota = obj.kind == "ElasticQuota"
            new = desired(self.inputs.engine, name, is_quota, self.inputs.bad_specs.get(name))
            patch, annotations = self.memory.changes(name, new, now)
            if patch is None and annotations is None:
                continue
            writes.append(self._write(name, obj, new, patch, annotations))
        if writes:
            await asyncio.gather(*writes)

    async def _write(
        self,
        name: str,
        obj: QuotaObject,
        new: Desired,
        patch: dict[str, Any] | None,
        annotations: dict[str, str] | None,
    ) -> None:
        try:
            async with self._writes:
                await self.kube.patch_quota_object(
                    obj.kind, obj.namespace, name, patch, annotations
                )
        except KubeError as exc:
            if exc.status != 404:
                logger.warning("%s", exc)
                self.inputs.signals.status_dirty.set()
            return
        self.memory.wrote(name, new, patch)
