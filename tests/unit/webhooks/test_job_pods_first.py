"""Every pod of a Job joins its group, whichever comes first, the Job or its pods
(docs/reference/pods.md, "Pod groups"): the pod CREATE review reads a Job the operator has
not seen yet; a pod left unlabelled is still its Job's by its owner; `kubectl quotree why`
gives one answer."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import jsonpatch
import kopf

from quotree.group_book import GroupBook
from quotree.groups import POD_GROUP_LABEL, POD_GROUP_SIZE_ANNOTATION, GroupSpec, JobFacts
from quotree_kubectl.cluster import ClusterState
from quotree_kubectl.why import why
from quotree_webhooks import fastpath, handlers
from tests.unit.builders import engine, pod
from tests.unit.builders import quota as eq
from tests.unit.live_objects import cluster_node, tree_object
from tests.unit.objects import engine_with, quota
from tests.unit.operator.fake_kube import FakeKube
from tests.unit.webhooks.test_pod_groups_webhook import TRAIN, book_with, job_pod
from tests.unit.webhooks.test_webhooks import SETTINGS, memo_for


class JobReads(FakeKube):
    """The fake API, counting the Jobs read."""

    def __init__(self) -> None:
        super().__init__()
        self.job_reads = 0

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.job_reads += 1
        return await super().read_job(namespace, name)


def job_object(name: str = "train", parallelism: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": "j"},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {}},
    }


async def mutated(obj: dict[str, Any], book: GroupBook, api: Any) -> dict[str, Any]:
    engine = engine_with(quota("team-a", "team-a"))
    patch = kopf.Patch(body=kopf.Body(obj))
    memo = memo_for(engine, groups=book, api=api)
    await handlers.mutate_pod(body=kopf.Body(obj), patch=patch, memo=memo)
    out: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(obj), patch.as_json_patch())
    return out


async def test_a_pod_whose_job_the_operator_has_not_seen_reads_the_job_and_gets_its_group() -> None:
    api = JobReads()
    api.jobs["team-a/train"] = job_object()
    pod = await mutated(job_pod(), GroupBook(), api)
    assert pod["metadata"]["labels"][POD_GROUP_LABEL] == "train"
    assert pod["metadata"]["annotations"][POD_GROUP_SIZE_ANNOTATION] == "4"
    # The same answer as once the operator knows the Job.
    assert pod == await mutated(job_pod(), book_with(TRAIN), None)


async def test_a_job_that_cannot_be_read_leaves_the_pod_to_its_owner() -> None:
    api = JobReads()  # no such Job (yet): the pod is let in, its Job groups it later
    pod = await mutated(job_pod(), GroupBook(), api)
    assert POD_GROUP_LABEL not in pod["metadata"]["labels"]
    assert "ownerReferences" in pod["metadata"]


async def test_a_known_job_is_not_read_again() -> None:
    api = JobReads()
    await mutated(job_pod(), book_with(TRAIN), api)
    await mutated(job_pod(labels={POD_GROUP_LABEL: "none"}), GroupBook(), api)
    assert api.job_reads == 0


def test_the_webhook_process_hands_such_a_pod_to_the_operator() -> None:
    engine = engine_with(quota("team-a", "team-a"))
    review = {"request": {"uid": "u", "operation": "CREATE", "object": job_pod()}}
    assert fastpath.mutate_pod(engine, SETTINGS.never_gated, review, GroupBook()) is None
    known = fastpath.mutate_pod(engine, SETTINGS.never_gated, review, book_with(TRAIN))
    assert known is not None
    assert known["response"]["allowed"]


def test_pods_that_come_before_their_job_all_join_its_group() -> None:
    # Two pods labelled by the webhook (it had read the Job), one not: before the Job
    # reaches the engine, and once it has, they are one group of 3.
    eng = engine(eq("q", min=4, max=4), capacity=4, instant_evictions=False)
    pods = [dataclasses.replace(pod("q", f"train-{i}", 1), owner_job="train") for i in range(3)]
    labelled = [dataclasses.replace(p, group=GroupSpec("train", 3, 3)) for p in pods[:2]]
    for facts in (labelled[0], pods[2], labelled[1]):
        eng.observe_pod(facts)
    assert eng.groups["q/train"].pods == ("q/train-0", "q/train-1")
    eng.observe_job(JobFacts("q", "train", "u", parallelism=3, completions=3))
    assert eng.groups["q/train"].pods == ("q/train-0", "q/train-1", "q/train-2")
    out = eng.decide(1.0)
    assert sorted(k for k, _ in out.admitted) == ["q/train-0", "q/train-1", "q/train-2"]


def _job_pod_object(name: str, labelled: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ns-a",
        "creationTimestamp": "2026-11-28T10:00:00Z",
        "labels": {"quotree.io/quota-name": "team-a"},
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "nc", "controller": True}
        ],
    }
    if labelled:
        metadata["labels"][POD_GROUP_LABEL] = "nc"
        metadata["annotations"] = {POD_GROUP_SIZE_ANNOTATION: "3"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulingGates": [{"name": "quotree.io/admission"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}],
        },
        "status": {"phase": "Pending"},
    }


def test_why_on_the_unlabelled_pod_of_a_job_answers_for_its_group() -> None:
    # team-a (max 8) cannot hold 3 pods of 4 cpu: the group waits whole, and `why` on the
    # pod the webhook could not label says so, as it does for its labelled siblings.
    job = {**job_object("nc", 3), "metadata": {"name": "nc", "namespace": "ns-a"}}
    state = ClusterState(
        nodes=[cluster_node("node-1", "64")],
        cohorts=[],
        quotas=[tree_object("ElasticQuota", "team-a", namespace="ns-a", min_cpu="8", max_cpu="8")],
        pods=[_job_pod_object(f"nc-{i}", labelled=i != 1) for i in range(3)],
        jobs=[job],
    )
    answers = [why(state, "ns-a", f"nc-{i}", {}) for i in range(3)]
    for text in answers:
        assert "group:   pod group ns-a/nc, pending: 3 of 3 pods exist" in text, text
        assert "not known to quotree" not in text, text
    assert answers[1].split("\n", 1)[1] == answers[0].split("\n", 1)[1]
