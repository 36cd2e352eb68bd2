"""Workloads expanded into their pods, and PriorityClasses resolved, as the cluster would."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from quotree.simulate import SimulationError, simulate, to_json
from quotree.workloads import (
    cronjob_job,
    deployment_pods,
    job_pods,
    replicaset_pods,
    statefulset_pods,
)

TEMPLATE = {
    "metadata": {"labels": {"app": "w"}},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}


def workload(kind: str, api: str = "apps/v1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": "w", "namespace": "team"},
        "spec": {"template": TEMPLATE, **spec},
    }


def names(pods: Any) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_statefulset_pods_are_numbered() -> None:
    pods = statefulset_pods(workload("StatefulSet", replicas=3))
    assert names(pods) == ["w-0", "w-1", "w-2"]
    assert {p["metadata"]["namespace"] for p in pods} == {"team"}
    assert pods[1]["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "w-1"
    assert pods[0]["spec"] == TEMPLATE["spec"]
    assert pods[0]["spec"] is not TEMPLATE["spec"]  # a copy per pod


def test_deployment_pods_are_named_through_their_replicaset() -> None:
    pods = deployment_pods(workload("Deployment", replicas=4))
    assert len(pods) == 4
    pod_hash = pods[0]["metadata"]["labels"]["pod-template-hash"]
    pattern = re.compile(rf"^w-{pod_hash}-[bcdfghjklmnpqrstvwxz2456789]{{5}}$")
    assert all(pattern.match(name) for name in names(pods))
    assert len(set(names(pods))) == 4
    assert pods[0]["metadata"]["labels"]["app"] == "w"
    assert pods[0]["metadata"]["ownerReferences"][0]["name"] == f"w-{pod_hash}"
    # The same input gives the same names; another template another hash.
    assert names(deployment_pods(workload("Deployment", replicas=4))) == names(pods)
    other = workload("Deployment", replicas=1)
    other["spec"]["template"] = {**TEMPLATE, "metadata": {"labels": {"app": "v"}}}
    assert deployment_pods(other)[0]["metadata"]["labels"]["pod-template-hash"] != pod_hash


def test_replicaset_default_is_one_pod() -> None:
    assert [n[:2] for n in names(replicaset_pods(workload("ReplicaSet")))] == ["w-"]


@pytest.mark.parametrize(
    ("spec", "status", "count"),
    [
        ({}, None, 1),  # parallelism and completions default to 1
        ({"parallelism": 4}, None, 4),  # no completions: a work queue of 4
        ({"parallelism": 4, "completions": 2}, None, 2),  # capped by completions
        ({"parallelism": 4, "completions": 6}, {"succeeded": 3}, 3),  # 3 left to complete
        ({"parallelism": 4, "completions": 4}, {"succeeded": 4}, 0),  # done
        ({"parallelism": 4, "suspend": True}, None, 0),
    ],
)
def test_job_runs_parallelism_pods_capped_by_what_is_left(
    spec: dict[str, Any], status: dict[str, Any] | None, count: int
) -> None:
    doc = workload("Job", "batch/v1", **spec)
    if status:
        doc["status"] = status
    job = job_pods(doc)
    assert len(job.pods) == count
    assert (job.name, job.namespace) == ("w", "team")
    assert job.parallelism == spec.get("parallelism", 1)
    assert job.completions == spec.get("completions")
    for pod in job.pods:
        assert re.match(r"^w-[a-z0-9]{5}$", pod["metadata"]["name"])
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "w"


def test_indexed_job_pods_carry_their_index() -> None:
    job = job_pods(workload("Job", "batch/v1", parallelism=2, completionMode="Indexed"))
    assert [n.rsplit("-", 1)[0] for n in names(job.pods)] == ["w-0", "w-1"]
    assert job.indexed
    index = "batch.kubernetes.io/job-completion-index"
    assert [p["metadata"]["annotations"][index] for p in job.pods] == ["0", "1"]


TREE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "10"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: q, namespace: team}
spec: {min: {cpu: "3"}, max: {cpu: "3"}}
"""


def sim(tmp_path: Path, *docs: dict[str, Any], extra: str = "") -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text(TREE + extra + "".join("---\n" + yaml.safe_dump(d) for d in docs))
    return to_json(simulate([path]))


def test_a_job_in_the_simulator_is_one_group_that_waits_whole(tmp_path: Path) -> None:
    # Four pods of one cpu in a quota of 3: a group of four that can never fit, none admitted.
    report = sim(tmp_path, workload("Job", "batch/v1", parallelism=4, completions=4))
    states = sorted(e["state"] for e in report["pods"].values())
    assert states == ["pending"] * 4
    assert all(key.startswith("team/w-") for key in report["pods"])
    group = report["groups"]["team/w"]
    assert (group["name"], group["quota"], group["state"], group["size"]) == (
        "w",
        "q",
        "pending",
        4,
    )
    assert group["reason"] == (
        "waiting: pod group team/w can never fit: its 4 pods request cpu 4 in all, "
        "over ElasticQuota q's max 3"
    )


def test_a_job_of_parallelism_one_is_no_group(tmp_path: Path) -> None:
    report = sim(tmp_path, workload("Job", "batch/v1", parallelism=1, completions=5))
    assert [e["state"] for e in report["pods"].values()] == ["admitted"]
    assert report["groups"] == {}


def test_a_job_of_another_group_is_skipped_and_noted(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(TREE + "---\n" + yaml.safe_dump(workload("Job", "batch.volcano.sh/v1alpha1")))
    result = simulate([path])
    assert to_json(result)["pods"] == {}
    assert result.notes == [
        "skipped 1 object of kinds the simulator does not read: Job (batch.volcano.sh/v1alpha1)"
    ]


def test_a_job_of_another_version_of_batch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SimulationError, match="Job team/w: apiVersion must be batch/v1"):
        sim(tmp_path, workload("Job", "batch/v2"))


def cronjob(**spec: Any) -> dict[str, Any]:
    job = {"parallelism": 2, "completions": 2, "template": TEMPLATE}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "team"},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {"metadata": {"labels": {"app": "etl"}}, "spec": job},
            **spec,
        },
    }


def test_a_cronjob_is_the_job_it_would_create() -> None:
    job = cronjob_job(cronjob())
    assert job["kind"] == "Job"
    assert job["apiVersion"] == "batch/v1"
    assert job["metadata"]["name"].startswith("nightly-")
    assert job["metadata"]["name"][len("nightly-") :].isdigit()
    assert job["metadata"]["namespace"] == "team"
    assert job["metadata"]["labels"] == {"app": "etl"}
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job["spec"]["parallelism"] == 2
    assert cronjob_job(cronjob()) == job  # the same input, the same name


def test_a_cronjob_in_the_simulator_runs_its_jobs_pods_as_one_group(tmp_path: Path) -> None:
    report = sim(tmp_path, cronjob())
    name = cronjob_job(cronjob())["metadata"]["name"]
    assert sorted(e["state"] for e in report["pods"].values()) == ["admitted"] * 2
    assert all(key.startswith(f"team/{name}-") for key in report["pods"])
    assert report["groups"][f"team/{name}"]["size"] == 2


def test_a_suspended_cronjob_runs_nothing(tmp_path: Path) -> None:
    assert sim(tmp_path, cronjob(suspend=True))["pods"] == {}


def test_a_template_problem_names_the_workload_and_the_field(tmp_path: Path) -> None:
    doc = workload("Deployment")
    doc["spec"]["template"] = {"spec": {"containers": "nope"}}
    with pytest.raises(
        SimulationError,
        match=r"document 3: Deployment team/w: spec.template.spec.containers: must be a list",
    ):
        sim(tmp_path, doc)


CLASSES = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: normal}
value: 10
globalDefault: true
"""


def pod_doc(name: str, **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"containers": containers, **spec},
    }


def test_priority_class_name_gives_the_class_value(tmp_path: Path) -> None:
    # `low` holds the quota; `urgent` names class high and preempts it. Without the class
    # (priority 0 for both) nothing would be preempted.
    report = sim(
        tmp_path,
        pod_doc("low", nodeName="n1"),
        pod_doc("urgent", priorityClassName="high"),
        extra=CLASSES,
    )
    assert report["pods"]["team/low"]["state"] == "preempted"
    assert report["pods"]["team/urgent"]["state"] == "admitted"


def test_the_global_default_applies_to_pods_without_a_class(tmp_path: Path) -> None:
    # `old` runs at 0 (an explicit priority is kept); `new` gets the default 10 and preempts.
    report = sim(tmp_path, pod_doc("old", nodeName="n1", priority=0), pod_doc("new"), extra=CLASSES)
    assert report["pods"]["team/old"]["state"] == "preempted"
    assert report["pods"]["team/new"]["state"] == "admitted"


def test_a_missing_priority_class_names_the_pod(tmp_path: Path) -> None:
    with pytest.raises(
        SimulationError, match=r"document 5: Pod team/p: no PriorityClass 'urgent'$"
    ):
        sim(tmp_path, pod_doc("p", priorityClassName="urgent"), extra=CLASSES)


def test_a_priority_that_differs_from_its_class_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SimulationError, match=r"spec\.priority 5 differs from the value 1000"):
        sim(tmp_path, pod_doc("p", priorityClassName="high", priority=5), extra=CLASSES)


def test_two_global_defaults_are_refused(tmp_path: Path) -> None:
    second = CLASSES.replace(
        "name: high}\nvalue: 1000", "name: high}\nvalue: 1000\nglobalDefault: true"
    )
    with pytest.raises(SimulationError, match="PriorityClass normal: globalDefault, but"):
        sim(tmp_path, extra=second)


def test_built_in_classes_need_no_document(tmp_path: Path) -> None:
    report = sim(tmp_path, pod_doc("p", priorityClassName="system-cluster-critical"))
    assert report["pods"]["team/p"]["state"] == "admitted"
