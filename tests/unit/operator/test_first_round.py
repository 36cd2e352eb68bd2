"""A new leader's first gate removals before the writes that can wait (first_round.py)."""

from __future__ import annotations

import asyncio
import time

from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.first_round import FirstRound
from tests.unit.operator import fake_kube


def leader() -> Controller:
    controller = Controller(OperatorConfig(), kube=fake_kube.FakeKube())
    controller.set_leading(True)
    return controller


async def test_the_hold_lasts_until_the_first_decisions_and_their_gate_removals() -> None:
    controller = leader()
    inputs = controller.inputs
    inputs.admitting.add("team/p")
    first = FirstRound(inputs, limit=10)
    waiting = asyncio.ensure_future(first.wait())
    await asyncio.sleep(0.15)
    assert not waiting.done()  # nothing decided yet
    inputs.signals.decided.set()
    await asyncio.sleep(0.15)
    assert not waiting.done()  # decided, but a gate removal is still under way
    inputs.admitting.discard("team/p")
    await asyncio.wait_for(waiting, 1)
    inputs.admitting.add("team/q")  # later admissions of the same term hold nothing
    await asyncio.wait_for(first.wait(), 0.05)


async def test_the_hold_ends_at_its_limit() -> None:
    controller = leader()
    first = FirstRound(controller.inputs, limit=0.2)
    started = time.monotonic()
    await asyncio.wait_for(first.wait(), 2)  # never decided: the limit ends it
    assert 0.15 <= time.monotonic() - started < 1.5


async def test_a_new_term_holds_again_and_a_standby_never_holds() -> None:
    controller = leader()
    inputs = controller.inputs
    inputs.signals.decided.set()
    first = FirstRound(inputs, limit=10)
    await asyncio.wait_for(first.wait(), 1)
    controller.set_leading(False)
    await asyncio.wait_for(first.wait(), 0.05)  # a standby writes nothing: no hold
    controller.set_leading(True)  # a new term: its first decisions are not made yet
    waiting = asyncio.ensure_future(first.wait())
    await asyncio.sleep(0.15)
    assert not waiting.done()
    inputs.signals.decided.set()
    await asyncio.wait_for(waiting, 1)


async def test_a_waiter_cancelled_does_not_end_the_others_wait() -> None:
    controller = leader()
    first = FirstRound(controller.inputs, limit=10)
    one = asyncio.ensure_future(first.wait())
    two = asyncio.ensure_future(first.wait())
    await asyncio.sleep(0.05)
    one.cancel()
    await asyncio.sleep(0.05)
    assert not two.done()
    controller.inputs.signals.decided.set()
    await asyncio.wait_for(two, 1)
