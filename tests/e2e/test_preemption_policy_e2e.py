"""`preemptionPolicy: Never` on the local control plane (docs/semantics.md, "In-quota
preemption (unless `preemption.withinQuota: Never`)"): the API server copies the
PriorityClass's policy into each pod's `spec.preemptionPolicy`; such a pod keeps its place
by priority but never preempts a lower-priority pod of its quota, while reclaim of its
quota's lent guarantee still applies to it.

One operator, webhooks off (the pods are created with the admission gate), reclaim delay
3 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

GPU = "nvidia.com/gpu"
DELAY = 3


@pytest.fixture(scope="module")
def operator(cluster: ModuleType) -> Iterator[OperatorProcess]:
    proc = start_operator(
        {"QUOTREE_RECLAIM_DELAY": str(DELAY), "QUOTREE_WEBHOOKS": "0"},
        log_name="operator-preemption-policy",
    )
    yield proc
    alive = proc.alive
    proc.stop()
    assert alive, "the operator died\n" + proc.log_tail()


@pytest.fixture(scope="module")
def polite(cluster: ModuleType) -> Iterator[str]:
    """A PriorityClass of value 1000 that never preempts."""
    name = f"quotree-e2e-polite-{k.suffix()}"
    k.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 1000,
            "preemptionPolicy": "Never",
        }
    )
    yield name
    cluster.kubectl("delete", "priorityclass", name, "--ignore-not-found", check=False)


def gpu_pod(name: str, ns: str, gpus: int, priority_class: str | None = None) -> dict[str, Any]:
    return k.pod(name, ns, {GPU: str(gpus)}, priority_class=priority_class)


def held_for(seconds: float, check: Any, what: str) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert check(), what
        time.sleep(0.5)


def test_a_pod_whose_class_never_preempts_waits_instead_of_preempting(
    cluster: ModuleType, operator: OperatorProcess, polite: str, namespace: str
) -> None:
    k.apply(k.quota("q", namespace, min={GPU: "4"}, max={GPU: "4"}))
    k.create(gpu_pod("old", namespace, 4))
    cluster.wait_until(lambda: len(k.admitted_pods(namespace)) == 1, 30, "old admitted")
    k.create(gpu_pod("new", namespace, 4, polite))
    new = cluster.kubectl_json("get", "pod", "new", "-n", namespace)
    assert new["spec"]["preemptionPolicy"] == "Never"  # the API server copied it
    assert new["spec"]["priority"] == 1000
    held_for(
        DELAY + 3,
        lambda: [p["metadata"]["name"] for p in k.admitted_pods(namespace)] == ["old"],
        "old was preempted, or new admitted",
    )
    assert not k.events(namespace, "Preempted")
    # Room appears: `new` is admitted then.
    cluster.kubectl("delete", "pod", "old", "-n", namespace, "--wait=false")
    cluster.wait_until(
        lambda: [p["metadata"]["name"] for p in k.admitted_pods(namespace)] == ["new"],
        30,
        "new admitted once old is gone",
    )


def test_reclaim_of_the_lent_guarantee_still_applies_to_such_a_pod(
    cluster: ModuleType, operator: OperatorProcess, polite: str
) -> None:
    s = k.suffix()
    lender, borrower, top = f"pp-lender-{s}", f"pp-borrower-{s}", f"pp-{s}"
    try:
        k.apply(
            k.namespace(lender),
            k.namespace(borrower),
            k.cohort(top, min={GPU: "8"}, max={GPU: "8"}),
            k.quota("lender", lender, parent=top, min={GPU: "4"}, max={GPU: "8"}),
            k.quota("borrower", borrower, parent=top, min={GPU: "4"}, max={GPU: "8"}),
        )
        k.create(*(gpu_pod(f"b{i}", borrower, 2) for i in range(4)))  # 8: 4 of them lent
        cluster.wait_until(lambda: len(k.admitted_pods(borrower)) == 4, 30, "borrower runs 8")
        k.create(gpu_pod("mine", lender, 3, polite))
        cluster.wait_until(lambda: len(k.admitted_pods(lender)) == 1, 60, "lender's pod admitted")
        assert len(k.events(borrower, "Reclaimed")) == 2
        assert not k.events(borrower, "Preempted")
    finally:
        cluster.kubectl("delete", "namespace", lender, borrower, "--wait=false", check=False)
        cluster.kubectl("delete", "cohort", top, "--wait=false", check=False)
