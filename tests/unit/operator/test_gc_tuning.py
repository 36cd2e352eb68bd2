"""The operator's start-up spares the event loop the garbage collector's full passes over
what it made (controller.tune_garbage_collection): frozen, and the youngest generation
collected less often; the collector stays on. While the lists load, it is off
(quotree/collector.py, as the simulator's YAML loader pauses it)."""

from __future__ import annotations

import gc

import pytest

from quotree.collector import paused as collector_paused
from quotree_operator.controller import GC_YOUNG, tune_garbage_collection


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
