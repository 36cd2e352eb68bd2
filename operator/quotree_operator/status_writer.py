"""Writes what changed in the Cohorts' and ElasticQuotas' statuses and annotations.

One coalescing writer: woken by `Signals.status_dirty`, it compares the desired status
(status.py, pure) of each quota object that may have changed (`StatusDirty`, the engine's
trees' `take_moved`, the members' ancestors) with what it last wrote (`StatusMemory`) and
patches only the difference: a round's work follows what changed, not the number of
quotas. Writes are spaced by at least STATUS_INTERVAL and by STATUS_BACKOFF times
as long as the last round took (at most STATUS_MAX_PAUSE), so under a burst of pod events
the statuses cost a bounded share of the API server, and admissions keep the rest. A write
that fails is not remembered as written: the next round writes it again, so whatever could
not be written while the API server was away is written once it answers. When an object's
Valid condition turns False (a cycle, a duplicate name, ...), a Warning Event on the object
says so too, once per reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from quotree_operator.api import KubeAPI
from quotree_operator.desired_status import Desired, StatusMemory, desired
from quotree_operator.inputs import Inputs, QuotaObject
from quotree_operator.kube_errors import KubeError, write_event_retrying
from quotree_operator.metrics import METRICS

__all__ = [
    "FIRST_ROUND_HOLD",
    "STATUS_BACKOFF",
    "STATUS_BUSY_INTERVAL",
    "STATUS_FULL_EVERY",
    "STATUS_INTERVAL",
    "STATUS_MAX_PAUSE",
    "StatusWriter",
    "pause",
]

logger = logging.getLogger("quotree.operator")

STATUS_INTERVAL = 0.5  # status writes are coalesced over at least this long
# ... and over STATUS_BACKOFF times as long as the last round of writes took: under a burst
# every quota's status changes all the time, and rewriting all of them every 0.5 s would
# take most of the API server from the admissions (the writer keeps to ~1/(1+3) of the time).
STATUS_BACKOFF = 3.0
# ... but never longer than this: a round that took long because the API server (or its
# etcd) was down must not delay the statuses it could not write once it is back.
STATUS_MAX_PAUSE = 5.0
# While pods are being admitted, at least this long: a status round rewrites every quota
# whose numbers moved (all of them in a burst), and each write costs the API server
# several milliseconds of CPU, more than a pod's creation (bench/RESULTS.md); the numbers
# are current again within this long.
STATUS_BUSY_INTERVAL = 5.0
#: Every object is compared at least this often (seconds), whatever the inputs said
#: changed: a safety net that costs one O(quotas) round per interval, never one per flush.
STATUS_FULL_EVERY = 600.0
#: A round with more writes than this uses BIG_ROUND_WIDTH times as many writers.
BIG_ROUND, BIG_ROUND_WIDTH = 500, 4
#: A Warning Event the API did not take: first and longest wait, and for how long it is tried.
WARNING_RETRY = (0.5, 5.0, 300.0)
#: After this replica takes the lead, its first round waits for the first decisions and
#: for their gate removals to be done, but not longer than this (seconds).
FIRST_ROUND_HOLD = 30.0
#: Objects compared between two turns of the event loop: a round over 11,000 objects
#: never holds the webhooks, the watches or the admissions for long.
COMPARE_SLICE = 200


def pause(busy: bool, spent: float) -> float:
    """Seconds between two rounds: STATUS_INTERVAL, STATUS_BUSY_INTERVAL while pods are
    being admitted, at least STATUS_BACKOFF times the last round's `spent`, at most
    STATUS_MAX_PAUSE."""
    interval = STATUS_BUSY_INTERVAL if busy else STATUS_INTERVAL
    return min(max(interval, spent * STATUS_BACKOFF), STATUS_MAX_PAUSE)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusWriter:
    """See module docstring."""

    def __init__(
        self, kube: KubeAPI, inputs: Inputs, memory: StatusMemory, concurrency: int
    ) -> None:
        self.kube = kube
        self.inputs = inputs
        self.memory = memory
        self._width = max(4, concurrency // 6)
        self._writes = asyncio.Semaphore(self._width)
        self._tasks: set[asyncio.Task[None]] = set()
        self._rounds = 0  # rounds written so far (the first one is logged)
        self._full_at = time.monotonic()  # the last round that compared every object

    async def run(self) -> None:
        """Write what changed, coalesced (see STATUS_BACKOFF), while this replica leads."""
        signals = self.inputs.signals
        admissions = signals.admissions
        while True:
            await signals.status_dirty.wait()
            if signals.leading and not signals.decided.is_set():
                await self.hold_for_admissions()
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
            await asyncio.sleep(pause(busy, spent))

    async def hold_for_admissions(self, limit: float = FIRST_ROUND_HOLD) -> None:
        """A new leader's first round (after a start-up or a failover: every object is due)
        waits until the first decisions are carried out: until the decision loop has decided
        and the gate removals it started are done, for at most `limit` seconds. Admissions
        go first; the statuses follow."""
        signals = self.inputs.signals
        deadline = time.monotonic() + limit
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit):
                await signals.decided.wait()
        while self.inputs.admitting and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    async def write_statuses(self) -> None:
        now = _now()
        writes: list[
            tuple[str, QuotaObject, Desired, dict[str, Any] | None, dict[str, str] | None]
        ] = []
        due = self.due()
        for index, key in enumerate(due):
            if index % COMPARE_SLICE == COMPARE_SLICE - 1:
                await asyncio.sleep(0)  # let the webhooks and the decisions run
            obj = self.inputs.quota_objects.get(key)
            if obj is None:
                continue  # deleted meanwhile
            name = obj.name
            is_quota = obj.kind == "ElasticQuota"
            new = desired(self.inputs.engine, name, is_quota, self.inputs.bad_specs.get(name))
            patch, annotations = self.memory.changes(key, new, now)
            if patch is None and annotations is None:
                continue
            writes.append((key, obj, new, patch, annotations))
        METRICS.status_round(len(due), len(writes))
        if writes:
            # A few writers take the writes in turn: one coroutine per write would be
            # 11,000 at once after a start-up at 10,000 quotas (memory).
            queue = iter(writes)

            async def writer() -> None:
                for args in queue:
                    await self._write(*args)

            # A round of thousands (after a start-up against a changed cluster: two PATCHes
            # per object at 10,000 quotas) gets more writers: the API server's store
            # commits concurrent writes together, and one round of 22,000 PATCHes took
            # over 5 minutes with 8. Admissions keep their own budget.
            # Not while admissions are under way: they go first.
            big = len(writes) > BIG_ROUND and not self.inputs.admitting
            width = self._width * BIG_ROUND_WIDTH if big else self._width
            await asyncio.gather(*(writer() for _ in range(min(len(writes), width))))
        if len(due) == len(self.inputs.quota_objects):
            # Counted from the end of a full round: one that took minutes (22,000 PATCHes
            # after a start-up) is not followed at once by the safety net's next one.
            self._full_at = time.monotonic()
        if not self._rounds:
            logger.info(
                "first status round: %d objects compared, %d written", len(due), len(writes)
            )
        self._rounds += 1

    def due(self) -> list[str]:
        """The keys of the quota objects whose status may have changed since the last round:
        the tree members whose pods or runtime changed and their ancestors, the objects whose
        last write failed; every object after a configuration change (inputs.StatusDirty),
        and at least every STATUS_FULL_EVERY seconds."""
        inputs, engine = self.inputs, self.inputs.engine
        everything, names, keys = inputs.dirty.take()
        engine.refresh()  # the explicit step before this round's reads of the trees
        moved = engine.take_moved()
        if moved is None:
            everything = True
        elif not everything:
            names |= moved
        clock = time.monotonic()
        if clock - self._full_at >= STATUS_FULL_EVERY:
            everything = True
        if everything:
            self._full_at = clock
            return list(inputs.quota_objects)
        for name in list(names):
            tree = engine.tree_of(name)
            member = tree.member(name)
            if member is not None:
                names.update(walk.name for walk in tree.ancestors(member))
        for name in names:
            keys |= inputs.keys_by_name.get(name, set())
        return sorted(keys)

    async def _write(
        self,
        key: str,
        obj: QuotaObject,
        new: Desired,
        patch: dict[str, Any] | None,
        annotations: dict[str, str] | None,
    ) -> None:
        # What was on the object before this write: read now, since while the write is
        # under way the watch may bring the object back with it (remember_object).
        before = self.memory.written.get(key)
        try:
            async with self._writes:
                await self.kube.patch_quota_object(
                    obj.kind, obj.namespace, obj.name, patch, annotations
                )
        except KubeError as exc:
            if exc.status != 404:
                if self.inputs.signals.leading:  # else: the lead was lost during the round
                    logger.warning("%s", exc)
                self.inputs.dirty.again(key)  # compared (and written) again next round
                self.inputs.signals.status_dirty.set()
            return
        broken = newly_invalid(before, new)
        self.memory.wrote(key, new, patch)
        if broken is not None:
            task = asyncio.ensure_future(self._warn(obj, *broken))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _warn(self, obj: QuotaObject, reason: str, message: str) -> None:
        """The Warning Event, tried again (with backoff) while the API does not answer."""
        event_name = f"{obj.name}.{uuid.uuid4().hex[:16]}"  # one name for every try

        async def write() -> None:
            async with self._writes:
                await self.kube.quota_object_event(
                    obj.kind,
                    obj.namespace,
                    obj.name,
                    uid=obj.uid,
                    reason=reason,
                    message=message,
                    event_name=event_name,
                )

        first, longest, give_up_after = WARNING_RETRY
        failed = await write_event_retrying(
            write, first=first, longest=longest, give_up_after=give_up_after
        )
        if failed is not None:
            logger.warning("%s", failed)


def _valid(desired_: Desired | None) -> dict[str, Any]:
    for condition in (desired_.status.get("conditions") or []) if desired_ else []:
        if condition.get("type") == "Valid":
            return dict(condition)
    return {}


def newly_invalid(old: Desired | None, new: Desired) -> tuple[str, str] | None:
    """(reason, message) when `new`'s Valid condition turns False, or False for another
    reason, compared with `old` (what was last written); else None."""
    now, before = _valid(new), _valid(old)
    if now.get("status") != "False":
        return None
    if before.get("status") == "False" and before.get("reason") == now.get("reason"):
        return None
    return str(now.get("reason") or "Invalid"), str(now.get("message") or "")
