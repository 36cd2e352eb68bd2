"""Pod groups in the operator (jobs.py, actuator.py, inputs.py) with the fake API: Jobs
watched into the engine, a Job's pods admitted as one, a Job's group evicted by suspending
the Job and resumed once its pods are gone, plain groups evicted pod by pod, warnings."""

from __future__ import annotations

import asyncio
from typing import Any

from quotree.decisions import Decisions
from quotree.eviction import Eviction
from quotree.groups import POD_GROUP_LABEL, POD_GROUP_SIZE_ANNOTATION, GroupSpec
from quotree_operator.bodies import EVICTED_ANNOTATION
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.kube_errors import KubeError
from tests.unit.objects import node, pod, quota
from tests.unit.operator.fake_kube import FakeKube

GPU = "nvidia.com/gpu"


def job(name: str = "train", parallelism: int = 4, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", **metadata},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {}},
    }


def job_pod(index: int, job_name: str = "train") -> dict[str, Any]:
    body = pod("team", f"{job_name}-{index}", {GPU: "1"}, uid=f"u-{index}")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "controller": True}
    ]
    return body


def gpu_quota(gpus: int) -> dict[str, Any]:
    return quota("team", "team", min={GPU: str(gpus)}, max={GPU: str(gpus)})


def controller_with(kube: FakeKube, gpus: int = 3) -> Controller:
    controller = Controller(OperatorConfig(), kube=kube)
    controller.signals.leading = True  # it carries out decisions: the leader's work
    controller.inputs.observe_cluster_node(node("n1", {GPU: "8", "cpu": "64"}), deleted=False)
    controller.inputs.observe_quota_object(gpu_quota(gpus), deleted=False)
    return controller


async def carry_out(controller: Controller, decisions: Decisions) -> None:
    controller.actuator.carry_out(decisions)
    while controller.actuator._tasks:
        await asyncio.gather(*list(controller.actuator._tasks))


async def test_a_jobs_pods_are_admitted_together_or_not_at_all() -> None:
    kube = FakeKube()
    controller = controller_with(kube, gpus=3)
    controller.jobs.observe(job(), deleted=False)
    for i in range(4):
        kube.put_pod(job_pod(i))
        controller.inputs.observe_pod(job_pod(i), deleted=False)
    await carry_out(controller, controller.engine.decide(1.0))
    assert kube.admits == []  # 4 GPUs asked, 3 in the quota: none goes
    assert controller.engine.groups["team/train"].state == "pending"
    controller.inputs.observe_quota_object(gpu_quota(4), deleted=False)
    decisions = controller.engine.decide(2.0)
    assert sorted(key for key, _ in decisions.admitted) == [f"team/train-{i}" for i in range(4)]
    await carry_out(controller, decisions)
    assert sorted(name for name, _, _ in kube.admits) == [f"train-{i}" for i in range(4)]


async def test_the_webhooks_learn_the_jobs_and_what_a_group_declared() -> None:
    kube = FakeKube()
    controller = controller_with(kube)
    book = controller.inputs.book
    controller.jobs.observe(job(), deleted=False)
    assert book.job("team", "train") is not None
    controller.inputs.observe_pod(job_pod(0), deleted=False)
    assert book.declaration("team", "train") == ("team", GroupSpec("train", 4, 4), 0)
    controller.inputs.observe_pod(job_pod(0), deleted=True)
    assert book.declaration("team", "train") is None
    controller.jobs.observe(job(), deleted=True)
    assert book.job("team", "train") is None


async def test_jobs_are_loaded_before_pods_so_a_jobs_pods_find_their_group() -> None:
    kube = FakeKube()
    kube.listed["jobs"] = [job()]
    kube.listed["ElasticQuota"] = [gpu_quota(8)]
    kube.listed["nodes"] = [node("n1", {GPU: "8"})]
    kube.listed["pods"] = [job_pod(i) for i in range(4)]
    controller = Controller(OperatorConfig(), kube=kube)
    await controller.load()
    group = controller.engine.groups["team/train"]
    assert (group.size, len(group.pods)) == (4, 4)


def evictions() -> list[Eviction]:
    why = "lent quota is reclaimed"
    return [
        Eviction(f"team/train-{i}", "team", "Reclaimed", why, "team/train", "train")
        for i in range(4)
    ]


async def test_a_jobs_group_is_evicted_by_suspending_the_job_and_resumed_when_its_pods_go() -> None:
    kube = FakeKube()
    controller = controller_with(kube, gpus=4)
    kube.jobs["team/train"] = job()
    controller.jobs.observe(job(), deleted=False)
    for i in range(4):
        controller.inputs.observe_pod(job_pod(i), deleted=False)
    await carry_out(controller, Decisions(evictions=evictions()))
    assert kube.job_suspends == [("team/train", True)]  # one write for the whole group
    assert kube.evictions == []  # no pod goes through the Eviction API: none counts failed
    assert kube.jobs["team/train"]["metadata"]["annotations"][EVICTED_ANNOTATION] == "Reclaimed"
    assert sorted((e.name, e.reason, e.warning) for e in kube.pod_events) == [
        (f"train-{i}", "Reclaimed", True) for i in range(4)
    ]
    # The watch shows the Job suspended; its pods are still there: not resumed yet.
    controller.jobs.observe(kube.jobs["team/train"], deleted=False)
    assert controller.jobs.resume_due(kube) == []
    for i in range(3):
        controller.inputs.observe_pod(job_pod(i), deleted=True)
    assert controller.jobs.resume_due(kube) == []
    controller.inputs.observe_pod(job_pod(3), deleted=True)
    await asyncio.gather(*controller.jobs.resume_due(kube))
    assert kube.job_suspends == [("team/train", True), ("team/train", False)]
    assert kube.jobs["team/train"]["spec"]["suspend"] is False
    assert EVICTED_ANNOTATION not in kube.jobs["team/train"]["metadata"]["annotations"]
    assert controller.jobs.resume_due(kube) == []  # once


async def test_a_job_its_owner_suspended_is_left_alone() -> None:
    kube = FakeKube()
    controller = controller_with(kube)
    suspended = job()
    suspended["spec"]["suspend"] = True
    kube.jobs["team/train"] = suspended
    controller.jobs.observe(suspended, deleted=False)
    assert controller.jobs.resume_due(kube) == []


async def test_a_job_suspended_before_a_restart_is_resumed_after_it() -> None:
    kube = FakeKube()
    marked = job(annotations={EVICTED_ANNOTATION: "Preempted"})
    marked["spec"]["suspend"] = True
    kube.jobs["team/train"] = marked
    kube.listed["jobs"] = [marked]
    controller = Controller(OperatorConfig(), kube=kube)
    await controller.load()
    await asyncio.gather(*controller.jobs.resume_due(kube))
    assert kube.job_suspends == [("team/train", False)]


async def test_a_refused_suspension_gives_every_pod_of_the_group_back_to_the_engine() -> None:
    kube = FakeKube()
    controller = controller_with(kube, gpus=4)
    kube.jobs["team/train"] = job()
    kube.fail_next("suspend_job", KubeError(500, "Job team/train: suspend: 500 boom"))
    refused: list[str] = []
    controller.engine.eviction_refused = refused.append  # type: ignore[method-assign]
    await carry_out(controller, Decisions(evictions=evictions()))
    assert sorted(refused) == [f"team/train-{i}" for i in range(4)]
    assert kube.pod_events == []


async def test_a_plain_group_is_evicted_pod_by_pod_through_the_eviction_api() -> None:
    kube = FakeKube()
    controller = controller_with(kube, gpus=4)
    for i in range(4):
        body = pod("team", f"mpi-{i}", {GPU: "1"}, gates=())
        body["metadata"]["labels"] = {POD_GROUP_LABEL: "mpi"}
        body["metadata"]["annotations"] = {POD_GROUP_SIZE_ANNOTATION: "4"}
        kube.put_pod(body)
    plain = [
        Eviction(f"team/mpi-{i}", "team", "Preempted", "a more important group", "team/mpi")
        for i in range(4)
    ]
    await carry_out(controller, Decisions(evictions=plain))
    assert sorted(kube.evictions) == [f"team/mpi-{i}" for i in range(4)]
    assert kube.job_suspends == []


async def test_warnings_are_written_as_warning_events() -> None:
    kube = FakeKube()
    controller = controller_with(kube)
    message = "pod group team/mpi: 3 of 4 pods exist after 300s; its pods hold nothing"
    await carry_out(controller, Decisions(warnings=[("team/mpi-0", "GroupIncomplete", message)]))
    [event] = kube.pod_events
    assert (event.name, event.reason, event.message, event.warning) == (
        "mpi-0",
        "GroupIncomplete",
        message,
        True,
    )


def test_the_group_and_scheduling_timeouts_are_operator_settings() -> None:
    config = OperatorConfig.from_env(
        {"QUOTREE_GROUP_TIMEOUT": "60", "QUOTREE_SCHEDULING_TIMEOUT": "90"}
    )
    assert (config.group_timeout, config.scheduling_timeout) == (60.0, 90.0)
    defaults = OperatorConfig.from_env({})
    assert (defaults.group_timeout, defaults.scheduling_timeout) == (300.0, 300.0)
    engine = Controller(config, kube=FakeKube()).engine
    gangs = engine.decider.gangs
    assert (gangs.group_timeout, gangs.scheduling_timeout) == (60.0, 90.0)


def test_gated_job_pods_are_counted_by_job_until_they_go() -> None:
    controller = controller_with(FakeKube())
    controller.inputs.observe_pod(job_pod(0), deleted=False)
    done = job_pod(1)
    done["status"]["phase"] = "Succeeded"
    controller.inputs.observe_pod(job_pod(1), deleted=False)
    assert controller.inputs.job_pods == {"team/train": {"team/train-0", "team/train-1"}}
    controller.inputs.observe_pod(done, deleted=False)
    controller.inputs.forget_pod("team/train-0")
    assert controller.inputs.job_pods == {}


async def test_a_group_named_by_its_label_whose_pods_are_a_jobs_is_evicted_by_suspension() -> None:
    # The webhook labels a Job's pods with their group, so the engine knows the group by
    # its label; the pods are still the Job's, and evicting them would fail the Job.
    kube = FakeKube()
    controller = controller_with(kube, gpus=4)
    kube.jobs["team/train"] = job()
    for i in range(4):
        body = job_pod(i)
        body["metadata"]["labels"] = {POD_GROUP_LABEL: "train"}
        body["metadata"]["annotations"] = {POD_GROUP_SIZE_ANNOTATION: "4"}
        controller.inputs.observe_pod(body, deleted=False)
    why = "ElasticQuota team is above its runtime"
    labelled = [
        Eviction(f"team/train-{i}", "team", "Reclaimed", why, "team/train") for i in range(4)
    ]
    await carry_out(controller, Decisions(evictions=labelled))
    assert kube.job_suspends == [("team/train", True)]
    assert kube.evictions == []
    assert {e.message for e in kube.pod_events} == {
        f"{why}; with the whole of pod group team/train"
    }
