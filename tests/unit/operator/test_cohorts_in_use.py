"""The in-use finalizer (in_use.py): on every Cohort that has children, off when it has none,
written by the leader only; a Cohort being deleted stays a parent until its last child goes.

The controller's own parts are used (its inputs feed `CohortsInUse`, its writes go through
`LeaderWrites`) over the in-memory API; `reconcile` is called as the decision loop calls it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from quotree.models import IN_USE_FINALIZER
from quotree_operator import in_use
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from tests.unit.objects import cohort, node, quota
from tests.unit.operator.fake_kube import FakeKube

HOLD = "example.com/hold"


def seen_cohort(name: str, *finalizers: str, deleting: bool = False) -> dict[str, Any]:
    """A Cohort as the watch shows it: its finalizers, and a deletionTimestamp if `deleting`."""
    body = cohort(name, min={"cpu": "10"})
    if finalizers:
        body["metadata"]["finalizers"] = list(finalizers)
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return body


def child(name: str, parent: str = "org") -> dict[str, Any]:
    return quota(name, name, parent, min={"cpu": "2"})


async def reconciled(controller: Controller) -> None:
    """One decision loop's turn of the finalizers, and its writes done."""
    controller.in_use.reconcile(controller.signals.config_changes)
    for _ in range(3):
        await asyncio.sleep(0)


def leader(kube: FakeKube) -> Controller:
    controller = Controller(OperatorConfig(), kube=kube)
    controller.set_leading(True)
    return controller


async def test_the_finalizer_comes_with_the_first_child_and_goes_with_the_last() -> None:
    kube = FakeKube()
    controller = leader(kube)
    observe = controller.inputs.observe_quota_object
    observe(seen_cohort("org"), deleted=False)
    await reconciled(controller)
    assert kube.finalizer_writes == []  # no children: nothing to protect
    observe(child("a"), deleted=False)
    observe(child("b"), deleted=False)
    await reconciled(controller)
    assert kube.finalizer_writes == [("org", (IN_USE_FINALIZER,))]
    observe(seen_cohort("org", IN_USE_FINALIZER), deleted=False)  # the watch shows it
    observe(child("a"), deleted=True)
    await reconciled(controller)
    assert len(kube.finalizer_writes) == 1  # b is left: the finalizer stays
    observe(child("b"), deleted=True)
    await reconciled(controller)
    assert kube.finalizer_writes[1:] == [("org", ())]


async def test_a_cohort_being_deleted_stays_a_parent_until_its_last_child_is_gone() -> None:
    kube = FakeKube()
    kube.finalizers["org"] = (IN_USE_FINALIZER,)
    controller = leader(kube)
    controller.inputs.observe_cluster_node(node("n", {"cpu": "100"}), deleted=False)
    observe = controller.inputs.observe_quota_object
    observe(seen_cohort("org", IN_USE_FINALIZER), deleted=False)
    observe(child("a"), deleted=False)
    await reconciled(controller)
    engine = controller.engine
    engine.refresh()
    before = engine.report("a")
    assert before.runtime  # a guarantee under org
    observe(seen_cohort("org", IN_USE_FINALIZER, deleting=True), deleted=False)
    await reconciled(controller)
    assert kube.finalizer_writes == []
    engine.refresh()
    assert engine.report("a") == before  # its child keeps its runtime: nothing changed
    assert engine.report("org").problem is None
    observe(child("a"), deleted=True)
    await reconciled(controller)
    assert kube.finalizer_writes == [("org", ())]  # the API server deletes it now
    observe(seen_cohort("org", deleting=True), deleted=True)
    assert "org" not in controller.in_use.seen


async def test_no_finalizer_is_added_to_a_cohort_already_being_deleted() -> None:
    """The API server refuses new finalizers on an object being deleted (only a Cohort
    deleted while the webhook was bypassed gets here)."""
    kube = FakeKube()
    controller = leader(kube)
    controller.inputs.observe_quota_object(seen_cohort("org", deleting=True), deleted=False)
    controller.inputs.observe_quota_object(child("a"), deleted=False)
    await reconciled(controller)
    assert kube.finalizer_writes == []


async def test_other_finalizers_stay_and_a_list_changed_meanwhile_is_never_overwritten() -> None:
    kube = FakeKube()
    kube.finalizers["org"] = (HOLD, "example.com/other")  # written since the watch's view
    controller = leader(kube)
    observe = controller.inputs.observe_quota_object
    observe(seen_cohort("org", HOLD), deleted=False)
    observe(child("a"), deleted=False)
    await reconciled(controller)
    assert kube.finalizer_writes == []  # the test op failed (422): nothing lost
    assert kube.finalizers["org"] == (HOLD, "example.com/other")
    observe(seen_cohort("org", HOLD, "example.com/other"), deleted=False)  # the newer view
    await reconciled(controller)
    assert kube.finalizer_writes == [("org", (HOLD, "example.com/other", IN_USE_FINALIZER))]


async def test_a_standby_writes_no_finalizer() -> None:
    kube = FakeKube()
    controller = Controller(OperatorConfig(), kube=kube)
    controller.inputs.observe_quota_object(seen_cohort("org"), deleted=False)
    controller.inputs.observe_quota_object(child("a"), deleted=False)
    await reconciled(controller)
    assert kube.finalizer_writes == []
    assert controller.writes.refused == 1
    controller.set_leading(True)
    await reconciled(controller)  # the refused write left it to be compared again
    assert kube.finalizer_writes == [("org", (IN_USE_FINALIZER,))]


class SlowKube(FakeKube):
    """Each finalizer write takes a moment; notes how many were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most = 0

    async def patch_finalizers(self, *args: Any, **kwargs: Any) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        await super().patch_finalizers(*args, **kwargs)


async def test_after_an_upgrade_every_cohort_gets_it_a_few_writes_at_a_time() -> None:
    kube = SlowKube()
    controller = leader(kube)
    for i in range(20):
        controller.inputs.observe_quota_object(seen_cohort(f"org-{i}"), deleted=False)
        controller.inputs.observe_quota_object(child(f"q-{i}", f"org-{i}"), deleted=False)
    controller.in_use.reconcile(controller.signals.config_changes)
    for _ in range(50):
        if len(kube.finalizer_writes) == 20:
            break
        await asyncio.sleep(0.01)
    assert sorted(name for name, _ in kube.finalizer_writes) == sorted(
        f"org-{i}" for i in range(20)
    )
    assert kube.most == in_use.WRITERS
