"""Every pod of a Job joins its group under a burst of Jobs (docs/reference/pods.md, "Pod groups"):
the job controller creates a Job's pods a moment after the Job, often before the operator's watch
shows it the Job; the pod webhook then reads the Job, so every pod is labelled with its
group at creation, and `kubectl quotree why` answers for the group on every pod.

One operator, webhooks on. 20 Jobs of 3 one-cpu pods are created at once in a quota of
9 cpu: 3 Jobs run whole, the others wait whole; no Job is ever partly admitted.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from quotree.groups import POD_GROUP_LABEL, POD_GROUP_SIZE_ANNOTATION
from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, module_operator

JOBS = 20
PODS = 3
RUN_FOR = "pod-complete.stage.kwok.x-k8s.io/delay"  # kwok: the pod runs this long
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def operator(
    cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    env = {
        "QUOTREE_WEBHOOK_PORT": str(free_port()),
        "QUOTREE_CERT_DIR": str(tmp_path_factory.mktemp("webhook-pki")),
        "QUOTREE_IDENTITY": "e2e-job-burst",
    }
    with module_operator(env, "operator-job-burst") as proc:
        yield proc


def burst_job(name: str, ns: str) -> dict[str, Any]:
    job = k.job(name, ns, PODS, {"cpu": "1"})
    template = job["spec"]["template"]
    template["spec"].pop("schedulingGates")  # the webhook gates them
    template["metadata"]["annotations"] = {RUN_FOR: "1h"}
    return job


def why(cluster: ModuleType, ns: str, pod: str) -> str:
    env = dict(os.environ)
    env["KUBECONFIG"] = str(cluster.KUBECONFIG)
    env["PATH"] = os.pathsep.join([str(cluster.KUBECTL.parent), str(VENV_BIN), env["PATH"]])
    done = subprocess.run(
        [str(cluster.KUBECTL), "quotree", "why", pod, "-n", ns],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_pod_of_a_burst_of_jobs_is_labelled_with_its_group(
    cluster: ModuleType, operator: OperatorProcess, namespace: str
) -> None:
    k.apply(k.quota("burst", namespace, min={"cpu": str(3 * PODS)}, max={"cpu": str(3 * PODS)}))
    cluster.wait_until(
        lambda: "summary" in k.status("eq", "burst", namespace), 30, "the quota's status"
    )
    k.apply(*(burst_job(f"j{i:02d}", namespace) for i in range(JOBS)))
    pods = cluster.wait_until(
        lambda: len(p := [x for x in k.pods(namespace) if k.live(x)]) == JOBS * PODS and p,
        120,
        f"{JOBS * PODS} pods",
    )
    unlabelled = []
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pods:
        job = p["metadata"]["labels"]["job"]
        by_job[job].append(p)
        labels, notes = p["metadata"]["labels"], p["metadata"].get("annotations") or {}
        if labels.get(POD_GROUP_LABEL) != job or notes.get(POD_GROUP_SIZE_ANNOTATION) != "3":
            unlabelled.append(p["metadata"]["name"])
    assert unlabelled == [], f"pods created without their Job's group: {unlabelled}"
    # Whole or nothing: 3 Jobs run, and stay so (sampled for a few seconds).
    end = time.monotonic() + 6
    while time.monotonic() < end:
        admitted = defaultdict(int)
        for p in k.admitted_pods(namespace):
            admitted[p["metadata"]["labels"]["job"]] += 1
        assert all(n == PODS for n in admitted.values()), dict(admitted)
        time.sleep(0.5)
    assert len(admitted) == 3, dict(admitted)
    # `why` gives the group's one answer on every pod of a waiting Job.
    waiting = next(job for job in sorted(by_job) if job not in admitted)
    answers = {why(cluster, namespace, p["metadata"]["name"]) for p in by_job[waiting]}
    groups = {line for text in answers for line in text.splitlines() if "group:" in line}
    assert groups == {f"  group:   pod group {namespace}/{waiting}, pending: 3 of 3 pods exist"}, (
        answers
    )
    assert not any("not known to quotree" in text for text in answers), answers
