"""Pod groups as pods declare them (docs/reference/pods.md, "Pod groups"): `quotree.groups` and
`pod_facts`."""

from __future__ import annotations

from typing import Any

import pytest

from quotree import ConfigError, pod_facts
from quotree.groups import (
    POD_GROUP_LABEL,
    POD_GROUP_MIN_ANNOTATION,
    POD_GROUP_SIZE_ANNOTATION,
    GroupSpec,
    JobFacts,
    controller_job,
    disagreement,
    group_spec,
    job_facts,
)


def _pod(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "p",
        "namespace": "ns",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": {"containers": [{"name": "c"}]}}


JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "controller": True}


def test_a_labelled_pod_declares_its_group_with_size_and_min() -> None:
    spec = group_spec(
        {POD_GROUP_LABEL: "g"},
        {POD_GROUP_SIZE_ANNOTATION: "4", POD_GROUP_MIN_ANNOTATION: "2"},
        "Pod ns/p",
    )
    assert spec == GroupSpec("g", 4, 2)
    assert spec is not None
    assert spec.elastic


def test_a_group_without_min_is_not_elastic() -> None:
    spec = group_spec({POD_GROUP_LABEL: "g"}, {POD_GROUP_SIZE_ANNOTATION: "3"}, "Pod ns/p")
    assert spec == GroupSpec("g", 3, 3)
    assert not spec.elastic


@pytest.mark.parametrize(
    ("labels", "notes", "words"),
    [
        ({POD_GROUP_LABEL: "g"}, {}, f"needs the annotation {POD_GROUP_SIZE_ANNOTATION}"),
        ({POD_GROUP_LABEL: "g"}, {POD_GROUP_SIZE_ANNOTATION: "0"}, "whole number >= 1, not '0'"),
        ({POD_GROUP_LABEL: "g"}, {POD_GROUP_SIZE_ANNOTATION: "x"}, "whole number >= 1, not 'x'"),
        (
            {POD_GROUP_LABEL: "g"},
            {POD_GROUP_SIZE_ANNOTATION: "2", POD_GROUP_MIN_ANNOTATION: "3"},
            f"{POD_GROUP_MIN_ANNOTATION} 3 is over {POD_GROUP_SIZE_ANNOTATION} 2",
        ),
        ({}, {POD_GROUP_SIZE_ANNOTATION: "2"}, f"needs the label {POD_GROUP_LABEL}"),
    ],
)
def test_a_bad_declaration_is_one_line_naming_the_pod(
    labels: dict[str, str], notes: dict[str, str], words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        group_spec(labels, notes, "Pod ns/p")
    message = str(caught.value)
    assert message.startswith("Pod ns/p: ")
    assert words in message
    assert "\n" not in message


def test_a_jobs_pods_form_a_group_of_min_parallelism_completions() -> None:
    job = JobFacts("ns", "train", "u1", parallelism=4, completions=10)
    assert group_spec({}, {}, "Pod ns/p", job=job) == GroupSpec("train", 4, 4)
    short = JobFacts("ns", "train", "u1", parallelism=4, completions=3)
    assert group_spec({}, {}, "Pod ns/p", job=short) == GroupSpec("train", 3, 3)


@pytest.mark.parametrize(
    ("parallelism", "completions", "opted_out"),
    [(1, 5, False), (4, 1, False), (4, 4, True)],
)
def test_a_job_forms_no_group_when_one_pod_runs_at_once_or_it_opts_out(
    parallelism: int, completions: int, opted_out: bool
) -> None:
    job = JobFacts("ns", "j", "u", parallelism, completions, opted_out=opted_out)
    assert job.group_size is None
    assert group_spec({}, {}, "Pod ns/p", job=job) is None


def test_none_opts_a_jobs_pod_out() -> None:
    job = JobFacts("ns", "train", "u1", parallelism=4, completions=4)
    assert group_spec({POD_GROUP_LABEL: "none"}, {}, "Pod ns/p", job=job) is None


def test_job_facts_read_a_job_object() -> None:
    job = job_facts(
        {
            "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
            "spec": {
                "parallelism": 4,
                "completions": 8,
                "suspend": True,
                "template": {"metadata": {"labels": {POD_GROUP_LABEL: "none"}}},
            },
        }
    )
    assert job == JobFacts("ml", "train", "u1", 4, 8, suspended=True, opted_out=True)
    assert job.key == "ml/train"


def test_controller_job_is_read_from_the_owner_reference() -> None:
    assert controller_job(_pod(owner=JOB_OWNER)) == "train"
    assert controller_job(_pod(owner={**JOB_OWNER, "controller": False})) is None
    assert controller_job(_pod(owner={**JOB_OWNER, "kind": "ReplicaSet"})) is None


def test_pod_facts_carry_the_declared_group() -> None:
    facts = pod_facts(_pod({POD_GROUP_LABEL: "g"}, {POD_GROUP_SIZE_ANNOTATION: "2"}))
    assert facts.group == GroupSpec("g", 2, 2)
    assert facts.owner_job is None
    assert pod_facts(_pod()).group is None


def test_a_jobs_pod_without_size_waits_for_its_jobs_facts() -> None:
    facts = pod_facts(_pod({POD_GROUP_LABEL: "train"}, owner=JOB_OWNER))
    assert facts.group is None
    assert facts.owner_job == "train"


def test_a_plain_pod_with_a_bad_declaration_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"Pod ns/p: label quotree\.io/pod-group=g needs"):
        pod_facts(_pod({POD_GROUP_LABEL: "g"}))


def test_pods_that_disagree_are_told_which_field() -> None:
    a = ("q1", GroupSpec("g", 4, 4), 10)
    assert disagreement("ns/g", a, a) is None
    line = disagreement("ns/g", ("q1", GroupSpec("g", 3, 3), 10), a)
    assert line == "pod group ns/g: this pod's size is 3, but the group's other pods have size 4"
    line = disagreement("ns/g", ("q1", GroupSpec("g", 4, 4), 5), a)
    assert line is not None
    assert "priority is 5" in line
