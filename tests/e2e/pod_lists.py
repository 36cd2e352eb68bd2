"""One namespace's pod list as a real API server writes it in JSON and in protobuf.

The pods (tests/unit/operator/data/podproto-pods.yaml and podproto-generated.yaml) use
every field the operator reads of a pod. `settle()` applies them and waits until the
cluster has done what it does to them (a finalizer holds one pod while it is deleted, a
Job makes its pods, kwok runs the bound ones); `answers()` is the list in both encodings,
asked for as the operator's helper asks (pod_reader.py). Used by
tests/e2e/test_pod_list_encodings.py, and by hack/capture_pod_lists.py, which keeps the
answers as the unit tests' data (tests/unit/operator/test_podproto.py).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kubernetes_asyncio import client, config

from quotree_operator import pod_reader
from quotree_operator.connection import list_request
from quotree_operator.podproto import MEDIA_TYPE
from tests.e2e import cluster

DATA = Path(__file__).resolve().parent.parent / "unit" / "operator" / "data"
NAMESPACE = "podproto-fixture"
HELD = "held-while-deleted"


def _kubectl(*args: str) -> str:
    return cluster.kubectl(*args).stdout


def settle(timeout: float = 60) -> None:
    """Apply the pods and wait until the Job's pods are done and the bound ones run (a
    namespace left by an earlier run is deleted first)."""
    _release_held()
    _kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", f"--timeout={timeout}s")
    _kubectl("apply", "-f", str(DATA / "podproto-pods.yaml"))
    _kubectl("create", "-f", str(DATA / "podproto-generated.yaml"))
    _kubectl("delete", "pod", "-n", NAMESPACE, HELD, "--wait=false")
    deadline = time.monotonic() + timeout
    phases: list[str] = []
    while time.monotonic() < deadline:
        out = _kubectl("get", "pods", "-n", NAMESPACE, "-o", "jsonpath={.items[*].status.phase}")
        phases = out.split()
        if len(phases) == 10 and phases.count("Running") == 3 and phases.count("Succeeded") == 2:
            return
        time.sleep(1)
    raise TimeoutError(f"namespace {NAMESPACE}: the pods did not settle: {phases}")


def clean_up() -> None:
    """Let the held pod go, and delete the namespace (not waiting)."""
    _release_held()
    _kubectl("delete", "namespace", NAMESPACE, "--wait=false")


def _release_held() -> None:
    """The held pod's finalizer taken off (nothing when there is no such pod)."""
    patch = '[{"op":"remove","path":"/metadata/finalizers"}]'
    cluster.kubectl("patch", "pod", "-n", NAMESPACE, HELD, "--type=json", "-p", patch, check=False)


async def _answer(accept: str) -> bytes:
    # The cluster's own kubeconfig (kubernetes_asyncio reads $KUBECONFIG when imported).
    configuration = client.Configuration()
    await config.load_kube_config(str(cluster.KUBECONFIG), client_configuration=configuration)
    api = client.ApiClient(configuration)
    try:
        request = await list_request(api, f"/api/v1/namespaces/{NAMESPACE}/pods", 60)
    finally:
        await api.close()
    assert request is not None, "a proxy is configured: the lists need a direct client"
    response = pod_reader._ask(request, accept=accept).getresponse()
    assert response.status == 200, response.read()
    assert response.getheader("Content-Type", "").startswith(accept)
    return b"".join(pod_reader._decoded(response))


def answers() -> tuple[bytes, bytes]:
    """The namespace's pod list from the watch cache, in JSON and in protobuf."""
    return asyncio.run(_answer("application/json")), asyncio.run(_answer(MEDIA_TYPE))
