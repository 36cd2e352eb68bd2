"""heap.trim gives the pages of freed heap blocks back to the system (glibc)."""

from __future__ import annotations

import asyncio
import ctypes
import os

import pytest

from quotree_operator import heap

BLOCK = 64 * 1024  # below glibc's mmap threshold: these live on the heap
BLOCKS = 1600  # 100 MiB


def _rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(heap._TRIM is None, reason="this C library has no malloc_trim")
def test_trim_returns_the_pages_of_freed_heap_blocks() -> None:
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
    assert all(blocks)
    for block in blocks:
        ctypes.memset(block, 1, BLOCK)  # resident
    kept = blocks[9::10]  # every tenth stays: the heap's top cannot simply shrink
    for index, block in enumerate(blocks):
        if index % 10 != 9:
            libc.free(block)
    before = _rss_mib()
    assert heap.trim() is True
    after = _rss_mib()
    for block in kept:
        libc.free(block)
    assert before - after > 50, (before, after)  # of the 90 MiB freed


async def test_keep_trimmed_trims_on_its_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(heap, "_TRIM", calls.append)
    task = asyncio.ensure_future(heap.keep_trimmed(every=0.01))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(calls) >= 3
    assert set(calls) == {0}
