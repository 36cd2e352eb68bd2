"""A new leader's gate removals go first: the writes that can wait hold until they are done.

Why a module of its own: two writers wait for the same moment. After a start-up or a
failover, the new leader's first decisions remove the gates of the pods that waited, and
much else is due at the same time: every quota's status (the first status round), and,
against a cluster whose running pods carry no standing label yet, a label for each of
them (29,000 in `bench/bench_scale.py`). Each label is an API write, and a watch event the
operator reads back; made alongside the gate removals, they take the API server's and the
operator's own time from the admissions. So the first status round (`status_writer.py`)
and the actuator's standing labels and Pending events (`actuator.py`) wait here: until the
new leader has decided once and the gate removals it started are done, for at most
FIRST_ROUND_HOLD seconds. After that, in the same term, nothing waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from quotree_operator.inputs import Inputs

__all__ = ["FIRST_ROUND_HOLD", "FirstRound", "hold_for_admissions"]

#: After this replica takes the lead, its first round of writes that can wait holds for the
#: first decisions and for their gate removals to be done, but not longer than this (seconds).
FIRST_ROUND_HOLD = 30.0


async def hold_for_admissions(inputs: Inputs, limit: float = FIRST_ROUND_HOLD) -> None:
    """Wait until the decision loop has decided (`Signals.decided`) and the gate removals
    it started are done (`Inputs.admitting` empty), for at most `limit` seconds."""
    signals = inputs.signals
    deadline = time.monotonic() + limit
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limit):
            await signals.decided.wait()
    while inputs.admitting and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


class FirstRound:
    """One hold per leadership term (`Signals.terms`), shared by every writer that waits
    on it: the first wait of a term starts it, the others join it, and once it is over
    the term's waits return at once. A standby holds nothing (it writes nothing)."""

    def __init__(self, inputs: Inputs, limit: float = FIRST_ROUND_HOLD) -> None:
        self._inputs = inputs
        self._limit = limit
        self._term = -1  # the term `_hold` is for
        self._hold: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        """Return once this term's first gate removals are done (see module docstring)."""
        signals = self._inputs.signals
        if not signals.leading:
            return
        if self._hold is None or self._term != signals.terms:
            self._term = signals.terms
            self._hold = asyncio.ensure_future(hold_for_admissions(self._inputs, self._limit))
        if not self._hold.done():
            # Shielded: a writer cancelled while it waits must not end the others' wait.
            await asyncio.shield(self._hold)
