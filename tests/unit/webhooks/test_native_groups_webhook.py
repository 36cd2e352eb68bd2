"""Pods that name a Kubernetes PodGroup at pod CREATE (pod_groups.py through
decisions.review_pod_create): the PodGroup is the group, a quotree label that names
another is refused with one line naming both, and a Job's pods get no label from quotree."""

from __future__ import annotations

from typing import Any

from quotree import QUOTA_LABEL
from quotree.groups import POD_GROUP_LABEL
from quotree_webhooks import decisions
from tests.unit.webhooks.test_pod_groups_webhook import TRAIN, book_with, job_pod, tree


def linked(pod: dict[str, Any], pod_group: str = "train-pg") -> dict[str, Any]:
    pod["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
    return pod


def test_a_jobs_pod_in_its_own_podgroup_gets_no_group_label() -> None:
    mutation = decisions.review_pod_create(
        tree(), linked(job_pod()), "team-a", (), book_with(TRAIN)
    )
    assert mutation.denied is None
    assert mutation.labels == {QUOTA_LABEL: "team-a"}
    assert mutation.annotations == {}
    assert mutation.gates is not None  # it waits for quotree, as every pod does


def test_a_label_naming_the_podgroup_is_let_in() -> None:
    pod = linked(job_pod(job=None, labels={POD_GROUP_LABEL: "train-pg"}))
    mutation = decisions.review_pod_create(tree(), pod, "team-a", (), book_with())
    assert mutation.denied is None


def test_a_label_naming_another_group_is_refused_with_one_line_naming_both() -> None:
    pod = linked(job_pod(job=None, labels={POD_GROUP_LABEL: "sweep"}))
    mutation = decisions.review_pod_create(tree(), pod, "team-a", (), book_with())
    assert mutation.denied == (
        "Pod team-a/train-x1: label quotree.io/pod-group=sweep disagrees with "
        "spec.schedulingGroup.podGroupName train-pg (the PodGroup is the pod's group; name "
        "the same group in both, or leave the label out)"
    )
