"""Admission at creation on the real control plane (docs/webhooks.md, "Admission at creation").

- At the edge of two quotas whose room is 60 GPUs in all, 4 clients create 200 one-GPU
  pods at once; the leader is killed when about 40 are in. Replica B, standby, serves
  every webhook call (it wrote the configuration last) and passes the pod CREATE
  reviews to A while A leads, then takes over and admits the rest of the room by
  removing gates. Sampled every 0.2 s, no quota ever holds more than its runtime (as
  the engine gives it for that sample's pods); in the end exactly the 60 that fit run,
  the other 140 wait gated, and no pod is admitted twice.
- A CREATE that a later validating webhook (the test's own) refuses leaves no reservation
  after the release time: the room comes back and a pod that waited for it is admitted;
  `kubectl create --dry-run=server` reserves nothing.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from quotree.engine import Engine
from quotree.models import parse_member
from quotree.podfacts import pod_facts
from quotree_webhooks import tls
from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import (
    OperatorProcess,
    delete_webhook_configurations,
    start_operator,
)

GPU = "nvidia.com/gpu"
QUOTA_LABEL = "quotree.io/quota-name"
TOKEN = "quotree.io/admitted-at-create"
NAMESPACE = "quotree-system"
LEASE = "quotree-operator"
RELEASE = 3  # QUOTREE_ADMIT_RESERVATION_SECONDS for these tests
EXTRA_NODES, NODE_GPUS = 4, 16  # room for the 60 GPUs whatever the cluster's nodes have
WEBHOOKS_READY = "configurations quotree.io written"


def _delete(cluster: ModuleType, kind: str, name: str) -> None:
    cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(port: int, pki: Path, identity: str) -> dict[str, str]:
    return {
        "QUOTREE_WEBHOOK_PORT": str(port),
        "QUOTREE_CERT_DIR": str(pki),
        "QUOTREE_IDENTITY": identity,
        "QUOTREE_ADMIT_RESERVATION_SECONDS": str(RELEASE),
        "QUOTREE_RECLAIM_DELAY": "3600",
    }


def _pod(ns: str, prefix: str, gpus: int = 1, labels: dict[str, str] | None = None) -> Any:
    """A pod as a client creates it: no gate, a generateName (no name at admission)."""
    body = k.pod("x", ns, {GPU: str(gpus)}, labels=labels)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = f"{prefix}-"
    body["spec"].pop("schedulingGates")
    return body


def _gpu_nodes(cluster: ModuleType, names: list[str]) -> None:
    """Fake nodes of NODE_GPUS GPUs each (kwok's), beside the cluster's own."""
    for name in names:
        metadata = {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name},
        }
        body = {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": {}}
        cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
        room = {"cpu": "32", "memory": "128Gi", GPU: str(NODE_GPUS), "pods": "110"}
        patch = json.dumps({"status": {"capacity": room, "allocatable": room}})

        def patched(name: str = name, patch: str = patch) -> bool:
            cluster.kubectl(
                "patch", "node", name, "--subresource=status", "--type=merge", "-p", patch
            )
            time.sleep(0.5)
            status = cluster.kubectl_json("get", "node", name)["status"]
            return bool(status.get("allocatable", {}).get(GPU) == str(NODE_GPUS))

        cluster.wait_until(patched, 60, f"node {name} with {NODE_GPUS} GPUs")


class Sampler(threading.Thread):
    """Every 0.2 s (or as soon as the last list is in), the live pods labelled `selector`
    in any namespace, as (quota, gated)."""

    def __init__(self, selector: str) -> None:
        super().__init__(daemon=True)
        self.selector = selector
        self.samples: list[list[tuple[str, bool]]] = []
        self.done = threading.Event()
        self.began = self.ended = 0.0

    def run(self) -> None:
        self.began = time.monotonic()
        api = _Api()
        while not self.done.is_set():
            started = time.monotonic()
            try:
                items = api.get(f"/api/v1/pods?labelSelector={self.selector}")["items"]
            except Exception:  # a failed list is skipped
                api = _Api()
                continue
            self.samples.append(
                [(p["metadata"]["labels"][QUOTA_LABEL], k.gated(p)) for p in items if k.live(p)]
            )
            time.sleep(max(0.0, 0.2 - (time.monotonic() - started)))
        self.ended = time.monotonic()

    @property
    def interval(self) -> float:
        return (self.ended - self.began) / max(1, len(self.samples))


class _Api:
    """One kept-alive HTTPS connection to the API server (a kubectl per list is too slow
    to sample every 0.2 s), with the kubeconfig's client certificate."""

    def __init__(self) -> None:
        user = yaml.safe_load(k.cluster.KUBECONFIG.read_text())["users"][0]["user"]
        context = ssl.create_default_context(cafile=str(k.cluster.CA_CERT))
        folder = Path(k.cluster.RUN_DIR) / "aac-client"
        folder.mkdir(exist_ok=True)
        if "client-certificate-data" in user:
            (folder / "c.crt").write_bytes(base64.b64decode(user["client-certificate-data"]))
            (folder / "c.key").write_bytes(base64.b64decode(user["client-key-data"]))
            context.load_cert_chain(str(folder / "c.crt"), str(folder / "c.key"))
        else:
            context.load_cert_chain(user["client-certificate"], user["client-key"])
        url = urllib.parse.urlparse(k.cluster.APISERVER_URL)
        self.connection = http.client.HTTPSConnection(
            url.hostname or "127.0.0.1", url.port, context=context, timeout=10
        )

    def get(self, path: str) -> Any:
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status}")
        return json.loads(body)


def _over_runtime(
    configs: list[dict[str, Any]], sample: list[tuple[str, bool]], capacity: int
) -> dict[str, tuple[int, int]]:
    """Quotas whose ungated pods hold more GPUs than the runtime the engine gives this
    sample's pods (gated ones count as demand)."""
    engine = Engine()
    engine.set_cluster_node("all", {GPU: capacity})
    for doc in configs:
        engine.set_config(parse_member(doc))
    for i, (quota, gated) in enumerate(sample):
        body = k.pod(f"p{i}", quota, {GPU: "1"}, labels={QUOTA_LABEL: quota})
        if not gated:
            body["spec"]["schedulingGates"] = []
        engine.observe_pod(pod_facts(body))
    engine.refresh()
    out = {}
    for doc in configs:
        if doc["kind"] == "ElasticQuota":
            report = engine.report(doc["metadata"]["name"])
            used, runtime = report.used.get(GPU, 0), report.runtime.get(GPU, 0)
            if used > runtime:
                out[doc["metadata"]["name"]] = (used, runtime)
    return out


def test_the_edge_of_a_quota_holds_through_concurrent_creations_and_a_failover(
    cluster: ModuleType, tmp_path: Path
) -> None:
    s = k.suffix()
    top, names = f"aac-{s}", [f"aac-{s}-a", f"aac-{s}-b"]
    nodes = [f"aac-{s}-node-{i}" for i in range(EXTRA_NODES)]
    configs = [
        k.cohort(top, min={GPU: "60"}, max={GPU: "60"}),
        *(k.quota(n, n, parent=top, min={GPU: "30"}, max={GPU: "30"}) for n in names),
    ]
    started: list[OperatorProcess] = []
    sampler = Sampler(f"aac%3D{s}")
    try:
        _gpu_nodes(cluster, nodes)
        k.apply(*(k.namespace(n) for n in names), *configs)
        pki = tmp_path / "pki"
        a = start_operator(_env(_free_port(), pki, f"aac-a-{s}"), log_name="aac-a")
        started.append(a)
        a.wait_for_log(WEBHOOKS_READY, 60)
        b = start_operator(
            _env(_free_port(), pki, f"aac-b-{s}"), log_name="aac-b", ready=WEBHOOKS_READY
        )
        started.append(b)  # B wrote the configurations last: every webhook call is B's
        cluster.wait_until(
            lambda: all(
                "managed" in str(cluster.kubectl_json("get", "namespace", n)["metadata"])
                for n in names
            ),
            60,
            "the namespaces managed",
        )
        sampler.start()
        bodies = [_pod(names[i % 2], f"c{i % 4}", labels={"aac": s}) for i in range(200)]
        half = threading.Event()

        def client(c: int) -> int:
            mine = bodies[c::4]
            for j in range(0, len(mine), 5):
                k.create(*mine[j : j + 5])
                if c == 0 and j >= 5:
                    half.set()  # about 40 pods in: the room is two thirds full
                time.sleep(0.5)
            return len(mine)

        with ThreadPoolExecutor(4) as clients:
            futures = [clients.submit(client, c) for c in range(4)]
            half.wait(120)
            assert "acquired the leader lease" not in b.log_text(), "B led beside A"
            a.kill()  # the leader dies; B takes over when the Lease runs out
            assert sum(f.result() for f in futures) == 200

        def settled() -> bool:
            pods = [p for n in names for p in k.pods(n) if k.live(p)]
            return len(pods) == 200 and sum(not k.gated(p) for p in pods) == 60

        cluster.wait_until(settled, 120, "60 pods admitted, 140 gated")
        b.wait_for_log("acquired the leader lease", 30)  # the Lease runs out 15 s after A
        time.sleep(RELEASE + 2)  # any reservation left would have been released by now
        sampler.done.set()
        sampler.join(10)

        for n in names:
            pods = [p for p in k.pods(n) if k.live(p)]
            admitted = [p for p in pods if not k.gated(p)]
            assert len(admitted) == 30, (n, len(admitted))
            cluster.wait_until(
                lambda n=n: sum(p["spec"].get("nodeName") is not None for p in k.pods(n)) >= 30,
                60,
                f"the admitted pods of {n} bound",
            )
            st = k.status("ElasticQuota", n, n)
            assert st["used"] == {GPU: "30"}, st
            assert st["pendingPods"] == 70, st
            # Nothing admitted twice: at most one Admitted event per pod.
            announced = Counter(e["involvedObject"]["name"] for e in k.events(n, "Admitted"))
            assert not announced or max(announced.values()) == 1, announced
        at_create = sum(TOKEN in (p["metadata"].get("annotations") or {}) for n in names
                        for p in k.pods(n))  # fmt: skip
        # Both ways were taken: at creation (A, through B), by removing the gate (B).
        assert 0 < at_create < 60, at_create
        capacity = _cluster_gpus(cluster)
        over = [o for sample in sampler.samples if (o := _over_runtime(configs, sample, capacity))]
        print(
            f"admit-at-create: {len(sampler.samples)} samples, one every "
            f"{sampler.interval:.2f} s; {at_create} of 60 admitted at their creation"
        )
        assert not over, over[:3]
        assert sampler.interval < 0.5, sampler.interval
    finally:
        sampler.done.set()
        for proc in started:
            proc.stop()
        delete_webhook_configurations()  # B's, at a port nobody serves any more
        for n in names:
            cluster.kubectl(
                "delete", "namespace", n, "--wait=false", "--ignore-not-found", check=False
            )
        _delete(cluster, "cohort", top)
        for node in nodes:
            cluster.kubectl(
                "delete", "node", node, "--wait=false", "--ignore-not-found", check=False
            )


def _cluster_gpus(cluster: ModuleType) -> int:
    return sum(
        int(n["status"].get("allocatable", {}).get(GPU, "0"))
        for n in cluster.kubectl_json("get", "nodes")["items"]
    )


class _Refuser(http.server.BaseHTTPRequestHandler):
    """A validating webhook that refuses pods labelled refuse=yes."""

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        labels = request["object"]["metadata"].get("labels") or {}
        refused = labels.get("refuse") == "yes"
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": not refused},
        }
        if refused:
            answer["response"]["status"] = {"code": 403, "message": "refused by the test"}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return


def _refusing_webhook(cluster: ModuleType, pki_dir: Path, ns: str, name: str) -> Any:
    """Serve `_Refuser` over HTTPS and register it for pod CREATEs in `ns`."""
    pki = tls.ensure_pki(pki_dir, ["127.0.0.1"])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuser)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pki.cert), str(pki.key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"refuse.{name}.test",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/",
                    "caBundle": base64.b64encode(pki.ca_cert.read_bytes()).decode(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
            }
        ],
    }
    k.apply(config)
    return server


def test_a_refused_creation_and_a_dry_run_leave_no_reservation(
    cluster: ModuleType, tmp_path: Path
) -> None:
    s = k.suffix()
    ns, top, hook = f"aacr-{s}", f"aacr-{s}-top", f"aacr-{s}"
    server = None
    op = None
    try:
        k.apply(
            k.namespace(ns),
            k.cohort(top, min={"cpu": "5"}, max={"cpu": "5"}),
            k.quota(ns, ns, parent=top, min={"cpu": "5"}, max={"cpu": "5"}),
        )
        op = start_operator(
            _env(_free_port(), tmp_path / "pki", f"aacr-{s}"), log_name="aac-refused"
        )
        op.wait_for_log(WEBHOOKS_READY, 60)
        server = _refusing_webhook(cluster, tmp_path / "refuser-pki", ns, hook)
        cpu = {"cpu": "1"}

        def plain(prefix: str, labels: dict[str, str] | None = None) -> Any:
            body = _pod(ns, prefix, labels=labels)
            body["spec"]["containers"][0]["resources"] = {"requests": cpu, "limits": cpu}
            return body

        # Five CREATEs that fit, each refused after quotree admitted it.
        for _ in range(5):
            out = cluster.kubectl(
                "create", "-f", "-", input=json.dumps(plain("refused", {"refuse": "yes"})),
                check=False,
            )  # fmt: skip
            assert out.returncode != 0
            assert "refused by the test" in out.stderr, out.stderr
        # Their room is held until the release time: a pod created now waits.
        cluster.kubectl("create", "-f", "-", input=json.dumps(plain("waits")))
        (waiting,) = k.pods(ns)
        assert k.gated(waiting)
        released = time.monotonic()
        cluster.wait_until(lambda: not k.gated(k.pods(ns)[0]), RELEASE + 10, "the pod admitted")
        assert time.monotonic() - released <= RELEASE + 5
        # Every refused CREATE's reservation released; only the admitted pod holds room.
        cluster.wait_until(
            lambda: op.log_text().count("showed up within") == 5, 5, "5 reservations released"
        )
        cluster.wait_until(
            lambda: k.status("ElasticQuota", ns, ns).get("used") == {"cpu": "1"},
            30,
            "used 1 in the status",
        )

        # Four dry runs reserve nothing: four real pods then fit at once.
        for _ in range(4):
            cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(plain("dry")))
        for _ in range(4):
            cluster.kubectl("create", "-f", "-", input=json.dumps(plain("real")))
        pods = k.pods(ns)
        assert len(pods) == 5
        assert not any(k.gated(p) for p in pods)
        real = [p for p in pods if p["metadata"]["name"].startswith("real-")]
        assert all(TOKEN in p["metadata"]["annotations"] for p in real)
        cluster.wait_until(
            lambda: k.status("ElasticQuota", ns, ns).get("used") == {"cpu": "5"},
            30,
            "used 5 in the status",
        )
    finally:
        if server is not None:
            server.shutdown()
        cluster.kubectl(
            "delete", "validatingwebhookconfiguration", hook, "--ignore-not-found", check=False
        )
        if op is not None:
            op.stop()
        delete_webhook_configurations()
        cluster.kubectl(
            "delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False
        )
        _delete(cluster, "cohort", top)
