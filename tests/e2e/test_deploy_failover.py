"""Two replicas of the image, one acting: the Deployment's failover, proved with containers.

Replica A starts first and takes the Lease; replica B starts second, stays standby and,
having written the webhook configurations last, answers the API server's webhook calls.
Both run as the ServiceAccount with the manifests' RBAC and share the webhook CA and
serving certificate through the Secret quotree-webhook-tls (QUOTREE_CERT_SECRET).

- Both replicas judge with the same view: a rule broken through B (kubectl, the standby)
  is refused, and the same review posted to A is refused with the same message.
- Mid-burst of 300 pods over 10 quotas, A gets SIGKILL: B takes the Lease within the
  lease duration (15 s, plus its 2 s retry period) of A's last renewal; no quota's
  admitted cpu is ever above the runtime the engine gives a consistent pod list; no pod
  is admitted twice (at most one Admitted event); the end state equals `quotree simulate`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import threading
import time
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.burst import over_runtime, simulate
from tests.e2e.container_proc import (
    ContainerOperator,
    image_exists,
    sa_kubeconfig,
    start_container,
)
from tests.e2e.test_webhooks_rules import WEBHOOKS_READY

PORT_A, PORT_B = 19447, 19448
NAMESPACE = "quotree-system"
LEASE = "quotree-operator"
LEASE_DURATION = 15
STANDBY_RETRY = 2
QUOTAS = 10
PODS = 300
POD_CPU = "100m"
PER_QUOTA_FIT = 20  # max 2 cpu / 100m
ENV = {"QUOTREE_RECLAIM_DELAY": "3", "QUOTREE_CERT_SECRET": "quotree-webhook-tls"}


def _micro(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def _lease(cluster: ModuleType) -> dict[str, Any]:
    spec: dict[str, Any] = cluster.kubectl_json("-n", NAMESPACE, "get", "lease", LEASE)["spec"]
    return spec


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "quotree.io", "version": "v1alpha1", "kind": obj["kind"]},
            "resource": {"group": "quotree.io", "version": "v1alpha1", "resource": "elasticquotas"},
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": obj,
            "oldObject": None,
            "dryRun": True,
        },
    }


def _post(port: int, ca_file: Path, review: dict[str, Any]) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(ca_file))
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/elasticquotas-validate",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())["response"]
        return answer


@pytest.fixture
def replicas(cluster: ModuleType, tmp_path: Path) -> Any:
    if not image_exists():
        pytest.fail("the image is missing: run `make image` (make test/e2e build it first)")
    cluster.kubectl(
        "-n", NAMESPACE, "delete", "secret", "quotree-webhook-tls", "--ignore-not-found"
    )
    kubeconfig = sa_kubeconfig(tmp_path)
    started: list[ContainerOperator] = []
    try:
        a = start_container(
            kubeconfig,
            {**ENV, "QUOTREE_WEBHOOK_PORT": str(PORT_A), "QUOTREE_IDENTITY": "replica-a"},
            log_name="replica-a",
            cert_dir=tmp_path / "pki-a",
        )
        started.append(a)
        a.wait_for_log(WEBHOOKS_READY, 60)
        b = start_container(
            kubeconfig,
            {**ENV, "QUOTREE_WEBHOOK_PORT": str(PORT_B), "QUOTREE_IDENTITY": "replica-b"},
            log_name="replica-b",
            ready=WEBHOOKS_READY,
            cert_dir=tmp_path / "pki-b",
        )
        started.append(b)
        yield a, b
    finally:
        for replica in started:
            replica.stop()


def test_two_replicas_share_certificate_and_view_and_the_standby_takes_over(
    cluster: ModuleType, replicas: tuple[ContainerOperator, ContainerOperator]
) -> None:
    a, b = replicas
    assert a.cert_dir is not None
    assert b.cert_dir is not None
    assert "acquired the leader lease" not in b.log_text()
    assert _lease(cluster)["holderIdentity"] == "replica-a"
    # One certificate for both, and it is the one the API server trusts.
    for name in ("ca.crt", "tls.crt"):
        assert (a.cert_dir / name).read_bytes() == (b.cert_dir / name).read_bytes(), name
    webhook = cluster.kubectl_json("get", "validatingwebhookconfiguration", "local.quotree.io")
    client = webhook["webhooks"][0]["clientConfig"]
    assert f":{PORT_B}/" in client["url"], client["url"]
    assert base64.b64decode(client["caBundle"]) == (a.cert_dir / "ca.crt").read_bytes()

    s = k.suffix()
    ns, top = f"failover-{s}", f"failover-{s}"
    quotas = [
        k.quota(f"q{i:02d}-{s}", ns, parent=top, min={"cpu": "1"}, max={"cpu": "2"})
        for i in range(QUOTAS)
    ]
    setup = [k.namespace(ns), k.cohort(top, min={"cpu": "10"}, max={"cpu": "30"}), *quotas]
    pods = [
        k.pod(
            f"p{i:04d}",
            ns,
            {"cpu": POD_CPU},
            labels={"quotree.io/quota-name": f"q{i % QUOTAS:02d}-{s}"},
        )
        for i in range(PODS)
    ]
    samples: list[list[tuple[str, str, bool]]] = []
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.is_set():
            try:
                items = k.pods(ns)
            except Exception:  # a failed sample is just skipped
                continue
            samples.append(
                [
                    (
                        p["metadata"]["name"],
                        p["metadata"]["labels"]["quotree.io/quota-name"],
                        k.gated(p),
                    )
                    for p in items
                    if k.live(p)
                ]
            )
            time.sleep(0.3)

    try:
        k.apply(*setup)
        cluster.wait_until(
            lambda: all(k.status("eq", q["metadata"]["name"], ns) for q in quotas),
            30,
            "the quotas' first status",
        )
        # A rule broken through the standby (B answers the API server) is refused, and A,
        # asked the same, refuses it with the same words: both judge with the same tree.
        greedy = k.quota(f"greedy-{s}", ns, parent=top, min={"cpu": "5"}, max={"cpu": "5"})
        result = cluster.kubectl("apply", "-f", "-", input=json.dumps(greedy), check=False)
        assert result.returncode != 0, result.stdout
        assert f"ElasticQuota greedy-{s}" in result.stderr, result.stderr
        assert f"Cohort {top}" in result.stderr, result.stderr
        answers = [_post(port, a.cert_dir / "ca.crt", _review(greedy)) for port in (PORT_A, PORT_B)]
        assert [x["allowed"] for x in answers] == [False, False]
        assert answers[0]["status"]["message"] == answers[1]["status"]["message"]
        assert answers[0]["status"]["message"] in result.stderr

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        chunks = [pods[i : i + 25] for i in range(0, PODS, 25)]
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [pool.submit(k.create, *chunk) for chunk in chunks]
            cluster.wait_until(
                lambda: sum(f.done() for f in futures) >= len(chunks) // 3,
                120,
                "a third of the burst",
            )
            a.kill()
            killed_at = time.time()
            last_renewal = _micro(_lease(cluster)["renewTime"])
            for future in futures:
                future.result()
        b.wait_for_log("acquired the leader lease", LEASE_DURATION + STANDBY_RETRY + 10)
        lease = _lease(cluster)
        assert lease["holderIdentity"] == "replica-b"
        taken_at = _micro(lease["acquireTime"])
        assert taken_at - last_renewal <= LEASE_DURATION + STANDBY_RETRY + 1, (
            f"B took the lease {taken_at - last_renewal:.1f}s after A's last renewal"
        )
        assert taken_at - killed_at <= LEASE_DURATION + STANDBY_RETRY + 1

        def settled() -> bool:
            counts = [k.status("eq", q["metadata"]["name"], ns) for q in quotas]
            return all(
                c.get("admittedPods") == PER_QUOTA_FIT
                and c.get("pendingPods") == PODS // QUOTAS - PER_QUOTA_FIT
                for c in counts
            )

        cluster.wait_until(settled, 180, "every quota admitted exactly what fits")
        stop_sampling.set()
        sampler.join(timeout=10)
        allocatable = cluster.kubectl_json("get", "nodes")["items"]
        total_cpu = sum(int(n["status"]["allocatable"]["cpu"]) for n in allocatable)
        assert len(samples) >= 5, f"only {len(samples)} samples"
        for index, snapshot in enumerate(samples):
            over = over_runtime(setup[1:], snapshot, ns, total_cpu)
            assert not over, f"sample {index} of {len(samples)}: {over}"
        admitted_events = Counter(e["involvedObject"]["name"] for e in k.events(ns, "Admitted"))
        assert max(admitted_events.values()) == 1
        expected = simulate([*setup[1:], *pods], str(total_cpu), "failover")
        for name in [q["metadata"]["name"] for q in quotas] + [top]:
            st = k.status("eq" if name != top else "coh", name, None if name == top else ns)
            sim = expected["nodes"][name]
            for field in ("runtime", "used", "request", "admittedPods", "pendingPods"):
                assert st.get(field, 0) == sim[field], (name, field, st.get(field), sim[field])
        assert len(k.admitted_pods(ns)) == QUOTAS * PER_QUOTA_FIT
        assert b.alive, b.log_tail()
    finally:
        stop_sampling.set()
        for kind, name in (("namespace", ns), ("cohort", top)):
            cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)
