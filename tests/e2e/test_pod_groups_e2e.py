"""Pod groups on the local control plane, with real Jobs run by kube-controller-manager's
job controller (docs/reference/pods.md, "Pod groups").

One operator, webhooks on, serves the module: reclaim delay 5 s, scheduling timeout 6 s.
The Jobs' pods say how long they run with kwok's annotation
pod-complete.stage.kwok.x-k8s.io/delay (hack/kwok/stages.yaml), so a gang stays
visible. The stories: a 4-pod Job in a 3-GPU quota admits none, then all 4 when the
quota grows; two 4-pod Jobs in 6 GPUs run one whole and hold the other whole; reclaim
evicts a borrowing Job's whole gang by suspending the Job, whose status.failed stays 0; a
group of plain pods with the label and annotation; a group the nodes cannot place is
evicted after the scheduling timeout and waits again with a backoff; a pod that
disagrees with its group is refused at CREATE.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from quotree.groups import POD_GROUP_LABEL, POD_GROUP_SIZE_ANNOTATION
from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, module_operator

GPU = "nvidia.com/gpu"
RUN_FOR = "pod-complete.stage.kwok.x-k8s.io/delay"
PORT = 19461  # the webhook server's; other e2e files use 19443 to 19457
OPERATOR_NAMESPACE = "quotree-e2e-groups"


@pytest.fixture(scope="module")
def operator(
    cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    env = {
        "QUOTREE_WEBHOOK_PORT": str(PORT),
        "QUOTREE_CERT_DIR": str(tmp_path_factory.mktemp("webhook-pki")),
        "QUOTREE_NAMESPACE": OPERATOR_NAMESPACE,
        "QUOTREE_IDENTITY": "e2e-groups",
        "QUOTREE_RECLAIM_DELAY": "5",
        "QUOTREE_SCHEDULING_TIMEOUT": "6",
    }
    with module_operator(env, "operator-groups") as proc:
        yield proc


def long_job(name: str, ns: str, pods: int, requests: dict[str, str]) -> dict[str, Any]:
    """A Job of `pods` pods at once whose pods run for an hour (kwok's delay)."""
    job = k.job(name, ns, pods, requests)
    template = job["spec"]["template"]
    template["spec"].pop("schedulingGates")  # the webhook gates them
    template["metadata"]["annotations"] = {RUN_FOR: "1h"}
    job["spec"]["backoffLimit"] = 0  # one failed pod would fail the Job
    return job


def gpu_quota(name: str, ns: str, gpus: int, **spec: Any) -> dict[str, Any]:
    return k.quota(name, ns, min={GPU: str(gpus)}, max={GPU: str(gpus)}, **spec)


def job_pods(ns: str, job: str) -> list[dict[str, Any]]:
    return [p for p in k.pods(ns, f"job={job}") if k.live(p)]


def admitted(ns: str, job: str) -> int:
    return sum(1 for p in job_pods(ns, job) if not k.gated(p))


def held_for(seconds: float, check: Any, what: str) -> None:
    """`check()` stays true for `seconds` (sampled every half second)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert check(), what
        time.sleep(0.5)


def wait_known(cluster: ModuleType, name: str, ns: str) -> None:
    cluster.wait_until(lambda: "summary" in k.status("eq", name, ns), 30, f"status of {name}")


def test_a_job_that_does_not_fit_waits_whole_then_runs_whole(
    cluster: ModuleType, operator: OperatorProcess, namespace: str
) -> None:
    k.apply(gpu_quota("gang", namespace, 3))
    wait_known(cluster, "gang", namespace)
    k.apply(long_job("train", namespace, 4, {GPU: "1"}))
    pods = cluster.wait_until(
        lambda: (p := job_pods(namespace, "train")) and len(p) == 4 and p, 60, "4 pods of train"
    )
    # The webhook names the group after the Job once the operator's watch has shown it the
    # Job (a pod created before that is grouped by its Job all the same, unlabelled).
    for p in pods:
        if POD_GROUP_LABEL in p["metadata"]["labels"]:
            assert p["metadata"]["labels"][POD_GROUP_LABEL] == "train"
            assert p["metadata"]["annotations"][POD_GROUP_SIZE_ANNOTATION] == "4"
    cluster.wait_until(
        lambda: k.status("eq", "gang", namespace).get("pendingGroups") == 1, 30, "1 pending group"
    )
    held_for(4, lambda: admitted(namespace, "train") == 0, "a pod of train was admitted")
    k.apply(gpu_quota("gang", namespace, 4))
    cluster.wait_until(lambda: admitted(namespace, "train") == 4, 60, "all 4 pods admitted")
    status = cluster.wait_until(
        lambda: (s := k.status("eq", "gang", namespace)).get("admittedGroups") == 1 and s,
        30,
        "1 admitted group",
    )
    assert status["pendingGroups"] == 0
    wide = cluster.kubectl("get", "eq", "gang", "-n", namespace, "-o", "wide").stdout
    assert "ADMITTED GROUPS" in wide, wide
    assert "PENDING GROUPS" in wide, wide


def test_two_jobs_in_room_for_one_run_one_whole_and_hold_the_other_whole(
    cluster: ModuleType, operator: OperatorProcess, namespace: str
) -> None:
    k.apply(gpu_quota("pair", namespace, 6))
    wait_known(cluster, "pair", namespace)
    k.apply(*(long_job(name, namespace, 4, {GPU: "1"}) for name in ("left", "right")))
    cluster.wait_until(
        lambda: admitted(namespace, "left") + admitted(namespace, "right") == 4,
        60,
        "one Job admitted",
    )
    held_for(
        4,
        lambda: sorted([admitted(namespace, "left"), admitted(namespace, "right")]) == [0, 4],
        "not one Job whole and the other not at all",
    )
    waiting = "left" if admitted(namespace, "left") == 0 else "right"
    assert len(job_pods(namespace, waiting)) == 4


def test_reclaim_takes_a_borrowing_jobs_whole_gang_without_failing_the_job(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    s = k.suffix()
    ns_a, ns_b, top = f"gang-a-{s}", f"gang-b-{s}", f"gangs-{s}"
    try:
        k.apply(
            k.namespace(ns_a),
            k.namespace(ns_b),
            k.cohort(top, min={GPU: "8"}, max={GPU: "8"}),
            k.quota("a", ns_a, parent=top, min={GPU: "4"}),
            k.quota("b", ns_b, parent=top, min={GPU: "4"}),
        )
        wait_known(cluster, "b", ns_b)
        k.apply(long_job("wide", ns_a, 6, {GPU: "1"}))  # borrows 2 of b's GPUs
        cluster.wait_until(lambda: admitted(ns_a, "wide") == 6, 60, "a's Job admitted")
        k.apply(long_job("mine", ns_b, 4, {GPU: "1"}))
        cluster.wait_until(lambda: admitted(ns_b, "mine") == 4, 90, "b's Job admitted")
        reclaimed = k.events(ns_a, "Reclaimed")
        assert len({e["involvedObject"]["name"] for e in reclaimed}) == 6, reclaimed
        assert all(f"{ns_a}/wide" in e["message"] for e in reclaimed), reclaimed
        # Suspended, not failed; resumed, its new pods wait whole (6 > a's min of 4).
        job = cluster.wait_until(
            lambda: (
                (j := cluster.kubectl_json("get", "job", "wide", "-n", ns_a))["spec"].get("suspend")
                is False
                and len(job_pods(ns_a, "wide")) == 6
                and j
            ),
            90,
            "a's Job resumed with 6 new pods",
        )
        assert job["status"].get("failed", 0) == 0, json.dumps(job["status"])
        held_for(3, lambda: admitted(ns_a, "wide") == 0, "a's Job partly admitted")
    finally:
        k.cluster.kubectl("delete", "namespace", ns_a, ns_b, "--wait=false", check=False)
        k.cluster.kubectl("delete", "cohort", top, "--wait=false", check=False)


def group_pod(name: str, ns: str, size: int, group: str = "mpi") -> dict[str, Any]:
    body = k.pod(name, ns, {GPU: "1"}, labels={POD_GROUP_LABEL: group})
    body["metadata"]["annotations"] = {POD_GROUP_SIZE_ANNOTATION: str(size)}
    return body


def test_plain_pods_form_a_group_and_a_pod_that_disagrees_is_refused(
    cluster: ModuleType, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    k.apply(gpu_quota("plain", namespace, 2))
    wait_known(cluster, "plain", namespace)
    k.apply(*(group_pod(f"mpi-{i}", namespace, 3) for i in range(3)))
    cluster.wait_until(
        lambda: k.status("eq", "plain", namespace).get("pendingGroups") == 1, 30, "pending group"
    )
    held_for(3, lambda: not k.admitted_pods(namespace), "a pod of the group was admitted")
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(group_pod("mpi-odd", namespace, 4)))
    refused = cluster.kubectl("apply", "-f", str(odd), check=False)
    assert refused.returncode != 0
    assert (
        f"pod group {namespace}/mpi: this pod's size is 4, but the group's other pods have size 3"
        in refused.stderr
    ), refused.stderr
    k.apply(gpu_quota("plain", namespace, 3))
    cluster.wait_until(lambda: len(k.admitted_pods(namespace)) == 3, 60, "the group admitted")


def test_a_group_the_nodes_cannot_place_is_requeued_with_a_backoff(
    cluster: ModuleType, operator: OperatorProcess, namespace: str
) -> None:
    # 40 cpus a pod: the quota and the cluster (4 x 32) hold both, no node holds one.
    k.apply(k.quota("huge", namespace, min={"cpu": "80"}, max={"cpu": "80"}))
    wait_known(cluster, "huge", namespace)
    k.apply(long_job("big", namespace, 2, {"cpu": "40"}))
    requeued = cluster.wait_until(lambda: k.events(namespace, "Requeued"), 60, "the group requeued")
    message = requeued[0]["message"]
    assert f"pod group {namespace}/big" in message, message
    assert "backoff of 60 s" in message, message
    job = cluster.wait_until(
        lambda: (
            (j := cluster.kubectl_json("get", "job", "big", "-n", namespace))["spec"].get("suspend")
            is False
            and len(job_pods(namespace, "big")) == 2
            and j
        ),
        60,
        "the Job resumed with new pods",
    )
    assert job["status"].get("failed", 0) == 0, json.dumps(job["status"])
    held_for(3, lambda: admitted(namespace, "big") == 0, "admitted during its backoff")
