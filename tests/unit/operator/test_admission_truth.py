"""The cluster, not the engine's memory, says which pods are admitted.

A gate removal that fails (the API server died mid-write) leaves the pod counted until a
read tells whether the write was applied; a pod the engine counts as admitted while the
watch or a list shows it gated waits again, unless a gate removal of ours is under way.
The API is a scripted fake (no cluster); the engine and the operator's inputs are real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from quotree.engine import PodState
from quotree_operator import actuator as actuator_mod
from quotree_operator.actuator import Actuator
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.inputs import Inputs
from quotree_operator.kube_errors import KubeError
from tests.unit.objects import node, pod, quota
from tests.unit.operator import fake_kube

DOWN = KubeError(0, "Pod team/p0: remove gate: ClientConnectorError: connection refused")


def gated(name: str) -> dict[str, Any]:
    return pod("team", name, uid=f"u-{name}")


def ungated(name: str) -> dict[str, Any]:
    return pod("team", name, gates=[], uid=f"u-{name}")


class FakeKube(fake_kube.FakeKube):
    """Admissions and Events fail while `down`; reads fail `reads_down` times; an admission
    may take effect and its answer be lost (`apply_then_fail`, `lose_first_answer`)."""

    def __init__(self) -> None:
        super().__init__()
        self.apply_then_fail = False  # the write lands, the answer is lost
        self.lose_first_answer = False  # the first write lands, its answer is lost, once
        self.lose_event_answer = False  # the next Event is written, its answer lost
        self.reads_down = 0  # this many reads fail before the API answers

    async def admit(
        self, namespace: str, name: str, gates: Sequence[str], *args: Any, **kwargs: Any
    ) -> None:
        await super().admit(namespace, name, gates, *args, **kwargs)
        if self.lose_first_answer:
            self.lose_first_answer = False
            raise DOWN
        if self.apply_then_fail:
            raise DOWN

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        if self.reads_down > 0:  # reads do not depend on `down`
            self.reads_down -= 1
            raise KubeError(503, f"Pod {namespace}/{name}: read: 503 unavailable")
        down, self.down = self.down, None
        try:
            return await super().read_pod(namespace, name)
        finally:
            self.down = down

    async def label_pod(self, namespace: str, name: str, capacity: str) -> None:
        return None

    async def pod_event(self, namespace: str, name: str, **event: Any) -> None:
        await super().pod_event(namespace, name, **event)
        if self.lose_event_answer:
            self.lose_event_answer = False
            raise KubeError(0, "event: ServerDisconnectedError")

    @property
    def events(self) -> list[tuple[str, str, str]]:
        return [(event.name, event.reason, event.message) for event in self.pod_events]


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actuator_mod, "RETRY_DELAY", 0.0)
    monkeypatch.setattr(actuator_mod, "READ_BACKOFF", (0.0, 0.0))
    monkeypatch.setattr(actuator_mod, "EVENT_RETRY_FOR", 5.0)


def setup(kube: FakeKube, pods: int) -> tuple[Inputs, Actuator]:
    controller = Controller(OperatorConfig(reclaim_delay=5.0), kube=kube)
    inputs = controller.inputs
    inputs.observe_cluster_node(node("n", {"cpu": "100"}), deleted=False)
    inputs.observe_quota_object(
        quota("team", "team", min={"cpu": "2"}, max={"cpu": "2"}), deleted=False
    )
    for i in range(pods):
        body = gated(f"p{i}")
        kube.put_pod(body)
        inputs.observe_pod(body, deleted=False)
    return inputs, Actuator(kube, inputs, concurrency=4)


def state(inputs: Inputs, name: str) -> PodState:
    return inputs.engine.pods[f"team/{name}"].state


def used(inputs: Inputs) -> int:
    return inputs.engine.report("team").used.get("cpu", 0)


async def decide_and_carry_out(inputs: Inputs, actuator: Actuator) -> list[str]:
    decisions = inputs.engine.decide(0.0)
    actuator.carry_out(decisions)
    await asyncio.gather(*list(actuator._tasks))
    return [key for key, _ in decisions.admitted]


async def test_a_failed_gate_removal_with_the_api_down_does_not_leak_quota() -> None:
    # The bug: the write failed, the one read failed too, and the engine kept counting the
    # still-gated pod as admitted for good (its quota leaked, the others waited forever).
    kube = FakeKube()
    inputs, actuator = setup(kube, pods=2)
    kube.down = DOWN
    kube.reads_down = 3  # the API answers again at the fourth read
    assert await decide_and_carry_out(inputs, actuator) == ["team/p0", "team/p1"]
    assert kube.pods["team/p0"]["spec"]["schedulingGates"]  # still gated in the cluster
    assert state(inputs, "p0") is state(inputs, "p1") is PodState.PENDING
    assert used(inputs) == 0
    assert not inputs.admitting
    # With the API back, the same pods are admitted, once each, and counted once.
    kube.down = None
    assert await decide_and_carry_out(inputs, actuator) == ["team/p0", "team/p1"]
    assert used(inputs) == 2000
    assert [e[:2] for e in kube.events] == [("p0", "Admitted"), ("p1", "Admitted")]


async def test_while_the_outcome_is_unknown_the_pod_stays_counted() -> None:
    # No other pod may take its place while it may be running.
    kube = FakeKube()
    inputs, actuator = setup(kube, pods=3)
    kube.down = DOWN
    kube.reads_down = 10**6  # the API does not come back during this test
    decisions = inputs.engine.decide(0.0)
    actuator.carry_out(decisions)
    for _ in range(50):
        await asyncio.sleep(0)
    assert inputs.admitting == {"team/p0", "team/p1"}
    assert used(inputs) == 2000
    assert not inputs.engine.decide(1.0).admitted  # p2 does not take a possibly used place
    for task in list(actuator._tasks):
        task.cancel()


async def test_a_write_applied_before_its_answer_was_lost_stays_admitted() -> None:
    kube = FakeKube()
    inputs, actuator = setup(kube, pods=3)
    kube.apply_then_fail = True
    await decide_and_carry_out(inputs, actuator)
    assert kube.pods["team/p0"]["spec"]["schedulingGates"] == []
    assert state(inputs, "p0") is state(inputs, "p1") is PodState.ADMITTED
    assert used(inputs) == 2000
    admitted = sorted(e[:2] for e in kube.events if e[1] == "Admitted")
    assert admitted == [("p0", "Admitted"), ("p1", "Admitted")]
    # Only the watch confirms: an older, gated view arriving now changes nothing ...
    inputs.observe_pod(gated("p0"), deleted=False)
    assert state(inputs, "p0") is PodState.ADMITTED
    # ... and once the watch has shown the pod ungated, it is no longer in flight.
    inputs.observe_pod(kube.pods["team/p0"], deleted=False)
    assert "team/p0" not in inputs.admitting


async def test_a_retry_after_a_lost_answer_finds_the_gate_gone_and_says_admitted() -> None:
    # The first write was applied and its answer lost; the retry's test op fails (422),
    # the pod is read again without the gate: admitted, announced once.
    kube = FakeKube()
    inputs, actuator = setup(kube, pods=1)
    kube.lose_first_answer = True
    await decide_and_carry_out(inputs, actuator)
    assert [name for name, _, _ in kube.admits] == ["p0", "p0"]
    assert state(inputs, "p0") is PodState.ADMITTED
    assert [e[:2] for e in kube.events] == [("p0", "Admitted")]


async def test_a_gated_view_during_the_write_does_not_undo_the_admission() -> None:
    kube = FakeKube()
    inputs, actuator = setup(kube, pods=1)
    decisions = inputs.engine.decide(0.0)
    actuator.carry_out(decisions)
    # Before the write task even ran, the watch delivers an update of the gated pod.
    inputs.observe_pod(gated("p0"), deleted=False)
    assert state(inputs, "p0") is PodState.ADMITTED
    assert not inputs.engine.decide(1.0).admitted  # not admitted a second time
    await asyncio.gather(*list(actuator._tasks))
    assert [name for name, _, _ in kube.admits] == ["p0"]


def test_a_gated_pod_the_engine_counts_as_admitted_waits_again_on_the_next_view() -> None:
    # E.g. an admission whose write was never carried out: the next watch event or list
    # that shows the pod gated puts it back to pending, and frees its quota.
    kube = FakeKube()
    inputs, _ = setup(kube, pods=2)
    inputs.engine.decide(0.0)  # admitted in the engine's memory only (no actuator)
    assert used(inputs) == 2000
    inputs.observe_pod(gated("p0"), deleted=False)  # a watch event
    assert state(inputs, "p0") is PodState.PENDING
    inputs.relist_pods([gated("p0"), gated("p1")])  # a list
    assert state(inputs, "p1") is PodState.PENDING
    assert used(inputs) == 0
    # An ungated pod the engine had pending is admitted (the gate was removed elsewhere).
    inputs.relist_pods([ungated("p0"), gated("p1")])
    assert state(inputs, "p0") is PodState.ADMITTED
    assert used(inputs) == 1000


async def test_a_pod_deleted_while_the_api_was_down_is_forgotten() -> None:
    kube = FakeKube()
    inputs, actuator = setup(kube, pods=1)
    kube.down = DOWN
    kube.reads_down = 1
    actuator.carry_out(inputs.engine.decide(0.0))
    del kube.pods["team/p0"]  # deleted meanwhile: the read after the failed write finds nothing
    await asyncio.gather(*list(actuator._tasks))
    assert "team/p0" not in inputs.engine.pods
    assert not inputs.admitting
    assert used(inputs) == 0


async def test_events_the_api_could_not_take_are_written_when_it_answers() -> None:
    kube = FakeKube()
    _, actuator = setup(kube, pods=3)
    kube.down = DOWN
    task = asyncio.ensure_future(actuator._event("team/p0", "Reclaimed", "lent quota is back"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert kube.events == []
    kube.down = None
    await task
    assert kube.events == [("p0", "Reclaimed", "lent quota is back")]


async def test_an_event_whose_answer_was_lost_is_not_written_twice() -> None:
    kube = FakeKube()
    _, actuator = setup(kube, pods=1)
    kube.lose_event_answer = True
    await actuator._event("team/p0", "Admitted", "admitted by quota team")
    assert kube.events == [("p0", "Admitted", "admitted by quota team")]


async def test_a_pending_reason_no_longer_current_is_not_written_late() -> None:
    kube = FakeKube()
    _, actuator = setup(kube, pods=3)
    kube.down = DOWN
    task = asyncio.ensure_future(actuator._event("team/p2", "Pending", "an old reason"))
    for _ in range(20):
        await asyncio.sleep(0)
    kube.down = None
    await task
    assert kube.events == []
