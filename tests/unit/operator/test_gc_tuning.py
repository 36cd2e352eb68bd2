"""The operator's start-up spares the event loop the garbage collector's full passes over
what it made (controller.tune_garbage_collection): frozen, and the youngest generation
collected less often; the collector stays on."""

from __future__ import annotations

import gc

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
