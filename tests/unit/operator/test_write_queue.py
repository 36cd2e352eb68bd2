"""The queue of writes due per pod (quotree_operator/write_queue.py)."""

from __future__ import annotations

import asyncio

from quotree_operator.write_queue import WriteQueue


async def test_a_write_that_fails_does_not_strand_the_ones_behind_it() -> None:
    written: list[tuple[str, str]] = []

    async def write(key: str, value: str) -> None:
        await asyncio.sleep(0)
        if key == "team/bad":
            raise RuntimeError("the API answered nonsense")
        written.append((key, value))

    queue = WriteQueue("the test write", write, workers=1)  # one worker: it must go on
    for key in ("team/a", "team/bad", "team/b"):
        queue.put(key, "in-quota")
    await asyncio.wait_for(queue.drained(), 5)
    assert written == [("team/a", "in-quota"), ("team/b", "in-quota")]
    assert len(queue) == 0


async def test_at_most_the_workers_write_at_once_and_the_queue_drains_in_order() -> None:
    in_flight, most = 0, 0
    written: list[str] = []

    async def write(key: str, value: str) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        written.append(key)

    queue = WriteQueue("the test write", write, workers=3)
    keys = [f"team/p{i:03d}" for i in range(100)]
    for key in keys:
        queue.put(key, "over-quota")
    await asyncio.wait_for(queue.drained(), 5)
    assert most == 3
    assert sorted(written) == keys
    assert written[:3] == keys[:3]  # oldest first


async def test_a_write_put_as_the_last_worker_finishes_is_still_made() -> None:
    # The worker has written "a" and found nothing more; its task is done but its
    # done-callback has not run yet when "b" is put. "b" must still get a worker.
    written: list[str] = []

    async def write(key: str, value: str) -> None:
        written.append(key)  # answered at once: the worker ends within one step

    queue = WriteQueue("the test write", write, workers=1)
    queue.put("team/a", "in-quota")
    await asyncio.sleep(0)  # the worker runs, writes a and ends
    queue.put("team/b", "in-quota")
    await asyncio.wait_for(queue.drained(), 2)
    assert written == ["team/a", "team/b"]
