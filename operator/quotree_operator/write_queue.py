"""Writes due per pod (standing labels, Pending events): a map of pod -> what to write,
drained by a few workers.

After a start-up against a cluster whose running pods carry no standing label yet (or when
a guarantee moves under thousands of pods, or thousands of pods wait), tens of thousands of
writes are due at once, and the API takes them a few at a time. One asyncio task per
write, each parked on a semaphore until its turn, held about 2.4 KiB per pod (the task, its
coroutine frames, the closure and the semaphore's waiter): half of a new leader's memory
per pod (bench/history/2026-11-27-2.md, "Memory per pod: writes due are a queue, not
tasks"). Here a pod whose write waits is one entry of a dict, and a newer value for a pod
replaces the one not yet written. One pod's write is never made by two workers at once,
so the last value decided is the one that stays.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["WriteQueue"]

logger = logging.getLogger("quotree.operator")


class WriteQueue:
    """See module docstring. `write(key, value)` makes one pod's write (with its retries);
    at most `workers` writes are in flight. `what` names the writes in the log."""

    def __init__(
        self, what: str, write: Callable[[str, str], Awaitable[None]], workers: int
    ) -> None:
        self._what = what
        self._write = write
        self._limit = workers
        self._due: dict[str, str] = {}  # pod key -> the value to write, oldest first
        self._writing: set[str] = set()  # keys a worker is writing now
        # Workers still in their loop: counted down as one leaves it, in the same step as
        # its last look at `_due` (a task's done-callback comes later, and a value put in
        # between would find no worker to write it).
        self._running = 0
        self._workers: set[asyncio.Task[None]] = set()  # kept referenced while they run
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        """Writes decided and not yet made (those in flight included)."""
        return len(self._due) + len(self._writing)

    def put(self, key: str, value: str) -> None:
        """Write `value` for pod `key` soon (instead of any value of it not yet written)."""
        self._due[key] = value
        self._idle.clear()
        while self._running < min(self._limit, len(self._due)):
            self._running += 1
            task = asyncio.ensure_future(self._work())
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    async def drained(self) -> None:
        """Wait until every write put so far is made (or given up)."""
        await self._idle.wait()

    def _next(self) -> str | None:
        """The oldest due key that no worker is writing (at most `workers` are skipped)."""
        for key in self._due:
            if key not in self._writing:
                return key
        return None

    async def _work(self) -> None:
        try:
            while (key := self._next()) is not None:
                value = self._due.pop(key)
                self._writing.add(key)
                try:
                    await self._write(key, value)
                except Exception:  # a worker that died would strand the writes behind it
                    logger.exception("%s for pod %s failed", self._what, key)
                finally:
                    self._writing.discard(key)
        finally:
            self._running -= 1
        if not self._due and not self._writing:
            self._idle.set()
