"""Kubernetes' own PodGroups in the operator (pod_groups.py, controller.py) with the fake
API: listed before the pods and watched into the engine, a Job's own PodGroup made one
group under its name and evicted by suspending the Job, and a cluster that does not serve
the API noticed and said so once."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from quotree.decisions import Decisions
from quotree.eviction import Eviction
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.kube_errors import KubeError
from tests.unit.objects import node, pod
from tests.unit.operator.fake_kube import FakeKube
from tests.unit.operator.test_operator_pod_groups import (
    GPU,
    carry_out,
    controller_with,
    gpu_quota,
    job,
    job_pod,
)


def pod_group(name: str = "train-pg", min_count: int | None = 4) -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"schedulingPolicy": policy},
    }


def linked(body: dict[str, Any], name: str = "train-pg") -> dict[str, Any]:
    body["spec"]["schedulingGroup"] = {"podGroupName": name}
    return body


async def test_podgroups_are_loaded_before_pods_and_a_jobs_own_is_one_group() -> None:
    kube = FakeKube()
    kube.listed["jobs"] = [job()]
    kube.listed["podgroups"] = [pod_group()]
    kube.listed["ElasticQuota"] = [gpu_quota(8)]
    kube.listed["nodes"] = [node("n1", {GPU: "8"})]
    kube.listed["pods"] = [linked(job_pod(i)) for i in range(4)]
    controller = Controller(OperatorConfig(), kube=kube)
    await controller.load()
    assert controller.pod_groups.served is True
    assert set(controller.engine.groups) == {"team/train-pg"}  # not also "team/train"
    group = controller.engine.groups["team/train-pg"]
    assert (group.size, len(group.pods)) == (4, 4)


async def test_a_jobs_podgroup_is_admitted_whole_and_evicted_by_suspending_the_job() -> None:
    kube = FakeKube()
    controller = controller_with(kube, gpus=3)
    kube.jobs["team/train"] = job()
    controller.jobs.observe(job(), deleted=False)
    controller.pod_groups.observe(pod_group(), deleted=False)
    for i in range(4):
        kube.put_pod(linked(job_pod(i)))
        controller.inputs.observe_pod(linked(job_pod(i)), deleted=False)
    await carry_out(controller, controller.engine.decide(1.0))
    assert kube.admits == []
    controller.inputs.observe_quota_object(gpu_quota(4), deleted=False)
    await carry_out(controller, controller.engine.decide(2.0))
    assert sorted(name for name, _, _ in kube.admits) == [f"train-{i}" for i in range(4)]
    why = "lent quota is reclaimed"  # as the engine names it (test_native_pod_groups)
    evictions = [
        Eviction(f"team/train-{i}", "team", "Reclaimed", why, "team/train-pg", "train")
        for i in range(4)
    ]
    await carry_out(controller, Decisions(evictions=evictions))
    assert kube.job_suspends == [("team/train", True)]
    assert kube.evictions == []


async def test_pods_wait_for_their_podgroup_from_the_watch() -> None:
    kube = FakeKube()
    controller = controller_with(kube, gpus=4)
    for i in range(2):
        body = linked(pod("team", f"p-{i}", {GPU: "1"}), "pair")
        controller.inputs.observe_pod(body, deleted=False)
    assert "its PodGroup team/pair does not exist yet" in controller.engine.pods["team/p-0"].reason
    controller.inputs.dirty.take()
    controller.pod_groups.observe(pod_group("pair", 2), deleted=False)
    assert "team" in controller.inputs.dirty.take()[1]  # its group counts may change
    decisions = controller.engine.decide(1.0)
    assert sorted(key for key, _ in decisions.admitted) == ["team/p-0", "team/p-1"]
    controller.pod_groups.relist([])  # gone while the watch was away
    assert "team/pair" not in controller.engine.group_ledger.sources.pod_groups


async def test_a_cluster_without_the_api_is_said_once_and_watched_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = FakeKube()
    kube.listed["ElasticQuota"] = [gpu_quota(8)]
    kube.listed["nodes"] = [node("n1", {GPU: "8"})]
    kube.listed["pods"] = [pod("team", "plain", {GPU: "1"})]
    controller = Controller(OperatorConfig(), kube=kube)
    not_found = KubeError(404, "list podgroups: 404 Not Found")
    caplog.set_level(logging.INFO, logger="quotree.operator")
    for _ in range(2):  # the start-up's retries say it once
        kube.fail_next("list", KubeError(0, "jobs: not this one"))
        with pytest.raises(KubeError):
            await controller.load()
        kube.fail_next("list")
        original = kube.list_with_version

        async def listing(what: str, original: Any = original) -> tuple[list[Any], str]:
            if what == "podgroups":
                raise not_found
            return await original(what)

        kube.list_with_version = listing  # type: ignore[method-assign]
        await controller.load()
        kube.list_with_version = original  # type: ignore[method-assign]
    said = [r.getMessage() for r in caplog.records if "PodGroups" in r.getMessage()]
    assert said == [
        "PodGroups (scheduling.k8s.io/v1alpha2) are not served by this cluster (its "
        "GenericWorkload feature gate is off): pods are grouped by quotree's label and by "
        "their Jobs only"
    ]
    assert controller.pod_groups.served is False
    await asyncio.wait_for(controller.watch_pod_groups(), 1.0)  # returns: nothing to watch
    assert sorted(key for key, _ in controller.engine.decide(1.0).admitted) == ["team/plain"]


async def test_an_unreadable_podgroup_is_a_warning_and_its_pods_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = FakeKube()
    controller = controller_with(kube)
    controller.pod_groups.observe(pod_group("bad", 0), deleted=False)
    assert "PodGroup team/bad: schedulingPolicy.gang.minCount must be a whole number" in caplog.text
    controller.inputs.observe_pod(linked(pod("team", "p", {GPU: "1"}), "bad"), deleted=False)
    assert "its PodGroup team/bad does not exist yet" in controller.engine.pods["team/p"].reason
