"""Cohorts and ElasticQuotas as the operator keeps them (quotree_operator/inputs.py) and the
Warning Event a broken configuration gets (quotree_operator/status_writer.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.desired_status import desired
from quotree_operator.status_writer import StatusWriter, newly_invalid
from tests.unit.objects import cohort, quota
from tests.unit.operator.fake_kube import FakeKube


def inputs_with(*bodies: dict[str, Any]) -> Controller:
    controller = Controller(OperatorConfig(), kube=None)  # type: ignore[arg-type]
    for body in bodies:
        controller.inputs.observe_quota_object(body, deleted=False)
    return controller


def valid(controller: Controller, name: str) -> dict[str, str]:
    status = desired(controller.engine, name, is_quota=True).status
    return next(c for c in status["conditions"] if c["type"] == "Valid")


def test_two_objects_with_one_name_are_both_kept_and_deleting_one_leaves_the_other() -> None:
    a, b = quota("dup", "ns-a", min={"cpu": "1"}), quota("dup", "ns-b", min={"cpu": "1"})
    controller = inputs_with(a, b)
    inputs = controller.inputs
    assert sorted(inputs.quota_objects) == ["ElasticQuota/ns-a/dup", "ElasticQuota/ns-b/dup"]
    assert valid(controller, "dup")["reason"] == "DuplicateName"  # written on both
    inputs.observe_quota_object(a, deleted=True)
    assert list(inputs.quota_objects) == ["ElasticQuota/ns-b/dup"]
    assert valid(controller, "dup")["status"] == "True"
    assert controller.engine.covering("ns-b") == ["dup"]


def test_a_warning_when_valid_turns_false_once_per_reason() -> None:
    ok = inputs_with(cohort("c1", min={"cpu": "1"}))
    fine = desired(ok.engine, "c1", is_quota=False)
    looped = inputs_with(
        cohort("c1", parent="c2", min={"cpu": "1"}), cohort("c2", parent="c1", min={"cpu": "1"})
    )
    cycle = desired(looped.engine, "c1", is_quota=False)
    got = newly_invalid(fine, cycle)
    assert got == ("CycleDetected", "Cohort c1: parent c2 would make a cycle (c1 -> c2 -> c1)")
    assert newly_invalid(None, cycle) == got  # a new object that is broken from the start
    assert newly_invalid(cycle, cycle) is None  # not again while the reason stays
    assert newly_invalid(cycle, fine) is None  # fixed: no warning


class EchoingKube(FakeKube):
    """Writes statuses; the watch brings each write back before the answer arrives."""

    def __init__(self, inputs: Any) -> None:
        super().__init__()
        self.inputs = inputs
        self.bodies: dict[str, dict[str, Any]] = {}

    async def patch_quota_object(
        self, kind: str, namespace: str | None, name: str, status: Any, annotations: Any
    ) -> None:
        await super().patch_quota_object(kind, namespace, name, status, annotations)
        body = self.bodies[name]
        if status is not None:
            body["status"] = dict(status)
        self.inputs.observe_quota_object(body, deleted=False)

    @property
    def warnings(self) -> list[tuple[str, str]]:
        return [(event.name, event.reason) for event in self.object_events]


async def test_the_warning_is_sent_when_the_first_status_written_is_already_broken() -> None:
    # The object's first status says CycleDetected, and the watch delivers the object with
    # that status while the write is under way: the warning is still sent.
    looped = [
        cohort("c1", parent="c2", min={"cpu": "1"}),
        cohort("c2", parent="c1", min={"cpu": "1"}),
    ]
    controller = inputs_with(*looped)
    kube = EchoingKube(controller.inputs)
    kube.bodies = {b["metadata"]["name"]: b for b in looped}
    writer = StatusWriter(kube, controller.inputs, controller.inputs.memory, 4)
    await writer.write_statuses()
    await asyncio.gather(*list(writer._tasks))
    assert sorted(kube.warnings) == [("c1", "CycleDetected"), ("c2", "CycleDetected")]


def test_a_relist_forgets_the_objects_deleted_while_the_watch_was_away() -> None:
    # The ElasticQuota watch got 410 Gone and listed again: qb is no longer there.
    qa, qb = quota("qa", "ns-a", min={"cpu": "1"}), quota("qb", "ns-b", min={"cpu": "1"})
    parent = cohort("c1", min={"cpu": "2"})
    controller = inputs_with(parent, qa, qb)
    inputs = controller.inputs
    inputs.relist_quota_objects("ElasticQuota", [qa])
    assert sorted(inputs.quota_objects) == ["Cohort//c1", "ElasticQuota/ns-a/qa"]
    assert controller.engine.covering("ns-b") == []
    assert controller.engine.covering("ns-a") == ["qa"]
    inputs.relist_quota_objects("Cohort", [])  # Cohorts are listed apart: quotas stay
    assert sorted(inputs.quota_objects) == ["ElasticQuota/ns-a/qa"]
