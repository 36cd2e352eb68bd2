"""Pod groups at pod CREATE (pod_groups.py through decisions.review_pod_create, fastpath and
Kopf's path): a Job's pods get their group, a pod that disagrees with its group is refused."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import kopf

from quotree import QUOTA_LABEL, Engine
from quotree.group_book import GroupBook
from quotree.groups import (
    POD_GROUP_LABEL,
    POD_GROUP_MIN_ANNOTATION,
    POD_GROUP_SIZE_ANNOTATION,
    GroupSpec,
    JobFacts,
)
from quotree_webhooks import decisions, fastpath, handlers
from tests.unit.objects import engine_with, quota
from tests.unit.webhooks.test_webhooks import SETTINGS, memo_for


def tree() -> Engine:
    return engine_with(quota("team-a", "team-a"), quota("team-b", "team-b", namespaces=["team-a"]))


def job_pod(
    job: str | None = "train",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "train-x1", "namespace": "team-a"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    if job is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": job, "controller": True, "uid": "j"}
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def book_with(*jobs: JobFacts) -> GroupBook:
    book = GroupBook()
    for facts in jobs:
        book.set_job(facts)
    return book


TRAIN = JobFacts("team-a", "train", "j", parallelism=4, completions=4)


def test_a_pod_of_a_parallel_job_is_named_its_group_with_the_jobs_size() -> None:
    mutation = decisions.review_pod_create(tree(), job_pod(), "team-a", (), book_with(TRAIN))
    assert mutation.denied is None
    assert mutation.labels == {QUOTA_LABEL: "team-a", POD_GROUP_LABEL: "train"}
    assert mutation.annotations == {POD_GROUP_SIZE_ANNOTATION: "4"}


def test_the_size_is_parallelism_or_completions_whichever_is_smaller() -> None:
    few = JobFacts("team-a", "train", "j", parallelism=4, completions=2)
    mutation = decisions.review_pod_create(tree(), job_pod(), "team-a", (), book_with(few))
    assert mutation.annotations == {POD_GROUP_SIZE_ANNOTATION: "2"}


def test_a_job_of_one_pod_at_a_time_makes_no_group() -> None:
    serial = JobFacts("team-a", "train", "j", parallelism=1, completions=5)
    mutation = decisions.review_pod_create(tree(), job_pod(), "team-a", (), book_with(serial))
    assert POD_GROUP_LABEL not in mutation.labels
    assert mutation.annotations == {}


def test_none_on_the_template_keeps_the_jobs_pods_out_of_any_group() -> None:
    obj = job_pod(labels={POD_GROUP_LABEL: "none"})
    mutation = decisions.review_pod_create(tree(), obj, "team-a", (), book_with(TRAIN))
    assert mutation.denied is None
    assert POD_GROUP_LABEL not in mutation.labels
    assert mutation.annotations == {}


def test_a_pod_of_a_job_not_known_yet_is_let_in_for_its_job_to_complete() -> None:
    obj = job_pod(labels={POD_GROUP_LABEL: "train"})  # no size: the Job would give it
    mutation = decisions.review_pod_create(tree(), obj, "team-a", (), GroupBook())
    assert mutation.denied is None
    assert mutation.labels == {QUOTA_LABEL: "team-a"}


def test_the_templates_own_size_is_kept() -> None:
    obj = job_pod(annotations={POD_GROUP_SIZE_ANNOTATION: "4", POD_GROUP_MIN_ANNOTATION: "2"})
    mutation = decisions.review_pod_create(tree(), obj, "team-a", (), book_with(TRAIN))
    assert mutation.labels[POD_GROUP_LABEL] == "train"
    assert mutation.annotations == {}


def test_a_plain_pod_whose_group_has_no_size_is_refused_with_one_line() -> None:
    obj = job_pod(job=None, labels={POD_GROUP_LABEL: "mpi"})
    mutation = decisions.review_pod_create(tree(), obj, "team-a", (), GroupBook())
    assert mutation.denied == (
        "Pod team-a/train-x1: label quotree.io/pod-group=mpi needs the annotation "
        "quotree.io/pod-group-size (how many pods the group needs at once)"
    )


def test_a_pod_that_disagrees_with_its_groups_pods_is_refused_naming_group_and_field() -> None:
    book = GroupBook()
    book.declare("team-a/mpi", ("team-a", GroupSpec("mpi", 4, 4), 0))
    size_3 = job_pod(
        job=None, labels={POD_GROUP_LABEL: "mpi"}, annotations={POD_GROUP_SIZE_ANNOTATION: "3"}
    )
    mutation = decisions.review_pod_create(tree(), size_3, "team-a", (), book)
    assert mutation.denied == (
        "Pod team-a/train-x1: pod group team-a/mpi: this pod's size is 3, "
        "but the group's other pods have size 4"
    )
    other_quota = copy.deepcopy(size_3)
    other_quota["metadata"]["annotations"][POD_GROUP_SIZE_ANNOTATION] = "4"
    other_quota["metadata"]["labels"][QUOTA_LABEL] = "team-b"
    mutation = decisions.review_pod_create(tree(), other_quota, "team-a", (), book)
    assert mutation.denied is not None
    assert "this pod's quota is team-b, but the group's other pods have quota team-a" in (
        mutation.denied
    )
    urgent = job_pod(
        job=None,
        labels={POD_GROUP_LABEL: "mpi"},
        annotations={POD_GROUP_SIZE_ANNOTATION: "4"},
        priority=100,
    )
    mutation = decisions.review_pod_create(tree(), urgent, "team-a", (), book)
    assert mutation.denied is not None
    assert "priority is 100, but the group's other pods have priority 0" in mutation.denied
    agreeing = copy.deepcopy(urgent)
    del agreeing["spec"]["priority"]
    assert decisions.review_pod_create(tree(), agreeing, "team-a", (), book).denied is None


def test_without_a_book_nothing_about_groups_is_decided() -> None:
    mutation = decisions.review_pod_create(tree(), job_pod(), "team-a")
    assert POD_GROUP_LABEL not in mutation.labels


def _fast(engine: Engine, obj: dict[str, Any], book: GroupBook) -> Any:
    review = {"request": {"uid": "u", "operation": "CREATE", "object": obj}}
    answer = fastpath.mutate_pod(engine, SETTINGS.never_gated, review, book)
    assert answer is not None
    response = answer["response"]
    if not response["allowed"]:
        return response["status"]["message"]
    ops = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(copy.deepcopy(obj), ops)


async def _kopf(engine: Engine, obj: dict[str, Any], book: GroupBook) -> Any:
    patch = kopf.Patch(body=kopf.Body(obj))
    try:
        await handlers.mutate_pod(
            body=kopf.Body(obj), patch=patch, memo=memo_for(engine, groups=book)
        )
    except kopf.AdmissionError as exc:
        return str(exc)
    return jsonpatch.apply_patch(copy.deepcopy(obj), patch.as_json_patch())


async def test_the_direct_answer_and_kopfs_path_give_a_jobs_pod_the_same_group() -> None:
    engine, book = tree(), book_with(TRAIN)
    for obj in (job_pod(), job_pod(annotations={"note": "x"})):
        fast, slow = _fast(engine, obj, book), await _kopf(engine, obj, book)
        assert fast == slow
        assert fast["metadata"]["labels"][POD_GROUP_LABEL] == "train"
        assert fast["metadata"]["annotations"][POD_GROUP_SIZE_ANNOTATION] == "4"
    book.declare("team-a/train", ("team-a", GroupSpec("train", 4, 4), 5))
    refused = _fast(engine, job_pod(), book)
    assert refused == await _kopf(engine, job_pod(), book)
    assert "pod group team-a/train: this pod's priority is 0" in refused
