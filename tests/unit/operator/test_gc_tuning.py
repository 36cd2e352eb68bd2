"""The operator's start-up spares the event loop the garbage collector's full passes over
what it made (controller.tune_garbage_collection): frozen, and the youngest generation
collected less often; the collector is on again after. While the lists load, and until
the first decisions are handed on, it is off (`tune_after_first_decisions`); the
simulator's YAML loader pauses it around its load (quotree/collector.py)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from quotree.collector import paused as collector_paused
from quotree_operator.controller import (
    GC_YOUNG,
    tune_after_first_decisions,
    tune_garbage_collection,
)
from quotree_operator.inputs import Signals


def test_the_start_up_is_frozen_and_the_young_generation_collected_less_often() -> None:
    before = gc.get_threshold()
    try:
        tune_garbage_collection()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG, before[1], before[2])
        assert before[0] < GC_YOUNG
    finally:  # the test process keeps its own collector
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_collector_is_off_while_the_start_up_lists_load_and_on_again_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the list failed")
    assert gc.isenabled()


def test_a_collector_someone_else_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The collector off, as the start-up leaves it after the load; the test process's own
    collector (on, unfrozen, its thresholds) given back after."""
    before = gc.get_threshold()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*before)


@pytest.mark.usefixtures("collector_off")
async def test_the_start_up_is_frozen_once_the_first_decisions_are_handed_on() -> None:
    signals = Signals()
    waiting = asyncio.ensure_future(tune_after_first_decisions(signals, limit=30))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert not gc.isenabled()  # no collection before the first admissions
    signals.decided.set()
    await asyncio.wait_for(waiting, 5)
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("collector_off")
async def test_a_standby_is_frozen_after_the_limit() -> None:
    await asyncio.wait_for(tune_after_first_decisions(Signals(), limit=0.05), 5)
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
