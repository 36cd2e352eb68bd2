"""Benchmark of the admission webhooks (a script, not a test). Prints a Markdown block.

1. Validation latency in-process: `decisions.review_node` for an ElasticQuota
   update in a tree of 10,000 nodes (100 Cohorts x 99 ElasticQuotas), the work
   the validating webhook does per request (target p99 < 50 ms).
2. Pod CREATE latency through the local API server (hack/cluster.sh must be
   up): the quotree operator's mutating webhook vs a no-op mutating webhook
   served by the same stack (Kopf's WebhookServer, same TLS, a second process),
   in one run, rounds alternating, each at 50 creates/s (target p99 <= 1.3x).

Usage: .venv/bin/python bench/bench_webhooks.py [--pods 300] [--skip-api]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator"), str(REPO / "webhooks")]

from kubernetes_asyncio import client, config  # noqa: E402

from quotree import Engine, parse_node  # noqa: E402
from quotree_webhooks import decisions  # noqa: E402
from tests.e2e import cluster  # noqa: E402
from tests.e2e.operator_proc import start_operator  # noqa: E402

NOOP_MODULE = """
import kopf
from pathlib import Path
from quotree_webhooks import tls

@kopf.on.startup()
async def start(settings, **_):
    import logging
    # As the operator does: no per-request log lines or events.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.posting.level = logging.WARNING
    settings.peering.standalone = True
    settings.scanning.disabled = True
    pki = tls.ensure_pki(Path("{cert_dir}"), ["127.0.0.1"])
    settings.admission.server = kopf.WebhookServer(
        addr="127.0.0.1", port={port}, certfile=str(pki.cert), pkeyfile=str(pki.key),
        cafile=str(pki.ca_cert))

@kopf.on.mutate("v1", "pods", id="noop", operations=["CREATE"])
async def noop(**_):
    pass
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_validation(rounds: int = 1000) -> tuple[float, float]:
    engine = Engine()
    for c in range(100):
        engine.set_config(
            parse_node(
                {"kind": "Cohort", "metadata": {"name": f"c{c}"}, "spec": {"min": {"cpu": "1000"}}}
            )
        )
        for q in range(99):
            engine.set_config(
                parse_node(
                    {
                        "kind": "ElasticQuota",
                        "metadata": {"name": f"q{c}-{q}", "namespace": f"n{c}-{q}"},
                        "spec": {"parent": f"c{c}", "min": {"cpu": "10"}},
                    }
                )
            )
    assert len(engine.tree.configs()) == 10_000
    old = {
        "kind": "ElasticQuota",
        "metadata": {"name": "q7-7", "namespace": "n7-7"},
        "spec": {"parent": "c7", "min": {"cpu": "10"}},
    }
    times = []
    for i in range(rounds):
        new = {**old, "spec": {"parent": "c7", "min": {"cpu": f"{5 + i % 6}"}}}
        start = time.perf_counter()
        verdict = decisions.review_node(engine, "UPDATE", new, old)
        times.append((time.perf_counter() - start) * 1000)
        assert verdict.allowed
    return pct(times, 0.5), pct(times, 0.99)


def kubectl(*args: str, input: str | None = None) -> str:  # noqa: A002

    return cluster.kubectl(*args, input=input).stdout


async def create_pods(namespace: str, count: int, rate: float, tag: str) -> list[float]:

    api = await config.new_client_from_config(config_file=str(cluster.KUBECONFIG))
    core = client.CoreV1Api(api)
    latencies: list[float] = []

    async def one(i: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{tag}-{i}", "namespace": namespace},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "example.com/none",
                        "resources": {"requests": {"cpu": "10m"}},
                    }
                ]
            },
        }
        start = time.perf_counter()
        await core.create_namespaced_pod(namespace, body)
        latencies.append((time.perf_counter() - start) * 1000)

    tasks = []
    begin = time.perf_counter()
    for i in range(count):
        await asyncio.sleep(max(0.0, begin + i / rate - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    await api.close()
    return latencies


def bench_api(pods: int) -> dict[str, list[float]]:

    cluster.ensure_cluster()
    os.environ["KUBECONFIG"] = str(cluster.KUBECONFIG)
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    run = Path("/tmp/quotree-bench-webhooks")
    run.mkdir(exist_ok=True)
    for ns in ("bench-quota", "bench-noop"):
        kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true")
        kubectl("create", "namespace", ns)
    operator = start_operator(
        {
            "QUOTREE_WEBHOOK_PORT": "19446",
            "QUOTREE_CERT_DIR": str(run / "pki"),
            "QUOTREE_SYSTEM_NAMESPACES": "bench-noop",
            "QUOTREE_IDENTITY": "bench",
        },
        log_name="operator-bench",
    )
    noop_path = run / "noop_webhook.py"
    noop_path.write_text(NOOP_MODULE.format(cert_dir=run / "noop-pki", port=19447))
    noop = subprocess.Popen(
        [str(REPO / ".venv/bin/kopf"), "run", "--standalone", str(noop_path)],
        stdout=(run / "noop.log").open("wb"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
        cwd=REPO,
    )
    try:
        operator.wait_for_log("configurations quotree.io written", 60)
        kubectl(
            "apply",
            "-f",
            "-",
            input=(
                "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
                "metadata: {name: bench, namespace: bench-quota}\nspec: {max: {cpu: '0'}}\n"
            ),
        )
        time.sleep(3)  # the noop server starts and writes its certificate

        ca = base64.b64encode((run / "noop-pki" / "ca.crt").read_bytes()).decode()
        kubectl(
            "apply",
            "-f",
            "-",
            input=f"""
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: quotree-bench-noop}}
webhooks:
- name: noop.bench.quotree.io
  clientConfig: {{url: "https://127.0.0.1:19447/noop", caBundle: "{ca}"}}
  rules: [{{apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"]}}]
  namespaceSelector:
    matchExpressions:
    - {{key: kubernetes.io/metadata.name, operator: In, values: [bench-noop]}}
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 5
  admissionReviewVersions: ["v1"]
""",
        )
        time.sleep(3)  # the API server picks up the configuration
        results: dict[str, list[float]] = {"quotree": [], "noop": []}
        rounds = 3
        per_round = max(1, pods // rounds)
        for r in range(rounds):
            for side, ns in (("quotree", "bench-quota"), ("noop", "bench-noop")):
                results[side] += asyncio.run(create_pods(ns, per_round, 50.0, f"r{r}"))
        gated = kubectl(
            "-n",
            "bench-quota",
            "get",
            "pods",
            "-o",
            "jsonpath={.items[*].spec.schedulingGates[*].name}",
        ).split()
        assert gated.count("quotree.io/admission") == per_round * rounds, "quotree pods gated"
        return results
    finally:
        noop.terminate()
        noop.wait(timeout=20)
        operator.stop()
        kubectl(
            "delete", "mutatingwebhookconfiguration", "quotree-bench-noop", "--ignore-not-found"
        )
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            kubectl("delete", kind, "quotree.io", "--ignore-not-found")
        for ns in ("bench-quota", "bench-noop"):
            kubectl("delete", "namespace", ns, "--wait=false")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=300, help="pod creates per side")
    parser.add_argument("--skip-api", action="store_true", help="only the in-process part")
    args = parser.parse_args()
    v50, v99 = bench_validation()
    print(
        f"- ElasticQuota UPDATE validation, 10,000-node tree, in-process (decisions.review_node, "
        f"1000 runs): p50 {v50:.2f} ms, p99 {v99:.2f} ms (target p99 < 50 ms)"
    )
    if args.skip_api:
        return
    results = bench_api(args.pods)
    q50, q99 = pct(results["quotree"], 0.5), pct(results["quotree"], 0.99)
    n50, n99 = pct(results["noop"], 0.5), pct(results["noop"], 0.99)
    print(
        f"- Pod CREATE through the API server, 50 creates/s, {len(results['quotree'])} pods per "
        f"side, 3 alternating rounds:"
    )
    print(
        f"  - quotree mutating webhook: p50 {q50:.1f} ms, p99 {q99:.1f} ms, "
        f"mean {statistics.mean(results['quotree']):.1f} ms"
    )
    print(
        f"  - no-op webhook (same stack): p50 {n50:.1f} ms, p99 {n99:.1f} ms, "
        f"mean {statistics.mean(results['noop']):.1f} ms"
    )
    print(
        f"  - p99 ratio quotree / no-op: {q99 / n99:.2f} (target <= 1.3); p50 ratio {q50 / n50:.2f}"
    )


if __name__ == "__main__":
    main()
