"""The actuator's handling of API answers (quotree_operator/actuator.py), with a fake API."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from quotree import ADMISSION_GATE
from quotree.decisions import Decisions
from quotree_operator.actuator import Actuator
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.kube_errors import KubeError
from tests.unit.objects import pod
from tests.unit.operator import fake_kube


def gated(*gates: str) -> dict[str, Any]:
    return pod("team", "p", gates=gates, uid="u-1")


class FakeKube(fake_kube.FakeKube):
    """The API holds `current` (pod team/p); the first admissions fail with `admit_errors`."""

    def __init__(self, admit_errors: list[KubeError], current: dict[str, Any]) -> None:
        super().__init__()
        self.fail_next("admit", *admit_errors)
        self.put_pod(current)

    @property
    def events(self) -> list[tuple[str, str | None]]:
        return [(event.reason, event.uid) for event in self.pod_events]


def actuator_for(kube: FakeKube, seen: dict[str, Any]) -> Actuator:
    controller = Controller(OperatorConfig(), kube=kube)
    controller.inputs.observe_pod(seen, deleted=False)
    return Actuator(kube, controller.inputs, concurrency=4)


async def test_stale_gates_are_read_again_and_the_admission_retried() -> None:
    # Someone added a gate in front of ours since the operator last saw the pod: the
    # guarded patch fails with 422, the pod is read again, and the retry uses the new list.
    kube = FakeKube([KubeError(422, "test failed")], gated("other", ADMISSION_GATE))
    actuator = actuator_for(kube, gated(ADMISSION_GATE))
    await actuator._admit("team/p", None, "admitted by quota team")
    assert [gates for _, gates, _ in kube.admits] == [(ADMISSION_GATE,), ("other", ADMISSION_GATE)]
    assert kube.events == [("Admitted", "u-1")]
    assert actuator.inputs.pods["team/p"].gates == ("other",)


async def test_a_pod_gone_meanwhile_is_not_an_error() -> None:
    kube = FakeKube([KubeError(404, "not found")], gated(ADMISSION_GATE))
    actuator = actuator_for(kube, gated(ADMISSION_GATE))
    await actuator._admit("team/p", None, "admitted")
    assert [gates for _, gates, _ in kube.admits] == [(ADMISSION_GATE,)]
    assert kube.events == []
    assert kube.reads == 0


async def test_a_refused_admission_puts_the_pod_back_to_pending() -> None:
    kube = FakeKube([KubeError(403, "forbidden")], gated(ADMISSION_GATE))
    actuator = actuator_for(kube, gated(ADMISSION_GATE))
    await actuator._admit("team/p", None, "admitted")
    assert kube.events == []
    assert kube.reads == 1  # the engine forgets the admission and sees the pod again
    assert actuator.inputs.pods["team/p"].gates == (ADMISSION_GATE,)
    assert "team/p" in actuator.inputs.engine.pods


class SlowLabels(FakeKube):
    """Label writes hang until `go` is set (an API server busy with thousands of them)."""

    def __init__(self, admit_errors: list[KubeError], current: dict[str, Any]) -> None:
        super().__init__(admit_errors, current)
        self.go = asyncio.Event()

    async def label_pod(self, namespace: str, name: str, standing: str) -> None:
        await self.go.wait()
        await super().label_pod(namespace, name, standing)


async def test_an_admission_does_not_wait_behind_label_writes() -> None:
    kube = SlowLabels([], gated(ADMISSION_GATE))
    actuator = actuator_for(kube, gated(ADMISSION_GATE))
    labels = [
        asyncio.ensure_future(actuator._label(f"team/running-{i}", "in-quota")) for i in range(50)
    ]
    await asyncio.sleep(0)
    await asyncio.wait_for(actuator._admit("team/p", None, "admitted by quota team"), 2)
    assert [gates for _, gates, _ in kube.admits] == [(ADMISSION_GATE,)]
    assert kube.pod_labels == []  # every label write still hangs
    kube.go.set()
    await asyncio.gather(*labels)
    assert len(kube.pod_labels) == 50


class SlowWrites(SlowLabels):
    """Label writes and Events both hang until `go` is set."""

    async def pod_event(self, namespace: str, name: str, **kwargs: Any) -> None:
        await self.go.wait()
        await super().pod_event(namespace, name, **kwargs)


@pytest.mark.parametrize("what", ["labels", "pending"])
async def test_writes_waiting_for_the_api_hold_no_task_each(what: str) -> None:
    # A start-up against running pods without their standing label (or against thousands
    # of waiting pods) decides thousands of writes at once; while the API takes them a few
    # at a time, the ones waiting are entries of a queue, not parked tasks (2.4 KiB each:
    # bench/RESULTS.md).
    kube = SlowWrites([], gated(ADMISSION_GATE))
    actuator = actuator_for(kube, gated(ADMISSION_GATE))
    before = len(asyncio.all_tasks())
    due = {f"team/p{i}": "in-quota" if what == "labels" else f"waits {i}" for i in range(2000)}
    actuator.carry_out(Decisions(**{what: due}))
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) - before <= 4  # the queue's workers (concurrency 4)
    queue = actuator.labels if what == "labels" else actuator.pending
    assert len(queue) == 2000
    kube.go.set()
    await asyncio.wait_for(queue.drained(), 10)
    if what == "labels":
        written = sorted(kube.pod_labels)
    else:
        written = sorted((f"{e.namespace}/{e.name}", e.message) for e in kube.pod_events)
    assert written == sorted(due.items())
    assert len(queue) == 0


class OneWritePerPod(SlowLabels):
    """Also notes when two writes of one pod's label were in flight at once."""

    def __init__(self, admit_errors: list[KubeError], current: dict[str, Any]) -> None:
        super().__init__(admit_errors, current)
        self.in_flight: set[str] = set()
        self.overlaps: list[str] = []

    async def label_pod(self, namespace: str, name: str, standing: str) -> None:
        key = f"{namespace}/{name}"
        if key in self.in_flight:
            self.overlaps.append(key)
        self.in_flight.add(key)
        try:
            await super().label_pod(namespace, name, standing)
        finally:
            self.in_flight.discard(key)


async def test_the_last_label_decided_for_a_pod_is_the_one_written_last() -> None:
    kube = OneWritePerPod([], gated(ADMISSION_GATE))
    actuator = actuator_for(kube, gated(ADMISSION_GATE))
    actuator.carry_out(Decisions(labels={"team/a": "over-quota", "team/b": "over-quota"}))
    await asyncio.sleep(0)  # both writes are in flight
    # Idle workers are started for these; none may write a's label beside the first.
    later = {"team/a": "in-quota", "team/c": "in-quota", "team/d": "in-quota"}
    actuator.carry_out(Decisions(labels=later))
    actuator.carry_out(Decisions(labels={"team/c": "over-quota"}))  # c's first is never due
    await asyncio.sleep(0)
    kube.go.set()
    await asyncio.wait_for(actuator.labels.drained(), 10)
    assert kube.overlaps == []
    written: dict[str, list[str]] = {}
    for key, label in kube.pod_labels:
        written.setdefault(key, []).append(label)
    assert written == {
        "team/a": ["over-quota", "in-quota"],
        "team/b": ["over-quota"],
        "team/c": ["over-quota"],
        "team/d": ["in-quota"],
    }
