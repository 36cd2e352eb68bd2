"""A pod group that was running when the operator started is still one unit (docs/reference/pods.md,
"Pod groups"): after a restart, and after a leader failover, reclaim takes it whole.

The story, on the local control plane: a Cohort of 8 GPUs, `lender` (min 4) and
`borrower` (min 4, max 8). A 6-pod group of the borrower (1 GPU a pod) is admitted whole,
borrowing 2 of the lender's GPUs. The operator restarts (or its leader is killed and the
standby takes over); the lender's 3-GPU pod then arrives and is admitted by reclaim after
the delay (3 s): all 6 pods of the group go, not one. With a Job's group, the Job is
suspended and its `status.failed` stays 0.

Webhooks off: the pods are created with the admission gate, and a Job's pods (which no
webhook labels) are its group by their owner.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from quotree.groups import POD_GROUP_LABEL, POD_GROUP_SIZE_ANNOTATION
from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

GPU = "nvidia.com/gpu"
RUN_FOR = "pod-complete.stage.kwok.x-k8s.io/delay"  # kwok: the pod runs this long
ENV = {"QUOTREE_WEBHOOKS": "0", "QUOTREE_RECLAIM_DELAY": "3"}


@contextmanager
def story(cluster: ModuleType) -> Iterator[tuple[str, str]]:
    """The Cohort and the two quotas, in namespaces of their own: (lender, borrower)."""
    s = k.suffix()
    lender, borrower, top = f"rg-lender-{s}", f"rg-borrower-{s}", f"rg-{s}"
    k.apply(
        k.namespace(lender),
        k.namespace(borrower),
        k.cohort(top, min={GPU: "8"}, max={GPU: "8"}),
        k.quota("lender", lender, parent=top, min={GPU: "4"}, max={GPU: "8"}),
        k.quota("borrower", borrower, parent=top, min={GPU: "4"}, max={GPU: "8"}),
    )
    try:
        yield lender, borrower
    finally:
        cluster.kubectl("delete", "namespace", lender, borrower, "--wait=false", check=False)
        cluster.kubectl("delete", "cohort", top, "--wait=false", check=False)


def group_pods(ns: str) -> list[dict[str, Any]]:
    bodies = []
    for i in range(6):
        body = k.pod(f"g6-{i}", ns, {GPU: "1"}, labels={POD_GROUP_LABEL: "g6"})
        body["metadata"]["annotations"] = {POD_GROUP_SIZE_ANNOTATION: "6"}
        bodies.append(body)
    return bodies


def long_job(name: str, ns: str, pods: int) -> dict[str, Any]:
    job = k.job(name, ns, pods, {GPU: "1"})
    job["spec"]["template"]["metadata"]["annotations"] = {RUN_FOR: "1h"}
    job["spec"]["backoffLimit"] = 0  # one failed pod would fail the Job
    return job


def reclaim_takes_the_group_whole(cluster: ModuleType, lender: str, borrower: str) -> list[str]:
    """The lender's 3-GPU pod arrives and is admitted; the names of the pods reclaimed."""
    k.create(k.pod("mine", lender, {GPU: "3"}))
    cluster.wait_until(lambda: len(k.admitted_pods(lender)) == 1, 90, "the lender's pod admitted")
    reclaimed = cluster.wait_until(
        lambda: (r := k.events(borrower, "Reclaimed")) and len(r) >= 6 and r,
        30,
        "6 Reclaimed events",
    )
    return sorted({e["involvedObject"]["name"] for e in reclaimed})


def admitted_whole(cluster: ModuleType, ns: str, selector: str | None = None) -> None:
    cluster.wait_until(
        lambda: len(k.admitted_pods(ns, selector)) == 6, 60, "the group's 6 pods admitted"
    )
    status = cluster.wait_until(
        lambda: (st := k.status("eq", "borrower", ns)).get("admittedGroups") == 1 and st,
        30,
        "1 admitted group",
    )
    assert status.get("pendingGroups", 0) == 0


def restarted(identity: str, log_name: str) -> Callable[[OperatorProcess], OperatorProcess]:
    def restart(proc: OperatorProcess) -> OperatorProcess:
        proc.proc.terminate()  # SIGTERM
        proc.proc.wait(timeout=30)
        return start_operator({**ENV, "QUOTREE_IDENTITY": identity}, log_name=f"{log_name}-2")

    return restart


def test_a_group_running_before_a_restart_is_reclaimed_whole(cluster: ModuleType) -> None:
    identity = f"rg-restart-{k.suffix()}"
    proc = start_operator({**ENV, "QUOTREE_IDENTITY": identity}, log_name="rg-restart")
    try:
        with story(cluster) as (lender, borrower):
            k.create(*group_pods(borrower))
            admitted_whole(cluster, borrower)
            proc = restarted(identity, "rg-restart")(proc)
            # The restarted operator counts the running group as one admitted group.
            admitted_whole(cluster, borrower)
            names = reclaim_takes_the_group_whole(cluster, lender, borrower)
            assert names == [f"g6-{i}" for i in range(6)], names
            cluster.wait_until(lambda: not k.admitted_pods(borrower), 30, "all 6 gone")
            assert proc.alive, proc.log_tail()
    finally:
        proc.stop()


def test_a_jobs_group_running_before_a_restart_is_reclaimed_whole_by_suspending_the_job(
    cluster: ModuleType,
) -> None:
    identity = f"rg-job-{k.suffix()}"
    proc = start_operator({**ENV, "QUOTREE_IDENTITY": identity}, log_name="rg-job")
    try:
        with story(cluster) as (lender, borrower):
            k.apply(long_job("train", borrower, 6))
            admitted_whole(cluster, borrower, "job=train")
            proc = restarted(identity, "rg-job")(proc)
            admitted_whole(cluster, borrower, "job=train")
            names = reclaim_takes_the_group_whole(cluster, lender, borrower)
            assert len(names) == 6, names
            assert all(n.startswith("train-") for n in names), names
            # Suspended (then resumed once its pods are gone), never failed.
            assert f"Reclaimed Job {borrower}/train (pod group {borrower}/train, 6 pods): " in (
                proc.log_text()
            ), proc.log_tail()
            job = cluster.kubectl_json("get", "job", "train", "-n", borrower)
            assert job["status"].get("failed", 0) == 0, json.dumps(job["status"])
    finally:
        proc.stop()


def test_a_group_admitted_by_the_leader_is_reclaimed_whole_after_a_failover(
    cluster: ModuleType,
) -> None:
    s = k.suffix()
    started: list[OperatorProcess] = []
    try:
        a = start_operator({**ENV, "QUOTREE_IDENTITY": f"rg-a-{s}"}, log_name="rg-failover-a")
        started.append(a)
        b = start_operator(
            {**ENV, "QUOTREE_IDENTITY": f"rg-b-{s}"},
            log_name="rg-failover-b",
            ready="quota objects (",  # loaded: it lists and watches from here on
        )
        started.append(b)
        with story(cluster) as (lender, borrower):
            k.create(*group_pods(borrower))
            admitted_whole(cluster, borrower)
            assert "acquired the leader lease" not in b.log_text(), "B led beside A"
            a.kill()
            b.wait_for_log("acquired the leader lease", 60)
            names = reclaim_takes_the_group_whole(cluster, lender, borrower)
            assert names == [f"g6-{i}" for i in range(6)], names
            assert b.alive, b.log_tail()
    finally:
        for proc in started:
            proc.stop()
