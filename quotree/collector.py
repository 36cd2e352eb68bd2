"""The cyclic garbage collector paused while a large input is read into lasting objects.

Why a module of its own: a reader that builds millions of objects that hold no cycles
and mostly stay (the simulator's YAML, `fast_yaml.py`) had the collector's passes walk
that growing heap again and again: a fifth of the simulator's load (bench/RESULTS.md).
The operator's start-up has the same cause but keeps the collector off past the load,
until its first decisions (`quotree_operator.controller.tune_after_first_decisions`),
so it turns it off and on itself.
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
