"""The cyclic garbage collector paused while a large input is read into lasting objects.

Why a module of its own: two readers build millions of objects that hold no cycles and
mostly stay (the simulator's YAML, `fast_yaml.py`; the operator's start-up lists, its
controller), and with the collector on, its passes walked that growing heap again and
again: a fifth of the simulator's load and as much CPU as the operator's parse itself
(bench/RESULTS.md). Both pause it the same way, here.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off inside, on again after (also when the body raises), unless it was
    off already. A cycle made inside is found by the first pass after."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
