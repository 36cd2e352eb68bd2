"""Kubernetes' own pod groups on the local control plane (docs/reference/pods.md, "Pod groups"):
quota by quotree, placement by the scheduler's gang cycle, with real controllers only.

The control plane serves `scheduling.k8s.io/v1alpha2` with `GenericWorkload` on, the
scheduler's `GangScheduling` and the job controller's `WorkloadWithJob`
(hack/cluster.sh). One operator, webhooks on, serves the module (reclaim delay 5 s). The
stories: an Indexed Job of 4 one-GPU pods, grouped by the job controller's own PodGroup,
waits whole in 3 GPUs with none bound, is admitted and bound whole in 4, is reclaimed
whole by suspending the Job (no failure charged) and comes back as one group; a
user-made gang PodGroup of minCount 3 with plain pods waits whole at 2 of 3 (a pod whose
quotree label names another group is refused) and is admitted at 3.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from quotree.groups import POD_GROUP_LABEL
from quotree.native_groups import POD_GROUP_API
from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, module_operator

GPU = "nvidia.com/gpu"
RUN_FOR = "pod-complete.stage.kwok.x-k8s.io/delay"
#: The webhook server's port; other e2e files use 19443 to 19461.
PORT = int(os.environ.get("QUOTREE_E2E_NATIVE_GROUPS_PORT", "19462"))
OPERATOR_NAMESPACE = "quotree-e2e-native-groups"


@pytest.fixture(scope="module")
def operator(
    cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    served = cluster.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name")
    assert "podgroups.scheduling.k8s.io" in served.stdout.split(), served.stdout
    env = {
        "QUOTREE_WEBHOOK_PORT": str(PORT),
        "QUOTREE_CERT_DIR": str(tmp_path_factory.mktemp("webhook-pki")),
        "QUOTREE_NAMESPACE": OPERATOR_NAMESPACE,
        "QUOTREE_IDENTITY": "e2e-native-groups",
        "QUOTREE_RECLAIM_DELAY": "5",
    }
    with module_operator(env, "operator-native-groups") as proc:
        yield proc


def indexed_job(name: str, ns: str, pods: int) -> dict[str, Any]:
    """An Indexed Job of `pods` one-GPU pods at once, running for an hour (kwok's delay):
    the job controller gives it a Workload and a gang PodGroup of `pods`."""
    job = k.job(name, ns, pods, {GPU: "1"})
    job["spec"]["completionMode"] = "Indexed"
    job["spec"]["backoffLimit"] = 0  # one failed pod would fail the Job
    template = job["spec"]["template"]
    template["spec"].pop("schedulingGates")  # the webhook gates them
    template["metadata"]["annotations"] = {RUN_FOR: "1h"}
    return job


def job_pods(ns: str, job: str) -> list[dict[str, Any]]:
    return [p for p in k.pods(ns, f"job={job}") if k.live(p)]


def admitted(pods: list[dict[str, Any]]) -> int:
    return sum(1 for p in pods if not k.gated(p))


def bound(pods: list[dict[str, Any]]) -> int:
    return sum(1 for p in pods if p["spec"].get("nodeName"))


def pod_groups(ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = k.cluster.kubectl_json("get", "podgroups", "-n", ns)["items"]
    return items


def link(p: dict[str, Any]) -> str | None:
    return (p["spec"].get("schedulingGroup") or {}).get("podGroupName")


def held_for(seconds: float, check: Any, what: str) -> None:
    """`check()` stays true for `seconds` (sampled every half second)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert check(), what
        time.sleep(0.5)


def wait_known(cluster: ModuleType, name: str, ns: str) -> None:
    cluster.wait_until(lambda: "summary" in k.status("eq", name, ns), 30, f"status of {name}")


def test_a_jobs_own_gang_is_admitted_bound_reclaimed_and_back_as_one_group(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    s = k.suffix()
    ns, other, top = f"native-a-{s}", f"native-b-{s}", f"native-{s}"
    try:
        k.apply(
            k.namespace(ns),
            k.namespace(other),
            k.cohort(top, min={GPU: "7"}, max={GPU: "7"}),
            k.quota("a", ns, parent=top, min={GPU: "3"}, max={GPU: "3"}),
            k.quota("b", other, parent=top, min={GPU: "4"}),
        )
        wait_known(cluster, "a", ns)
        wait_known(cluster, "b", other)
        k.apply(indexed_job("train", ns, 4))
        pods = cluster.wait_until(
            lambda: (p := job_pods(ns, "train")) and len(p) == 4 and p, 60, "4 pods of train"
        )
        [group] = cluster.wait_until(lambda: pod_groups(ns), 30, "the Job's PodGroup")
        name = group["metadata"]["name"]
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}, group
        assert {link(p) for p in pods} == {name}
        # The job controller's own group: quotree's webhook adds no label of its own.
        assert all(POD_GROUP_LABEL not in p["metadata"]["labels"] for p in pods)
        cluster.wait_until(
            lambda: k.status("eq", "a", ns).get("pendingGroups") == 1, 30, "1 pending group"
        )

        def none_admitted_none_bound() -> bool:
            p = job_pods(ns, "train")
            return admitted(p) == 0 and bound(p) == 0

        held_for(4, none_admitted_none_bound, "a pod of train was admitted or bound")
        # The quota grows to 4 (one GPU lent by b): all 4 admitted, the scheduler binds all 4.
        k.apply(k.quota("a", ns, parent=top, min={GPU: "3"}, max={GPU: "4"}))
        cluster.wait_until(
            lambda: (p := job_pods(ns, "train")) and admitted(p) == 4 and bound(p) == 4,
            60,
            "all 4 pods admitted and bound",
        )
        admitted_events = k.events(ns, "Admitted")
        assert len({e["involvedObject"]["name"] for e in admitted_events}) == 4
        assert all(f"pod group {ns}/{name}" in e["message"] for e in admitted_events), (
            admitted_events
        )
        # b wants its min back: reclaim takes the whole gang, by suspending the Job.
        k.apply(k.pod("claim", other, {GPU: "4"}))
        cluster.wait_until(lambda: len(k.admitted_pods(other)) == 1, 90, "b's pod admitted")
        reclaimed = k.events(ns, "Reclaimed")
        assert len({e["involvedObject"]["name"] for e in reclaimed}) == 4, reclaimed
        assert all(f"{ns}/{name}" in e["message"] for e in reclaimed), reclaimed
        job = cluster.wait_until(
            lambda: (
                (j := cluster.kubectl_json("get", "job", "train", "-n", ns))["spec"].get("suspend")
                is False
                and len(job_pods(ns, "train")) == 4
                and j
            ),
            90,
            "the Job resumed with 4 new pods",
        )
        assert job["status"].get("failed", 0) == 0, json.dumps(job["status"])
        assert {link(p) for p in job_pods(ns, "train")} == {name}  # the same PodGroup
        held_for(3, lambda: admitted(job_pods(ns, "train")) == 0, "the gang partly admitted")
        assert k.status("eq", "a", ns).get("pendingGroups") == 1
        # b's pod goes: the gang comes back whole.
        cluster.kubectl("delete", "pod", "claim", "-n", other, "--wait=false")
        cluster.wait_until(
            lambda: (p := job_pods(ns, "train")) and admitted(p) == 4 and bound(p) == 4,
            60,
            "the gang admitted and bound again",
        )
    finally:
        k.cluster.kubectl("delete", "namespace", ns, other, "--wait=false", check=False)
        k.cluster.kubectl("delete", "cohort", top, "--wait=false", check=False)


def gang_pod(name: str, ns: str, pod_group: str) -> dict[str, Any]:
    body = k.pod(name, ns, {GPU: "1"})
    body["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
    return body


def test_a_user_made_gang_waits_whole_until_its_min_count_exists(
    cluster: ModuleType, operator: OperatorProcess, namespace: str
) -> None:
    k.apply(k.quota("team", namespace, min={GPU: "3"}, max={GPU: "3"}))
    wait_known(cluster, "team", namespace)
    k.apply(
        {
            "apiVersion": POD_GROUP_API,
            "kind": "PodGroup",
            "metadata": {"name": "trio", "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        }
    )
    k.apply(*(gang_pod(f"trio-{i}", namespace, "trio") for i in range(2)))

    def told_incomplete() -> set[str]:
        pending = k.events(namespace, "Pending")
        return {e["involvedObject"]["name"] for e in pending if "2 of 3 pods exist" in e["message"]}

    cluster.wait_until(lambda: told_incomplete() == {"trio-0", "trio-1"}, 30, "both told")
    held_for(2, lambda: not k.admitted_pods(namespace), "a pod of the gang was admitted")
    # A quotree label that names another group than its PodGroup: refused at CREATE.
    odd = gang_pod("trio-odd", namespace, "trio")
    odd["metadata"]["labels"][POD_GROUP_LABEL] = "quartet"
    refused = cluster.kubectl("apply", "-f", "-", input=json.dumps(odd), check=False)
    assert refused.returncode != 0
    assert (
        f"Pod {namespace}/trio-odd: label quotree.io/pod-group=quartet disagrees with "
        "spec.schedulingGroup.podGroupName trio" in refused.stderr
    ), refused.stderr
    k.apply(gang_pod("trio-2", namespace, "trio"))
    cluster.wait_until(lambda: len(k.admitted_pods(namespace)) == 3, 60, "the gang admitted")
    cluster.wait_until(
        lambda: sum(1 for p in k.pods(namespace) if p["spec"].get("nodeName")) == 3,
        60,
        "the gang bound",
    )
