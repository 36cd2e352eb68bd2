"""`quotree simulate` with Kubernetes' own pod groups (docs/reference/pods.md, "Pod groups"):
PodGroup and Workload documents read, pods that name them grouped, a disagreeing label refused, and
bad PodGroups one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotree.simulate import SimulationError, simulate, to_json

HEAD = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {nvidia.com/gpu: "8"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: q, namespace: q}
spec: {min: {nvidia.com/gpu: "3"}, max: {nvidia.com/gpu: "3"}}
"""


def pod_group(name: str, policy: str) -> str:
    return f"""---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {{name: {name}, namespace: q}}
spec: {{schedulingPolicy: {policy}}}
"""


def pods(count: int, pod_group: str, labels: str = "{}") -> str:
    return "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {pod_group}-{i}, namespace: q, labels: {labels}}}
spec:
  schedulingGroup: {{podGroupName: {pod_group}}}
  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "1"}}}}}}]
"""
        for i in range(count)
    )


def run(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text(HEAD + text)
    return to_json(simulate([path]))


def states(report: dict[str, Any]) -> dict[str, str]:
    return {key: entry["state"] for key, entry in report["pods"].items()}


def test_a_gang_podgroup_over_the_quota_waits_whole(tmp_path: Path) -> None:
    report = run(tmp_path, pod_group("g", "{gang: {minCount: 4}}") + pods(4, "g"))
    assert set(states(report).values()) == {"pending"}
    assert report["groups"]["q/g"]["size"] == 4
    assert report["groups"]["q/g"]["reason"].startswith("waiting: pod group q/g can never fit")


def test_a_basic_podgroup_leaves_its_pods_single(tmp_path: Path) -> None:
    report = run(tmp_path, pod_group("b", "{basic: {}}") + pods(4, "b"))
    assert sorted(states(report).values()) == ["admitted"] * 3 + ["pending"]
    assert report["groups"] == {}


def test_pods_of_a_missing_podgroup_wait_and_say_so(tmp_path: Path) -> None:
    report = run(tmp_path, pods(2, "nowhere"))
    assert set(states(report).values()) == {"pending"}
    assert report["pods"]["q/nowhere-0"]["reason"].startswith(
        "waiting: its PodGroup q/nowhere does not exist yet"
    )


def test_a_podgroup_may_take_its_policy_from_its_workloads_template(tmp_path: Path) -> None:
    workload = """---
apiVersion: scheduling.k8s.io/v1alpha2
kind: Workload
metadata: {name: w, namespace: q}
spec: {podGroupTemplates: [{name: t, schedulingPolicy: {gang: {minCount: 2}}}]}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: g, namespace: q}
spec: {podGroupTemplateRef: {workload: {workloadName: w, podGroupTemplateName: t}}}
"""
    report = run(tmp_path, workload + pods(2, "g"))
    assert report["groups"]["q/g"]["state"] == "admitted"


def test_a_pod_whose_label_names_another_group_is_refused(tmp_path: Path) -> None:
    text = pod_group("g", "{gang: {minCount: 2}}") + pods(2, "g", "{quotree.io/pod-group: h}")
    with pytest.raises(SimulationError) as caught:
        run(tmp_path, text)
    assert str(caught.value).endswith(
        "document 4: rejected: Pod q/g-0: label quotree.io/pod-group=h disagrees with "
        "spec.schedulingGroup.podGroupName g (the PodGroup is the pod's group; name the "
        "same group in both, or leave the label out)"
    )


def test_a_pod_whose_label_names_the_podgroup_is_in_it(tmp_path: Path) -> None:
    text = pod_group("g", "{gang: {minCount: 2}}") + pods(2, "g", "{quotree.io/pod-group: g}")
    assert run(tmp_path, text)["groups"]["q/g"]["state"] == "admitted"


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("{gang: {minCount: 0}}", "schedulingPolicy.gang.minCount must be a whole number >= 1"),
        ("{gang: {}}", "spec.schedulingPolicy.gang.minCount: is required"),
        ("{basic: {}, gang: {minCount: 2}}", "schedulingPolicy must have exactly one of"),
    ],
)
def test_a_podgroup_that_cannot_be_read_is_one_line(
    tmp_path: Path, policy: str, message: str
) -> None:
    with pytest.raises(SimulationError) as caught:
        run(tmp_path, pod_group("g", policy))
    assert "document 3: PodGroup q/g: " in str(caught.value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
