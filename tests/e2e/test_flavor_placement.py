"""Resource flavors and maintenance mode end to end: a real operator, real scheduler, kwok nodes.

The control plane's fake nodes carry GPU models (hack/cluster.sh, QUOTREE_NODE_LABELS; by
default the first half are A100 nodes, the rest H100 nodes). A quota that prefers a100,
then h100 gets its first pods on A100 nodes and, once its A100 quota is used, the next
ones on H100 nodes: the operator adds the flavor's nodeLabels to each pod's nodeSelector
in the patch that removes the gate, and the stock kube-scheduler does the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"


def flavor(name: str, product: str) -> dict[str, Any]:
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {PRODUCT: product}},
    }


def nodes_of(product: str, cluster: ModuleType) -> set[str]:
    items = cluster.kubectl_json("get", "nodes", "-l", f"{PRODUCT}={product}")["items"]
    return {n["metadata"]["name"] for n in items}


@pytest.fixture(scope="module")
def gpu_models(cluster: ModuleType) -> dict[str, set[str]]:
    """The fake nodes of each GPU model, as hack/cluster.sh labelled them."""
    models = {A100: nodes_of(A100, cluster), H100: nodes_of(H100, cluster)}
    assert models[A100], (
        "no fake node is labelled as an A100 node: this control plane was started before "
        "hack/cluster.sh labelled nodes (QUOTREE_NODE_LABELS); restart it"
    )
    assert models[H100]
    return models


@pytest.fixture(scope="module")
def operator(cluster: ModuleType) -> Iterator[OperatorProcess]:
    proc = start_operator({"QUOTREE_WEBHOOKS": "0"}, log_name="operator-flavors")
    yield proc
    alive = proc.alive
    proc.stop()
    assert alive, "the operator died\n" + proc.log_tail()


@pytest.fixture
def objects(cluster: ModuleType) -> Iterator[Callable[..., None]]:
    """Apply objects; namespaces, Cohorts and ResourceFlavors made here go afterwards."""
    made: list[tuple[str, str]] = []

    def make(*docs: dict[str, Any]) -> None:
        for doc in docs:
            if doc["kind"] in ("Namespace", "Cohort", "ResourceFlavor"):
                made.append((doc["kind"].lower(), doc["metadata"]["name"]))
        k.apply(*docs)

    yield make
    for kind, name in reversed(made):
        cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)


def wait(cluster: ModuleType, operator: OperatorProcess, what: str, predicate: Any) -> Any:
    try:
        return cluster.wait_until(predicate, 90, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{operator.log_tail(40)}") from None


def test_pods_go_to_a100_nodes_until_the_a100_quota_is_used_then_to_h100(
    cluster: ModuleType,
    operator: OperatorProcess,
    objects: Callable[..., None],
    gpu_models: dict[str, set[str]],
) -> None:
    s = k.suffix()
    ns, a100, h100, team = f"fl-{s}", f"a100-{s}", f"h100-{s}", f"fl-team-{s}"
    objects(
        flavor(a100, A100),
        flavor(h100, H100),
        k.namespace(ns),
        k.quota(
            team,
            ns,
            flavors=[
                {"name": a100, "min": {GPU: "2"}, "max": {GPU: "3"}},
                {"name": h100, "min": {GPU: "2"}},
            ],
        ),
    )
    # One at a time, so that creation order is admission order.
    for i in range(5):
        objects(k.pod(f"job-{i}", ns, {GPU: "1"}))
        wait(
            cluster,
            operator,
            f"job-{i} admitted and bound",
            lambda i=i: any(
                p["metadata"]["name"] == f"job-{i}" and p["spec"].get("nodeName")
                for p in k.admitted_pods(ns)
            ),
        )
    pods = {p["metadata"]["name"]: p for p in k.pods(ns)}
    flavors = {name: p["metadata"]["labels"].get("quotree.io/flavor") for name, p in pods.items()}
    assert flavors == {
        "job-0": a100,
        "job-1": a100,
        "job-2": a100,
        "job-3": h100,
        "job-4": h100,
    }
    for name, p in pods.items():
        product = A100 if flavors[name] == a100 else H100
        assert p["spec"]["nodeSelector"] == {PRODUCT: product}
        assert p["spec"]["nodeName"] in gpu_models[product]
    # What a person sees: `kubectl get pod -o wide` names the node each pod is bound to.
    wide = cluster.kubectl("get", "pods", "-n", ns, "-o", "wide", "--no-headers").stdout
    bound = {line.split()[0]: line.split()[6] for line in wide.splitlines() if line.strip()}
    assert {n for j, n in bound.items() if flavors[j] == a100} <= gpu_models[A100]
    assert {n for j, n in bound.items() if flavors[j] == h100} <= gpu_models[H100]
    # Status, annotations and the printer column name the resources <resource>@<flavor>.
    st = wait(
        cluster,
        operator,
        "team's status",
        lambda: (
            (st := k.status("eq", team, ns)).get("used")
            == {f"{GPU}@{a100}": "3", f"{GPU}@{h100}": "2"}
            and st
        ),
    )
    assert json.loads(st["_annotations"]["quotree.io/used"]) == st["used"]
    row = cluster.kubectl("get", "eq", team, "-n", ns, "--no-headers").stdout
    assert f"{GPU}@{a100}" in row
    assert f"{GPU}@{h100}" in row


def test_maintenance_annotation_holds_admission_until_removed(
    cluster: ModuleType, operator: OperatorProcess, objects: Callable[..., None]
) -> None:
    s = k.suffix()
    ns, top = f"mt-{s}", f"mt-{s}"
    held = k.cohort(top, min={GPU: "2"})
    held["metadata"]["annotations"] = {"quotree.io/maintenance": "true"}
    team = f"mt-team-{s}"  # tree member names are unique across namespaces
    objects(k.namespace(ns), held, k.quota(team, ns, parent=top, min={GPU: "2"}))
    objects(k.pod("job", ns, {GPU: "1"}))
    wait(
        cluster,
        operator,
        "a Pending event that names maintenance mode",
        lambda: any("maintenance mode" in e["message"] for e in k.events(ns, "Pending")),
    )
    # Still accounting and reporting: the pod is counted, its demand is in the status.
    st = wait(
        cluster,
        operator,
        "team's status",
        lambda: (st := k.status("eq", team, ns)).get("pendingPods") == 1 and st,
    )
    assert st["request"] == {GPU: "1"}  # its demand counts while it waits
    assert k.gated(k.pods(ns)[0])
    cluster.kubectl("annotate", "cohort", top, "quotree.io/maintenance-")
    wait(cluster, operator, "the pod admitted", lambda: len(k.admitted_pods(ns)) == 1)


def test_derived_gpu_memory_is_charged_shown_in_status_and_holds_the_pod_that_would_exceed_it(
    cluster: ModuleType,
    operator: OperatorProcess,
    objects: Callable[..., None],
    gpu_models: dict[str, set[str]],
) -> None:
    """nos's GPU memory: a quota written in GPU memory (as in examples/gpu-memory.yaml)."""
    s = k.suffix()
    ns, a100, h100, team = f"gm-{s}", f"gm-a100-{s}", f"gm-h100-{s}", f"gm-team-{s}"
    memory = "quotree.io/gpu-memory"
    with_memory = []
    for name, product, per_gpu in ((a100, A100, "80Gi"), (h100, H100, "94Gi")):
        doc = flavor(name, product)
        doc["spec"]["gpuMemoryPerGPU"] = per_gpu
        with_memory.append(doc)
    objects(
        *with_memory,
        k.namespace(ns),
        k.quota(
            team,
            ns,
            max={memory: "250Gi"},
            flavors=[{"name": a100, "max": {GPU: "3"}}, {"name": h100, "min": {GPU: "0"}}],
        ),
    )
    for i in range(3):
        objects(k.pod(f"job-{i}", ns, {GPU: "1"}))
        wait(
            cluster,
            operator,
            f"job-{i} admitted",
            lambda i=i: any(p["metadata"]["name"] == f"job-{i}" for p in k.admitted_pods(ns)),
        )
    # A100 is at its max; H100 would bring GPU memory to 240Gi + 94Gi > 250Gi: job-3 waits,
    # on its first flavor, and its Pending event gives the GPU memory numbers.
    objects(k.pod("job-3", ns, {GPU: "1"}))
    pending = wait(
        cluster,
        operator,
        "job-3's Pending event naming GPU memory",
        lambda: [
            e["message"]
            for e in k.events(ns, "Pending")
            if e["involvedObject"]["name"] == "job-3" and memory in e["message"]
        ],
    )
    assert f"{memory}: used 240Gi + request 80Gi > runtime 250Gi" in pending[0]
    pods = {p["metadata"]["name"]: p for p in k.pods(ns)}
    assert k.gated(pods["job-3"])
    assert {
        n: (p["metadata"].get("labels") or {}).get("quotree.io/flavor") for n, p in pods.items()
    } == {
        "job-0": a100,
        "job-1": a100,
        "job-2": a100,
        "job-3": None,
    }
    st = wait(
        cluster,
        operator,
        "team's status with GPU memory used",
        lambda: (st := k.status("eq", team, ns)).get("used", {}).get(memory) == "240Gi" and st,
    )
    assert st["used"][f"{GPU}@{a100}"] == "3"
    assert json.loads(st["_annotations"]["quotree.io/used"]) == st["used"]
    # Freeing one A100 pod lets job-3 in, on A100 (first flavor, now under its max).
    cluster.kubectl("delete", "pod", "job-0", "-n", ns, "--wait=false")
    wait(
        cluster,
        operator,
        "job-3 admitted on a100",
        lambda: any(
            p["metadata"]["name"] == "job-3"
            and (p["metadata"].get("labels") or {}).get("quotree.io/flavor") == a100
            for p in k.admitted_pods(ns)
        ),
    )
