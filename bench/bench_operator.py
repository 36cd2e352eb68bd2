"""Operator benchmark (a script, not a test): admissions per second against a ceiling.

On the local control plane (KUBECONFIG of hack/cluster.sh): 100 ElasticQuotas under 10
Cohorts, N gated pods (default 5,000) created as fast as the API server accepts them.

1. ceilings, with no operator and no decisions, a plain asyncio client removing gates:
   a. pre-created: N gated pods exist; the client removes their gates as fast as it can;
   b. burst: N gated pods are created as fast as possible while the client watches them
      and removes each gate as soon as it sees the pod (the same shape as 2);
2. burst: the operator admits N pods created as fast as possible -> admissions/s;
3. paced: pods arrive at half the (pre-created) ceiling rate -> p50/p99 from creation to
   gate removal (measured by a watch on the pods);
4. the operator's RSS after the burst, per 1,000 pods.

Each phase has its own namespace, deleted (and waited for) before the next phase starts.

    .venv/bin/python bench/bench_operator.py [--pods 5000] [--write]

`--write` replaces the "Operator" section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import re
import ssl
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e import cluster  # noqa: E402
from tests.e2e.operator_proc import start_operator  # noqa: E402

GATE = "quotree.io/admission"
NS_PREFIX = "bench-op"
QUOTAS, COHORTS = 100, 10


class Api:
    """Just enough raw HTTP for the benchmark (client certificate from the kubeconfig)."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def call(self, method: str, path: str, body: Any = None, ctype: str = "") -> Any:
        headers = {"Content-Type": ctype or "application/json"}
        async with self.session.request(
            method, self.base + path, data=json.dumps(body) if body is not None else None,
            headers=headers,
        ) as resp:  # fmt: skip
            text = await resp.text()
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: {resp.status} {text[:200]}")
            return json.loads(text) if text else None


def _session() -> aiohttp.ClientSession:
    kubeconfig = yaml.safe_load(cluster.KUBECONFIG.read_text())
    user = kubeconfig["users"][0]["user"]
    ctx = ssl.create_default_context(cafile=str(cluster.CA_CERT))
    cert_dir = cluster.RUN_DIR / "bench-client"
    cert_dir.mkdir(exist_ok=True)
    if "client-certificate-data" in user:
        (cert_dir / "c.crt").write_bytes(base64.b64decode(user["client-certificate-data"]))
        (cert_dir / "c.key").write_bytes(base64.b64decode(user["client-key-data"]))
        ctx.load_cert_chain(str(cert_dir / "c.crt"), str(cert_dir / "c.key"))
    else:
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=64))


def _pod(ns: str, name: str, quota: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"quotree.io/quota-name": quota}},
        "spec": {
            "schedulingGates": [{"name": GATE}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1m"}}}],
        },
    }


async def _create(api: Api, ns: str, n: int, rate: float | None) -> dict[str, float]:
    created: dict[str, float] = {}
    sem = asyncio.Semaphore(32)
    start = time.monotonic()

    async def one(i: int) -> None:
        if rate:
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        name = f"p{i:05d}"
        async with sem:
            t = time.monotonic()
            await api.call(
                "POST", f"/api/v1/namespaces/{ns}/pods", _pod(ns, name, f"q{i % QUOTAS:03d}")
            )
            created[name] = t

    await asyncio.gather(*(one(i) for i in range(n)))
    return created


async def _watch_ungated(api: Api, ns: str, n: int, seen: dict[str, float]) -> None:
    """Record when each pod is first seen without the gate (watch, not polling)."""
    path = f"/api/v1/namespaces/{ns}/pods?watch=1&allowWatchBookmarks=false"
    async with api.session.get(api.base + path, timeout=aiohttp.ClientTimeout(total=None)) as r:
        async for line in r.content:
            obj = json.loads(line)["object"]
            gates = obj["spec"].get("schedulingGates") or []
            name = obj["metadata"]["name"]
            if name not in seen and not any(g["name"] == GATE for g in gates):
                seen[name] = time.monotonic()
                if len(seen) >= n:
                    return


_UNGATE = [
    {"op": "test", "path": "/spec/schedulingGates/0/name", "value": GATE},
    {"op": "remove", "path": "/spec/schedulingGates/0"},
]
CONCURRENCY = 48  # the operator's default QUOTREE_CONCURRENCY


async def _ungate(api: Api, ns: str, name: str) -> None:
    await api.call(
        "PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", _UNGATE, "application/json-patch+json"
    )


async def _ceiling(api: Api, ns: str, n: int) -> float:
    """Pre-created pods: remove n gates as fast as possible."""
    await _create(api, ns, n, None)
    sem = asyncio.Semaphore(CONCURRENCY)
    start = time.monotonic()

    async def one(i: int) -> None:
        async with sem:
            await _ungate(api, ns, f"p{i:05d}")

    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (time.monotonic() - start)


async def _ceiling_burst(api: Api, ns: str, n: int) -> float:
    """Pods created as fast as possible; a watch removes each gate as soon as it sees it."""
    sem = asyncio.Semaphore(CONCURRENCY)
    done: set[str] = set()
    tasks: set[asyncio.Task[None]] = set()
    last = [0.0]

    async def one(name: str) -> None:
        async with sem:
            await _ungate(api, ns, name)
        last[0] = time.monotonic()

    async def watch() -> None:
        path = f"/api/v1/namespaces/{ns}/pods?watch=1&allowWatchBookmarks=false"
        timeout = aiohttp.ClientTimeout(total=None)
        async with api.session.get(api.base + path, timeout=timeout) as r:
            async for line in r.content:
                obj = json.loads(line)["object"]
                name = obj["metadata"]["name"]
                gates = obj["spec"].get("schedulingGates") or []
                if name not in done and any(g["name"] == GATE for g in gates):
                    done.add(name)
                    task = asyncio.create_task(one(name))
                    tasks.add(task)
                    if len(done) >= n:
                        return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.5)  # the watch is open before the first pod
    start = time.monotonic()
    await _create(api, ns, n, None)
    await asyncio.wait_for(watcher, timeout=600)
    await asyncio.gather(*tasks)
    return n / (last[0] - start)


def _delete_namespace(ns: str) -> None:
    """Delete and wait, so that the next phase does not share the API server with it."""
    cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--timeout=600s", timeout=660)


def _tree(ns: str) -> str:
    docs = [f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}"]
    for c in range(COHORTS):
        docs.append(
            f"apiVersion: quotree.io/v1alpha1\nkind: Cohort\nmetadata: {{name: bench-c{c}}}\n"
            f"spec: {{min: {{cpu: '10'}}}}"
        )
    for q in range(QUOTAS):
        docs.append(
            f"apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
            f"metadata: {{name: q{q:03d}, namespace: {ns}}}\n"
            f"spec: {{parent: bench-c{q % COHORTS}, min: {{cpu: '1'}}}}"
        )
    return "\n---\n".join(docs)


def _cpu_s(pid: int) -> float:
    """The process's CPU time so far (user and system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="note each pod's timestamps inside the operator (bench/trace_site) and print "
        "where the paced phase's creation -> gate removal time goes",
    )
    args = parser.parse_args()
    n = args.pods
    cluster.ensure_cluster()
    cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    api_base = cluster.APISERVER_URL
    results: dict[str, float] = {}
    async with _session() as session:
        api = Api(session, api_base)
        for phase, measure in (("ceiling", _ceiling), ("ceiling_burst", _ceiling_burst)):
            ceil_ns = f"{NS_PREFIX}-{phase.replace('_', '-')}"
            _delete_namespace(ceil_ns)
            cluster.kubectl("create", "namespace", ceil_ns)
            results[phase] = await measure(api, ceil_ns, n)
            print(f"{phase}: {results[phase]:.0f} pods/s", flush=True)
            _delete_namespace(ceil_ns)

        env = {"QUOTREE_WEBHOOKS": "0"}
        trace_file = Path("/tmp/quotree-bench-operator-trace.json")
        if args.trace:
            trace_file.unlink(missing_ok=True)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(ROOT / "bench" / "trace_site"), os.environ.get("PYTHONPATH")) if p
            )
            env["QUOTREE_BENCH_TRACE"] = str(trace_file)
        timings: dict[str, tuple[dict[str, float], dict[str, float]]] = {}
        op = start_operator(env, log_name="operator-bench")
        try:
            time.sleep(2)
            results["rss_idle_mb"] = _rss_mb(op.proc.pid)
            for phase, rate in (("burst", None), ("paced", results["ceiling"] / 2)):
                ns = f"{NS_PREFIX}-{phase}"
                _delete_namespace(ns)
                cluster.kubectl("apply", "-f", "-", input=_tree(ns))
                time.sleep(2)  # the status of 100 fresh quotas settles first
                seen: dict[str, float] = {}
                print(f"{phase}: starting", flush=True)
                watcher = asyncio.create_task(_watch_ungated(api, ns, n, seen))
                start = time.monotonic()
                created = await _create(api, ns, n, rate)
                await asyncio.wait_for(watcher, timeout=600)
                elapsed = max(seen.values()) - start
                timings[phase] = (created, dict(seen))
                lat = sorted(seen[p] - created[p] for p in created)
                results[f"{phase}_rate"] = n / elapsed
                results[f"{phase}_p50"] = lat[len(lat) // 2]
                results[f"{phase}_p99"] = lat[int(len(lat) * 0.99) - 1]
                print(
                    f"{phase}: {results[f'{phase}_rate']:.0f} pods/s done, "
                    f"p50 {results[f'{phase}_p50']:.2f} s, p99 {results[f'{phase}_p99']:.2f} s",
                    flush=True,
                )
                if phase == "burst":
                    results["rss_mb"] = _rss_mb(op.proc.pid)
                _delete_namespace(ns)
        finally:
            op.stop()
            for c in range(COHORTS):
                cluster.kubectl("delete", "cohort", f"bench-c{c}", "--wait=false", check=False)
    report(results, n, args.write)
    if args.trace:
        print_trace(json.loads(trace_file.read_text()), f"{NS_PREFIX}-paced", *timings["paced"])


STAGES = (
    ("created", "watch", "creation -> the operator handles its watch event"),
    ("watch", "decide_start", "-> the decision that admits it starts"),
    ("decide_start", "decided", "-> that decision is taken (decide())"),
    ("decided", "task", "-> its admission task runs"),
    ("task", "patch_sent", "-> the gate-removal PATCH is sent (write budget)"),
    ("patch_sent", "patch_answered", "-> the PATCH is answered"),
    ("patch_answered", "seen", "-> the benchmark's watch sees the gate gone"),
    ("patch_answered", "event_answered", "(the Admitted event answered, after the PATCH)"),
)


def print_trace(
    notes: dict[str, dict[str, float]],
    ns: str,
    created: dict[str, float],
    seen: dict[str, float],
) -> None:
    """Where creation -> gate removal goes, stage by stage, for the paced phase's pods."""
    rows: list[dict[str, float]] = []
    for name, t in created.items():
        marks = dict(notes.get(f"{ns}/{name}", {}))
        marks["created"], marks["seen"] = t, seen.get(name, float("nan"))
        rows.append(marks)
    print("\n| stage | p50 ms | p99 ms | pods |")
    print("| --- | --- | --- | --- |")
    for start, end, label in STAGES:
        spans = sorted(
            (r[end] - r[start]) * 1e3 for r in rows if start in r and end in r and r[end] == r[end]
        )
        if spans:
            p50, p99 = spans[len(spans) // 2], spans[min(len(spans) - 1, int(len(spans) * 0.99))]
            print(f"| {label} | {p50:.1f} | {p99:.1f} | {len(spans)} |")
    total = sorted(rows, key=lambda r: r["seen"] - r["created"])
    one = total[len(total) // 2]  # the median pod, stage by stage
    marks = sorted((v, k) for k, v in one.items())
    print(
        "\none pod (the median's), ms after its creation call started: "
        + ", ".join(f"{k} {1e3 * (v - one['created']):.0f}" for v, k in marks)
    )


def report(r: dict[str, float], n: int, write: bool) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    per_1000 = 1000 * (r["rss_mb"] - r["rss_idle_mb"]) / n
    text = (
        f"## Operator\n\n`bench/bench_operator.py`, {date}, {machine}; local control plane "
        f"(hack/cluster.sh, kwok nodes); {QUOTAS} quotas under {COHORTS} Cohorts, {n} gated "
        f"pods per phase. Load average at the end (1/5/15 min): {load}.\n\n"
        f"| figure | value | target |\n| --- | --- | --- |\n"
        f"| ceiling: plain client removing the gates of {n} pre-created pods "
        f"| {r['ceiling']:.0f} pods/s | |\n"
        f"| ceiling, burst: pods created as fast as possible, a plain client removes each "
        f"gate as soon as its watch sees the pod | {r['ceiling_burst']:.0f} pods/s | |\n"
        f"| operator admissions, burst (creation start -> last gate removed) "
        f"| {r['burst_rate']:.0f} pods/s = {100 * r['burst_rate'] / r['ceiling']:.0f}% of the "
        f"ceiling, {100 * r['burst_rate'] / r['ceiling_burst']:.0f}% of the burst ceiling "
        f"| >= 70% |\n"
        f"| creation -> gate removal at half the ceiling rate ({r['ceiling'] / 2:.0f} pods/s "
        f"asked, {r['paced_rate']:.0f} pods/s achieved) "
        f"| p50 {r['paced_p50']:.2f} s, p99 {r['paced_p99']:.2f} s | p99 < 2 s |\n"
        f"| creation -> gate removal in the burst | p50 {r['burst_p50']:.2f} s, "
        f"p99 {r['burst_p99']:.2f} s | |\n"
        f"| operator RSS | {r['rss_idle_mb']:.0f} MiB idle, {r['rss_mb']:.0f} MiB after the "
        f"burst: {per_1000:.1f} MiB per 1,000 pods | |\n"
    )
    print(text)
    if write:
        path = ROOT / "bench" / "RESULTS.md"
        old = path.read_text() if path.exists() else "# Benchmark results\n"
        found = re.search(r"^## Operator\n", old, re.MULTILINE)
        start = found.start() if found else -1
        if start >= 0:
            end = old.find("\n## ", start + 1)
            old = old[:start] + old[end + 1 :] if end >= 0 else old[:start]
        path.write_text(old.rstrip() + "\n\n" + text)


if __name__ == "__main__":
    asyncio.run(main())
