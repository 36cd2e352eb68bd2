"""Benchmark of the admission webhooks (a script, not a test). Prints a Markdown block.

1. Validation latency in-process: `decisions.review_member` for an ElasticQuota
   update in a tree of 10,000 nodes (100 Cohorts x 99 ElasticQuotas), the work
   the validating webhook does per request (target p99 < 50 ms).
2. Pod CREATE latency through the local API server (hack/cluster.sh must be
   up): the quotree operator's mutating webhook vs a no-op mutating webhook
   served by the same stack (Kopf's WebhookServer, same TLS, a second process),
   in one run, rounds alternating, each at 50 creates/s (target p99 <= 1.3x).
3. Burst creation (`--burst N`): N pods per side created with 32
   requests in flight, rounds alternating between three namespaces of the same run: no
   webhook called, a no-op mutating webhook on a minimal aiohttp server (its own
   process, TLS), and quotree's webhooks: with the operator admitting the pods as they
   come ("quotree"), and with a quota that holds them ("quotree-held": the webhook's cost
   without the operator's admission writes).
   Reports pods/s and each create call's p50/p99, and the ratios to the no-webhook
   side (target: quotree >= 80% of it, and >= the no-op's rate).

Usage: .venv/bin/python bench/bench_webhooks.py [--pods 300] [--skip-api] [--burst 300]
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

from quotree import Engine, parse_member  # noqa: E402
from quotree_webhooks import decisions, tls  # noqa: E402
from tests.e2e import cluster  # noqa: E402
from tests.e2e.operator_proc import delete_webhook_configurations, start_operator  # noqa: E402

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


MINIMAL_NOOP = """
import json, ssl, sys
from aiohttp import web

async def review(request):
    body = json.loads(await request.read())
    answer = {{"apiVersion": body.get("apiVersion", "admission.k8s.io/v1"),
               "kind": "AdmissionReview",
               "response": {{"uid": body["request"]["uid"], "allowed": True}}}}
    return web.Response(body=json.dumps(answer), content_type="application/json")

context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain("{cert}", "{key}")
app = web.Application()
app.router.add_post("/noop", review)
web.run_app(app, host="127.0.0.1", port={port}, ssl_context=context, print=None,
            access_log=None)
"""

IN_FLIGHT = 32


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_validation(rounds: int = 1000) -> tuple[float, float]:
    engine = Engine()
    for c in range(100):
        engine.set_config(
            parse_member(
                {"kind": "Cohort", "metadata": {"name": f"c{c}"}, "spec": {"min": {"cpu": "1000"}}}
            )
        )
        for q in range(99):
            engine.set_config(
                parse_member(
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
        verdict = decisions.review_member(engine, "UPDATE", new, old)
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


async def create_burst(namespace: str, count: int, tag: str) -> tuple[float, list[float]]:
    """`count` pods created with IN_FLIGHT requests in flight: (pods/s, per-call ms)."""
    api = await config.new_client_from_config(config_file=str(cluster.KUBECONFIG))
    api.configuration.connection_pool_maxsize = IN_FLIGHT
    core = client.CoreV1Api(api)
    latencies: list[float] = []
    names = iter(range(count))

    async def worker() -> None:
        for i in names:
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{tag}-{i}", "namespace": namespace},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "example.com/none",
                            "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}},
                        }
                    ]
                },
            }
            start = time.perf_counter()
            await core.create_namespaced_pod(namespace, body)
            latencies.append((time.perf_counter() - start) * 1000)

    begin = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    elapsed = time.perf_counter() - begin
    await api.close()
    return count / elapsed, latencies


BURST_SIDES = (
    ("none", "bench-none"),
    ("noop", "bench-noop"),
    ("quotree", "bench-quota"),
    ("quotree-held", "bench-held"),
)


def bench_burst(pods: int, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """Side by side, rounds alternating: {side: (pods/s per round, call latencies)}."""
    cluster.ensure_cluster(fresh=False)
    os.environ["KUBECONFIG"] = str(cluster.KUBECONFIG)
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    run = Path("/tmp/quotree-bench-webhooks-burst")
    run.mkdir(exist_ok=True)
    for _, ns in BURST_SIDES:
        kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true")
        kubectl("create", "namespace", ns)
    operator = start_operator(
        {
            "QUOTREE_WEBHOOK_PORT": "29446",
            "QUOTREE_CERT_DIR": str(run / "pki"),
            "QUOTREE_IDENTITY": "bench",
            # Without this the API server calls quotree's pods-mutate-unlabelled webhook for
            # every pod of the `none` and `noop` sides too (their namespaces are unlabelled):
            # `none` would not be "no webhook", nor `noop` one webhook.
            "QUOTREE_SYSTEM_NAMESPACES": "bench-none,bench-noop",
        },
        log_name="operator-bench-burst",
    )
    pki = tls.ensure_pki(run / "noop-pki", ["127.0.0.1"])
    noop_path = run / "minimal_noop.py"
    noop_path.write_text(MINIMAL_NOOP.format(cert=pki.cert, key=pki.key, port=29448))
    noop = subprocess.Popen(
        [sys.executable, str(noop_path)],
        stdout=(run / "noop.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        operator.wait_for_log("configurations quotree.io written", 60)
        kubectl(
            "apply",
            "-f",
            "-",
            input=(
                "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
                "metadata: {name: bench, namespace: bench-quota}\n"
                "spec: {min: {cpu: '100', memory: 100Gi}}\n---\n"
                "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
                "metadata: {name: held, namespace: bench-held}\nspec: {max: {cpu: '0'}}\n"
            ),
        )
        ca = base64.b64encode(pki.ca_cert.read_bytes()).decode()
        kubectl(
            "apply",
            "-f",
            "-",
            input=f"""
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: quotree-bench-minimal-noop}}
webhooks:
- name: noop.bench.quotree.io
  clientConfig: {{url: "https://127.0.0.1:29448/noop", caBundle: "{ca}"}}
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
        for ns in ("bench-quota", "bench-held"):
            cluster.wait_until(
                lambda ns=ns: (
                    "true" in kubectl("get", "namespace", ns, "-o", "jsonpath={.metadata.labels}")
                ),
                60,
                f"{ns} managed",
            )
        time.sleep(3)  # the API server picks up the configurations
        asyncio.run(create_burst("bench-none", IN_FLIGHT, "warm"))  # connections, caches
        results: dict[str, tuple[list[float], list[float]]] = {
            side: ([], []) for side, _ in BURST_SIDES
        }
        for r in range(rounds):
            order = BURST_SIDES if r % 2 == 0 else tuple(reversed(BURST_SIDES))
            for side, ns in order:
                rate, latencies = asyncio.run(create_burst(ns, pods, f"b{r}"))
                results[side][0].append(rate)
                results[side][1].extend(latencies)
                time.sleep(2)  # the operator's admissions of this round settle
        gated_or_admitted = kubectl(
            "-n", "bench-quota", "get", "pods", "-o", "jsonpath={.items[*].metadata.name}"
        ).split()
        assert len(gated_or_admitted) == pods * rounds
        held = kubectl(
            "-n", "bench-held", "get", "pods", "-o", "jsonpath={.items[*].spec.schedulingGates}"
        )
        assert held.count("quotree.io/admission") == pods * rounds, "held pods gated"
        return results
    finally:
        noop.terminate()
        noop.wait(timeout=20)
        operator.stop()
        kubectl(
            "delete",
            "mutatingwebhookconfiguration",
            "quotree-bench-minimal-noop",
            "--ignore-not-found",
        )
        delete_webhook_configurations()
        for _, ns in BURST_SIDES:
            kubectl("delete", "namespace", ns, "--wait=false")


def print_burst(results: dict[str, tuple[list[float], list[float]]], pods: int) -> None:
    rounds = len(results["none"][0])
    load = os.getloadavg()
    print(
        f"- Burst pod CREATE, {IN_FLIGHT} requests in flight, {pods} pods per side and round, "
        f"{rounds} alternating rounds; load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f}:\n"
    )
    print("| side | pods/s per round | median pods/s | vs no webhook | call p50 ms | call p99 ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    base = statistics.median(results["none"][0])
    for side, _ in BURST_SIDES:
        rates, latencies = results[side]
        rate = statistics.median(rates)
        print(
            f"| {side} | {', '.join(f'{x:.0f}' for x in rates)} | {rate:.0f} | "
            f"{rate / base:.2f} | {pct(latencies, 0.5):.1f} | {pct(latencies, 0.99):.1f} |"
        )
    quotree, noop = statistics.median(results["quotree"][0]), statistics.median(results["noop"][0])
    print(
        f"\nquotree / no webhook: {quotree / base:.2f} (target >= 0.80); "
        f"quotree / minimal no-op: {quotree / noop:.2f} (target >= 1.00)"
    )


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
            "QUOTREE_WEBHOOK_PORT": "29446",
            "QUOTREE_CERT_DIR": str(run / "pki"),
            "QUOTREE_SYSTEM_NAMESPACES": "bench-noop",
            "QUOTREE_IDENTITY": "bench",
        },
        log_name="operator-bench",
    )
    noop_path = run / "noop_webhook.py"
    noop_path.write_text(NOOP_MODULE.format(cert_dir=run / "noop-pki", port=29447))
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
  clientConfig: {{url: "https://127.0.0.1:29447/noop", caBundle: "{ca}"}}
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
        delete_webhook_configurations()
        for ns in ("bench-quota", "bench-noop"):
            kubectl("delete", "namespace", ns, "--wait=false")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=300, help="pod creates per side")
    parser.add_argument("--skip-api", action="store_true", help="only the in-process part")
    parser.add_argument(
        "--burst", type=int, default=0, help="pods per side and round of the burst (0: none)"
    )
    parser.add_argument("--burst-rounds", type=int, default=3)
    parser.add_argument("--burst-only", action="store_true", help="only the burst")
    args = parser.parse_args()
    if args.burst_only:
        print_burst(bench_burst(args.burst, args.burst_rounds), args.burst)
        return
    v50, v99 = bench_validation()
    print(
        f"- ElasticQuota UPDATE validation, 10,000-node tree, in-process (decisions.review_member, "
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
    if args.burst:
        print_burst(bench_burst(args.burst, args.burst_rounds), args.burst)


if __name__ == "__main__":
    main()
