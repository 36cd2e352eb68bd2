"""A standby replica keeps a warm engine and writes nothing; a new leader admits first.

The controller runs with the in-memory API (fake_kube.py): its decision loop and status
writer are started as the entry point starts them, with pods that fit waiting behind the
gate and quotas whose statuses are out of date, so a leader would write at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from quotree.engine import PodState
from quotree_operator import actuator as actuator_mod
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from tests.unit.objects import node, pod, quota
from tests.unit.operator.fake_kube import FakeKube

PODS = 6


class OrderedKube(FakeKube):
    """Also notes every write in the order it was made."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []

    async def admit(self, namespace: str, name: str, *args: Any, **kwargs: Any) -> None:
        self.order.append(f"admit {name}")
        await super().admit(namespace, name, *args, **kwargs)

    async def patch_quota_object(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any] | None,
        annotations: Mapping[str, str] | None,
    ) -> None:
        self.order.append(f"status {name}")
        await super().patch_quota_object(kind, namespace, name, status, annotations)


def writes(kube: FakeKube) -> dict[str, int]:
    """How many writes of each kind the API was asked for."""
    return {
        "admits": len(kube.admits),
        "pod labels": len(kube.pod_labels),
        "namespace labels": len(kube.namespace_labels),
        "evictions": len(kube.evictions),
        "job suspensions": len(kube.job_suspends),
        "pod events": len(kube.pod_events),
        "quota events": len(kube.quota_events),
        "object events": len(kube.object_events),
        "status patches": len(kube.patches),
    }


def loaded(kube: FakeKube) -> Controller:
    """A controller that has taken in a quota with room for every pod, and PODS gated pods."""
    controller = Controller(OperatorConfig(), kube=kube)
    inputs = controller.inputs
    inputs.observe_cluster_node(node("n", {"cpu": "100"}), deleted=False)
    inputs.observe_quota_object(quota("team", "team", min={"cpu": "10"}), deleted=False)
    for i in range(PODS):
        body = pod("team", f"p{i}", uid=f"u-{i}")
        kube.put_pod(body)
        inputs.observe_pod(body, deleted=False)
    return controller


@contextlib.asynccontextmanager
async def running(controller: Controller) -> AsyncIterator[None]:
    """The decision loop and the status writer, as the entry point runs them."""
    tasks = [
        asyncio.create_task(controller.decision_loop()),
        asyncio.create_task(controller.status_writer.run()),
    ]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def settle(controller: Controller, kube: FakeKube, seconds: float) -> None:
    """Let the loops run for `seconds`, the watch bringing back what was written."""
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
        for body in kube.pods.values():
            controller.inputs.observe_pod(body, deleted=False)


async def test_a_standby_keeps_its_engine_current_and_writes_nothing() -> None:
    kube = FakeKube()
    controller = loaded(kube)
    async with running(controller):
        # More input while standby: a pod goes, another comes; the engine follows.
        done = pod("team", "p0", uid="u-0", phase="Succeeded")
        kube.put_pod(done)
        controller.inputs.observe_pod(done, deleted=False)
        late = pod("team", "late", uid="u-late")
        kube.put_pod(late)
        controller.inputs.observe_pod(late, deleted=False)
        await settle(controller, kube, 1.5)
        assert writes(kube) == dict.fromkeys(writes(kube), 0)
        assert "team/late" in controller.engine.pods
        assert "team/p0" not in controller.engine.pods
        assert all(r.state is PodState.PENDING for r in controller.engine.pods.values())
        # The same replica, once it leads, writes: the test above could fail.
        controller.set_leading(True)
        await settle(controller, kube, 1.5)
    assert writes(kube)["admits"] == PODS  # p1 to p5 and the late one
    assert writes(kube)["status patches"] >= 1


async def test_writes_under_way_when_the_lead_is_lost_are_not_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(actuator_mod, "RETRY_DELAY", 0.0)
    kube = FakeKube()
    controller = loaded(kube)
    controller.signals.leading = True
    decisions = controller.engine.decide(0.0)
    assert len(decisions.admitted) == PODS
    controller.actuator.carry_out(decisions)
    controller.set_leading(False)  # before any of the writes got its turn
    await asyncio.gather(*list(controller.actuator._tasks))
    assert writes(kube) == dict.fromkeys(writes(kube), 0)
    assert controller.writes.refused >= PODS
    # Read back, the pods are still gated: they wait again, for the next leader.
    assert all(r.state is PodState.PENDING for r in controller.engine.pods.values())


async def test_a_new_leader_admits_before_it_writes_any_status() -> None:
    kube = OrderedKube()
    controller = loaded(kube)
    async with running(controller):
        controller.set_leading(True)
        await settle(controller, kube, 1.5)
    admits = [i for i, write in enumerate(kube.order) if write.startswith("admit")]
    statuses = [i for i, write in enumerate(kube.order) if write.startswith("status")]
    assert len(admits) == PODS
    assert statuses, kube.order
    assert max(admits) < min(statuses), kube.order
