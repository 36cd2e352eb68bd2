"""A watch chunk of many events does not hold the event loop: other work (the pod CREATE
answers of admission at creation) gets its turn between them (resources.events_of)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from quotree_operator.resources import EVENTS_PER_TURN, events_of


class _Content:
    def __init__(self, chunk: bytes) -> None:
        self.chunk = chunk

    async def iter_any(self) -> AsyncIterator[bytes]:
        yield self.chunk


class _Response:
    def __init__(self, chunk: bytes) -> None:
        self.content = _Content(chunk)


def test_other_tasks_run_between_the_events_of_one_chunk() -> None:
    events = 5 * EVENTS_PER_TURN
    chunk = b"".join(
        json.dumps({"type": "ADDED", "object": {"n": i}}).encode() + b"\n" for i in range(events)
    )

    async def scenario() -> list[int]:
        ticks = 0

        async def other() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        seen = []
        async for event in events_of(_Response(chunk), "pods"):
            seen.append(ticks)
            assert event["type"] == "ADDED"
        task.cancel()
        return seen

    seen = asyncio.run(scenario())
    assert len(seen) == events
    assert seen[-1] - seen[0] >= 4  # the other task ran while the chunk was read
