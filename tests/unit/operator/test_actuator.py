"""The actuator's handling of API answers (quotree_operator/actuator.py), with a fake API."""

from __future__ import annotations

import asyncio
from typing import Any

from quotree import ADMISSION_GATE
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
