"""The start-up load (quotree_operator/loading.py): the pod list is asked for before the
quota objects are read, its pods are taken in only after them, and a failure of either
list is the load's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from quotree_operator import loading
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.kube_errors import KubeError
from quotree_operator.pod_entries import PodEntry
from tests.unit.objects import cohort, pod, quota
from tests.unit.operator.fake_kube import FakeKube


class RecordingKube(FakeKube):
    """Notes when the pod list is asked for and when each page of it is handed on."""

    def __init__(
        self, pod_error: Exception | None = None, quota_error: Exception | None = None
    ) -> None:
        super().__init__()
        self.steps: list[str] = []
        self.pod_error, self.quota_error = pod_error, quota_error
        self.pods_closed = False

    async def list_pages(self, what: str) -> AsyncGenerator[tuple[list[dict[str, Any]], str], None]:
        self.steps.append(f"list {what}")
        if what == "Cohort" and self.quota_error is not None:
            raise self.quota_error
        async for page in super().list_pages(what):
            yield page

    async def list_pod_entries(self) -> AsyncGenerator[tuple[list[PodEntry], str], None]:
        self.steps.append("ask pods")
        try:
            await asyncio.sleep(0)
            if self.pod_error is not None:
                raise self.pod_error
            async for entries, version in super().list_pod_entries():
                self.steps.append("pods arrived")
                yield entries, version
        finally:
            self.pods_closed = True


def _controller(kube: RecordingKube) -> Controller:
    kube.listed["Cohort"] = [cohort("org", min={"cpu": "4"})]
    kube.listed["ElasticQuota"] = [quota("team", "ns-a", parent="org", min={"cpu": "2"})]
    kube.listed["pods"] = [pod("ns-a", "p1"), pod("ns-a", "p2", gates=None)]
    return Controller(OperatorConfig(), kube)


async def test_the_pods_are_asked_for_first_and_taken_in_after_the_quotas() -> None:
    kube = RecordingKube()
    controller = _controller(kube)
    taken: list[tuple[str, int]] = []
    take_pod = controller.inputs.take_pod

    def noting(entry: PodEntry, *, read: bool = False) -> None:
        taken.append((entry.key, len(controller.inputs.quota_objects)))
        take_pod(entry, read=read)

    controller.inputs.take_pod = noting  # type: ignore[method-assign]
    version = await loading.load(controller.inputs, kube)
    assert kube.steps.index("ask pods") < kube.steps.index("list Cohort")
    assert taken == [("ns-a/p1", 2), ("ns-a/p2", 2)]  # after both quota objects
    assert version != ""
    record = controller.engine.pods["ns-a/p2"]
    assert record.quota == "team"


async def test_a_failed_pod_list_is_the_load_error() -> None:
    kube = RecordingKube(pod_error=KubeError(0, "list pods: ClientPayloadError: cut"))
    controller = _controller(kube)
    with pytest.raises(KubeError, match="list pods"):
        await loading.load(controller.inputs, kube)


async def test_a_failed_quota_list_stops_the_pod_list() -> None:
    kube = RecordingKube(quota_error=KubeError(503, "list Cohort: 503 unavailable"))
    controller = _controller(kube)
    with pytest.raises(KubeError, match="503"):
        await loading.load(controller.inputs, kube)
    await asyncio.sleep(0)
    assert kube.pods_closed
    assert controller.engine.pods == {}
