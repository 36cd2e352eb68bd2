"""The local control plane itself: version, health, nodes, workloads, gates, webhooks, restart.

Everything runs against the real processes started by hack/cluster.sh; every wait polls with a
timeout and every test asserts what it observed.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import cluster as c

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok fakes the containers
GATE = "quotree.dev/e2e-gate"


def _pods(namespace: str, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = c.kubectl_json("-n", namespace, "get", "pods", "-l", selector)[
        "items"
    ]
    return items


def _pod(namespace: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = c.kubectl_json("-n", namespace, "get", "pod", name)
    return pod


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == kind:
            return dict(cond)
    return None


def _pod_manifest(name: str, gated: bool) -> str:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": PAUSE_IMAGE}],
        "terminationGracePeriodSeconds": 0,
    }
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


# --- version and health ---------------------------------------------------------------------


def test_apiserver_reports_pinned_version_and_is_ready(cluster: ModuleType) -> None:
    version = json.loads(c.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == c.KUBE_VERSION
    assert version["major"] == "1"
    assert version["minor"] == c.KUBE_VERSION.split(".")[1]

    assert c.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    verbose = c.kubectl("get", "--raw", "/readyz?verbose").stdout
    assert "readyz check passed" in verbose
    assert "[+]etcd ok" in verbose

    client = json.loads(c.kubectl("version", "-o", "json").stdout)
    assert client["clientVersion"]["gitVersion"] == c.KUBE_VERSION
    assert client["serverVersion"]["gitVersion"] == c.KUBE_VERSION


def test_kubectl_is_our_own_build(cluster: ModuleType) -> None:
    assert c.KUBECTL.is_file()
    assert Path(c.KUBECTL).resolve().is_relative_to(c.CACHE_DIR.resolve())
    print(f"kubectl: {c.KUBECTL}")


def test_all_fake_nodes_ready_with_configured_capacity(cluster: ModuleType) -> None:
    nodes = c.kubectl_json("get", "nodes", "-l", c.NODE_LABEL)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(
        f"quotree-node-{i}" for i in range(c.NODES)
    )
    for node in nodes:
        ready = _condition(node, "Ready")
        assert ready is not None
        assert ready["status"] == "True", node["metadata"]["name"]
        alloc = node["status"]["allocatable"]
        assert alloc["cpu"] == c.NODE_CPU
        assert alloc["memory"] == c.NODE_MEMORY
        assert alloc["nvidia.com/gpu"] == c.NODE_GPU
        assert alloc["pods"] == c.NODE_PODS
        assert not node["spec"].get("taints"), "fake nodes must accept ordinary pods"


# --- workloads ------------------------------------------------------------------------------


def test_deployment_gets_three_running_pods(namespace: str) -> None:
    c.kubectl(
        "-n", namespace, "create", "deployment", "web", f"--image={PAUSE_IMAGE}", "--replicas=3"
    )

    def three_running() -> list[dict[str, Any]] | None:
        pods = _pods(namespace, "app=web")
        running = [
            p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")
        ]
        return running if len(running) == 3 else None

    running = c.wait_until(three_running, timeout=90, what="3 Running pods of deployment web")
    assert all(p["spec"]["nodeName"].startswith("quotree-node-") for p in running)
    c.wait_until(
        lambda: (
            c.kubectl_json("-n", namespace, "get", "deployment", "web")["status"].get(
                "readyReplicas"
            )
            == 3
        ),
        timeout=60,
        what="deployment web readyReplicas == 3",
    )


def test_job_completes(namespace: str) -> None:
    c.kubectl("-n", namespace, "create", "job", "once", f"--image={PAUSE_IMAGE}")
    c.kubectl(
        "-n",
        namespace,
        "wait",
        "--for=condition=Complete",
        "job/once",
        "--timeout=120s",
        timeout=150,
    )
    job = c.kubectl_json("-n", namespace, "get", "job", "once")
    assert job["status"]["succeeded"] == 1


def test_the_job_controller_gives_an_indexed_job_its_own_gang_podgroup(namespace: str) -> None:
    """Kubernetes' own pod groups are on (docs/control-plane.md): the API is served, and the
    job controller (WorkloadWithJob) makes an Indexed Job's gang PodGroup and links its
    pods to it; the scheduler (GangScheduling) places them."""
    served = c.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name").stdout
    assert {"podgroups.scheduling.k8s.io", "workloads.scheduling.k8s.io"} <= set(served.split())
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": PAUSE_IMAGE}],
                }
            },
        },
    }
    c.kubectl("apply", "-f", "-", input=json.dumps(job))
    groups = c.wait_until(
        lambda: c.kubectl_json("-n", namespace, "get", "podgroups")["items"],
        timeout=60,
        what="the Job's PodGroup",
    )
    assert [g["spec"]["schedulingPolicy"] for g in groups] == [{"gang": {"minCount": 2}}]
    c.kubectl(
        "-n",
        namespace,
        "wait",
        "--for=condition=Complete",
        "job/gang",
        "--timeout=120s",
        timeout=150,
    )


# --- scheduling gates -----------------------------------------------------------------------


def test_gated_pod_stays_pending_until_gate_removed(namespace: str) -> None:
    c.kubectl("-n", namespace, "apply", "-f", "-", input=_pod_manifest("gated", gated=True))

    def scheduled_condition() -> dict[str, Any] | None:
        return _condition(_pod(namespace, "gated"), "PodScheduled")

    cond = c.wait_until(scheduled_condition, timeout=30, what="PodScheduled condition")
    assert cond["status"] == "False"
    assert cond["reason"] == "SchedulingGated"

    # It stays gated: observe it several times over a few seconds (the scheduler and kwok
    # are running, so an ungated pod would be bound and Running well within this window).
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pod = _pod(namespace, "gated")
        assert not pod["spec"].get("nodeName")
        assert pod["status"].get("phase") == "Pending"
        still = _condition(pod, "PodScheduled")
        assert still is not None
        assert still["reason"] == "SchedulingGated"
        time.sleep(1)

    c.kubectl(
        "-n",
        namespace,
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/schedulingGates"}]',
    )
    pod = c.wait_until(
        lambda: (p := _pod(namespace, "gated"))["status"].get("phase") == "Running" and p,
        timeout=60,
        what="the ungated pod to be Running",
    )
    assert pod["spec"]["nodeName"].startswith("quotree-node-")
    scheduled = _condition(pod, "PodScheduled")
    assert scheduled is not None
    assert scheduled["status"] == "True"


def test_adding_a_gate_to_an_existing_pod_is_rejected(namespace: str) -> None:
    c.kubectl("-n", namespace, "apply", "-f", "-", input=_pod_manifest("plain", gated=False))
    proc = c.kubectl(
        "-n",
        namespace,
        "patch",
        "pod",
        "plain",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"schedulingGates": [{"name": GATE}]}}),
        check=False,
    )
    assert proc.returncode != 0, proc.stdout
    assert "Forbidden" in proc.stderr or "Invalid" in proc.stderr, proc.stderr
    assert "schedulinggates" in proc.stderr.lower(), proc.stderr
    assert not _pod(namespace, "plain")["spec"].get("schedulingGates")


# --- an admission webhook on 127.0.0.1 ------------------------------------------------------


class _Webhook:
    """A tiny HTTPS validating webhook: denies objects named ``deny-*``, records every call."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                review = json.loads(body)
                request = review["request"]
                webhook.calls.append(request)
                name = request.get("name") or request["object"]["metadata"].get("name", "")
                allowed = not name.startswith("deny-")
                response: dict[str, Any] = {"uid": request["uid"], "allowed": allowed}
                if not allowed:
                    response["status"] = {
                        "code": 403,
                        "message": f"quotree-e2e webhook says no to {name}",
                    }
                out = json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": response,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(c.WEBHOOK_CERT), str(c.WEBHOOK_KEY))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Webhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook(cluster: ModuleType) -> Iterator[_Webhook]:
    with _Webhook() as hook:
        yield hook


def test_validating_webhook_is_called_and_denial_reaches_kubectl(
    namespace: str, webhook: _Webhook
) -> None:
    config_name = f"quotree-e2e-{namespace}"
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [
            {
                "name": "e2e.quotree.dev",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{webhook.port}/validate",
                    "caBundle": c.ca_bundle(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }
    c.kubectl("apply", "-f", "-", input=json.dumps(config))
    try:

        def configmap(name: str) -> str:
            return json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace},
                    "data": {"k": "v"},
                }
            )

        # The apiserver picks up new webhook configurations asynchronously: retry the
        # denied create until the webhook answers (a create that slipped through is removed).
        def denied() -> subprocess.CompletedProcess[str] | None:
            proc = c.kubectl("apply", "-f", "-", input=configmap("deny-me"), check=False)
            if proc.returncode == 0:
                c.kubectl("-n", namespace, "delete", "configmap", "deny-me", check=False)
                return None
            return proc

        proc = c.wait_until(denied, timeout=30, what="the webhook to deny configmap deny-me")
        output = proc.stdout + proc.stderr
        assert "quotree-e2e webhook says no to deny-me" in output, output
        assert 'admission webhook "e2e.quotree.dev" denied the request' in output, output

        c.kubectl("apply", "-f", "-", input=configmap("allow-me"))
        names = [(r["operation"], r["name"]) for r in webhook.calls]
        assert ("CREATE", "deny-me") in names
        assert ("CREATE", "allow-me") in names
        assert all(r["namespace"] == namespace for r in webhook.calls)
        assert (
            c.kubectl("-n", namespace, "get", "configmap", "allow-me", check=False).returncode == 0
        )
        assert (
            c.kubectl("-n", namespace, "get", "configmap", "deny-me", check=False).returncode != 0
        )
    finally:
        c.kubectl("delete", "validatingwebhookconfiguration", config_name, check=False)


# --- stop and start (runs last: see the cluster_restart marker in conftest.py) -----------------


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _make(target: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-C", str(c.REPO_ROOT), target],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.cluster_restart
def test_cluster_down_stops_everything_and_up_is_idempotent(cluster: ModuleType) -> None:
    # Running already: `make cluster-up` is a no-op that says so.
    again = _make("cluster-up")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already running" in again.stderr, again.stderr

    pids = {name: int((c.PID_DIR / f"{name}.pid").read_text()) for name in c.COMPONENTS}
    assert all(_listening(port) for port in c.PORTS.values())

    down = _make("cluster-down", timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    for name, pid in pids.items():
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"{name} (pid {pid}) alive"
    listening = {name: port for name, port in c.PORTS.items() if _listening(port)}
    assert not listening, f"still listening after cluster-down: {listening}"
    assert not c.is_running()

    try:
        first = _make("cluster-up")
        assert first.returncode == 0, first.stdout + first.stderr
        assert "ready in" in first.stderr, first.stderr
        second = _make("cluster-up")
        assert second.returncode == 0, second.stdout + second.stderr
        assert "already running" in second.stderr, second.stderr
        new_pids = {name: int((c.PID_DIR / f"{name}.pid").read_text()) for name in c.COMPONENTS}
        assert set(new_pids.values()).isdisjoint(pids.values())
    finally:
        if not c.is_running():  # leave the session a working cluster whatever happened
            c.cluster_up()

    assert c.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    status = _make("cluster-status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert c.KUBE_VERSION in status.stdout
    c.wait_until(
        lambda: all(
            (cond := _condition(n, "Ready")) is not None and cond["status"] == "True"
            for n in c.kubectl_json("get", "nodes", "-l", c.NODE_LABEL)["items"]
        ),
        timeout=60,
        what="all fake nodes Ready after the restart",
    )
    assert os.environ["KUBECONFIG"] == str(c.KUBECONFIG)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True
