"""Cohorts and ElasticQuotas as the operator keeps them (quotree_operator/inputs.py) and the
Warning Event a broken configuration gets (quotree_operator/status_writer.py)."""

from __future__ import annotations

from typing import Any

from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.status import desired
from quotree_operator.status_writer import newly_invalid
from tests.unit.objects import cohort, quota


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
