"""`preemptionPolicy: Never` (docs/semantics.md, "In-quota preemption (unless
`preemption.withinQuota: Never`)"): such a unit keeps its place in the order by priority but
never preempts by priority; reclaim of its quota's lent guarantee still applies to it.
Through `quotree simulate`, from the pod's own field and from its PriorityClass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from quotree.simulate import SimulationError, simulate, to_json

CLASSES = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: polite}
value: 10
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: pushy}
value: 10
"""

ONE_QUOTA = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "10"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: q, namespace: q}
spec: {min: {cpu: "4"}, max: {cpu: "4"}}
"""

#: A Cohort of 8 cpu: `lender` (min 4) lends to `borrower` (min 0, max 8).
LENDING = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8"}}
---
apiVersion: quotree.io/v1alpha1
kind: Cohort
metadata: {name: c}
spec: {min: {cpu: "8"}, max: {cpu: "8"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: lender, namespace: lender}
spec: {parent: c, min: {cpu: "4"}, max: {cpu: "8"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: borrower, namespace: borrower}
spec: {parent: c, min: {cpu: "0"}, max: {cpu: "8"}}
"""


def pod_doc(name: str, cpu: int, ns: str = "q", **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": containers, **spec},
    }


def job(name: str, pods: int, cpu: int, ns: str = "q", **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": containers, **spec}},
        },
    }


def sim(tmp_path: Path, tree: str, *docs: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text(tree + CLASSES + "".join("---\n" + yaml.safe_dump(d) for d in docs))
    return to_json(simulate([path]))


def states(report: dict[str, Any]) -> dict[str, str]:
    return {key: entry["state"] for key, entry in report["pods"].items()}


def test_a_pod_whose_class_says_never_does_not_preempt_a_lower_priority_pod(
    tmp_path: Path,
) -> None:
    report = sim(
        tmp_path, ONE_QUOTA, pod_doc("old", 4), pod_doc("new", 4, priorityClassName="polite")
    )
    assert states(report) == {"q/old": "admitted", "q/new": "pending"}
    # The same pod with a class that preempts takes the room (the test is not vacuous).
    again = sim(
        tmp_path, ONE_QUOTA, pod_doc("old", 4), pod_doc("new", 4, priorityClassName="pushy")
    )
    assert states(again) == {"q/old": "preempted", "q/new": "admitted"}


def test_the_pod_s_own_field_is_read_too(tmp_path: Path) -> None:
    report = sim(
        tmp_path,
        ONE_QUOTA,
        pod_doc("old", 4),
        pod_doc("new", 4, priority=10, preemptionPolicy="Never"),
    )
    assert states(report) == {"q/old": "admitted", "q/new": "pending"}


def test_a_job_whose_pods_say_never_does_not_preempt_as_a_group(tmp_path: Path) -> None:
    # The 2-pod Job (priority 10, Never) waits whole; priority-0 `old` keeps running.
    report = sim(
        tmp_path, ONE_QUOTA, pod_doc("old", 3), job("train", 2, 2, priorityClassName="polite")
    )
    assert states(report).pop("q/old") == "admitted"
    group = report["groups"]["q/train"]
    assert group["state"] == "pending"
    assert [states(report)[key] for key in group["pods"]] == ["pending", "pending"]


def test_a_never_pod_does_not_preempt_a_whole_job(tmp_path: Path) -> None:
    report = sim(
        tmp_path, ONE_QUOTA, job("train", 4, 1), pod_doc("new", 4, priorityClassName="polite")
    )
    assert report["groups"]["q/train"]["state"] == "admitted"
    assert states(report)["q/new"] == "pending"


def test_a_never_pod_keeps_its_place_in_the_order_by_priority(tmp_path: Path) -> None:
    # `big` (priority 0) holds the quota; `waiting` (priority 0) then `polite` (priority 10,
    # Never) wait behind it. When `big` ends, `polite` goes first, by its priority.
    path = tmp_path / "in.yaml"
    docs = [
        pod_doc("big", 4, nodeName="n1"),
        pod_doc("waiting", 4),
        pod_doc("polite", 4, priorityClassName="polite"),
    ]
    path.write_text(ONE_QUOTA + CLASSES + "".join("---\n" + yaml.safe_dump(d) for d in docs))
    engine = simulate([path]).engine
    assert {k: str(r.state) for k, r in engine.pods.items()} == {
        "q/big": "admitted",
        "q/waiting": "pending",
        "q/polite": "pending",
    }
    engine.forget_pod("q/big")
    engine.decide(now=10.0)
    assert str(engine.pods["q/polite"].state) == "admitted"
    assert str(engine.pods["q/waiting"].state) == "pending"


def test_reclaim_of_the_lent_guarantee_still_applies_to_a_never_pod(tmp_path: Path) -> None:
    # The borrower runs 8 cpu, 4 of them lent by `lender`; the lender's pod (Never) gets its
    # guarantee back by reclaim: that is the quota's promise, not the pod's priority.
    report = sim(
        tmp_path,
        LENDING,
        pod_doc("b1", 4, ns="borrower", nodeName="n1"),
        pod_doc("b2", 4, ns="borrower", nodeName="n1"),
        pod_doc("mine", 4, ns="lender", priorityClassName="polite"),
    )
    assert states(report)["lender/mine"] == "admitted"
    assert sorted(states(report).values()) == ["admitted", "admitted", "reclaimed"]


def test_a_pod_that_contradicts_its_class_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        SimulationError,
        match=r"Pod q/p: spec\.preemptionPolicy PreemptLowerPriority differs from the "
        r"preemptionPolicy Never of PriorityClass polite$",
    ):
        sim(
            tmp_path,
            ONE_QUOTA,
            pod_doc("p", 1, priorityClassName="polite", preemptionPolicy="PreemptLowerPriority"),
        )


def test_an_unknown_policy_in_a_class_is_refused(tmp_path: Path) -> None:
    bad = ONE_QUOTA + "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
    bad += "metadata: {name: odd}\nvalue: 1\npreemptionPolicy: Sometimes\n"
    path = tmp_path / "in.yaml"
    path.write_text(bad)
    with pytest.raises(SimulationError, match="PriorityClass odd: preemptionPolicy must be one of"):
        simulate([path])
