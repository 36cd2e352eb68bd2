"""The shape of Kueue's scheduler benchmark, scaled to this machine (a script, not a test).

On the local control plane (KUBECONFIG of hack/cluster.sh), with the operator and its
webhooks running: 100 ElasticQuotas under 10 Cohorts, each in its own namespace; 1,000
bare pods of 100m cpu / 100Mi created with 32 requests in flight, round-robin over the
namespaces; everything fits. The pods are created plain: quotree's mutating webhook
admits them at once (or, with QUOTREE_ADMIT_AT_CREATE=0, adds the gate the operator then
removes), the scheduler binds the pod.

The operator admits at creation the pods that fit (QUOTREE_ADMIT_AT_CREATE, taken from
the environment: 0 gates every pod, as before); QUOTREE_BENCH_WEBHOOK_PORT moves its
webhook port (29446) off a neighbour's.

Baseline in the same run, rounds alternating: the same pods in 100 namespaces no quota
covers (no gate, no patch), so creation -> bound is the scheduler's alone. The API server
still calls quotree's webhook for namespaces no quota covers (`pods-mutate-unlabelled`,
configurations.py), which the webhook process answers alone: the baseline is the cluster
with quotree installed, for pods it does not manage.

Per round it also records the CPU each process used per pod (from /proc, first creation
to last pod bound) and the API server's requests by verb and resource (its /metrics).

Figures per side (medians over the rounds): admissions/s (first creation -> last gate
removed; for the baseline, pods created/s), creation -> gate removal p50/p99 (quotree),
creation -> bound (spec.nodeName set) p50/p99, each against the baseline.

The scheduler's client rate limit caps "bound" (upstream default 50 requests/s): start
the control plane with e.g. QUOTREE_SCHEDULER_QPS=500 QUOTREE_SCHEDULER_BURST=1000 and
enough fake nodes (QUOTREE_NODES=12: 1,320 pods of room); the figures say what was used.

    .venv/bin/python bench/bench_kueue_shape.py [--pods 1000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_operator import Api, _session  # noqa: E402

from tests.e2e import cluster  # noqa: E402
from tests.e2e.operator_proc import delete_webhook_configurations, start_operator  # noqa: E402

GATE = "quotree.io/admission"
QUOTAS, COHORTS, IN_FLIGHT = 100, 10, 32
LABEL = "bench.quotree.io/kueue-shape"


def _namespaces(side: str) -> list[str]:
    return [f"kq-{side}-{q:03d}" for q in range(QUOTAS)]


def _tree() -> str:
    docs = [f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}" for ns in _namespaces("q")]
    docs += [
        f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}" for ns in _namespaces("b")
    ]
    per_cohort = QUOTAS // COHORTS
    for c in range(COHORTS):
        docs.append(
            f"apiVersion: quotree.io/v1alpha1\nkind: Cohort\nmetadata: {{name: kq-c{c}}}\n"
            f"spec: {{min: {{cpu: '{2 * per_cohort}', memory: {2 * per_cohort}Gi}}}}"
        )
    for q, ns in enumerate(_namespaces("q")):
        docs.append(
            f"apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
            f"metadata: {{name: kq-{q:03d}, namespace: {ns}}}\n"
            f"spec: {{parent: kq-c{q % COHORTS}, min: {{cpu: '2', memory: 2Gi}}}}"
        )
    return "\n---\n".join(docs)


#: Which process is which, by a word of its command line (the first that matches).
_PROCESSES = (
    ("quotree_webhooks.worker", "webhook process"),
    ("quotree_main", "operator"),
    ("bench_kueue_shape", "benchmark client"),
    ("kube-apiserver", "kube-apiserver"),
    ("etcd", "etcd"),
    ("kube-scheduler", "kube-scheduler"),
    ("kube-controller-manager", "kube-controller-manager"),
    ("kwok", "kwok"),
)


def _cpu() -> dict[str, float]:
    """CPU seconds (user + system) used so far by each process of `_PROCESSES`, summed
    per name, and by everything else on the machine ("other", from /proc/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = next((n for word, n in _PROCESSES if word in cmdline), None)
        if name is not None:
            used[name] = used.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    total = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    busy = sum(int(v) for i, v in enumerate(total[:8]) if i not in (3, 4)) / tick
    used["other"] = busy - sum(used.values())
    return used


async def _requests(api: Api) -> dict[str, float]:
    """The API server's requests so far, by verb and resource (its /metrics)."""
    async with api.session.get(api.base + "/metrics") as response:
        text = await response.text()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].split(",")
        )
        sub = labels.get("subresource", '""').strip('"')
        key = f"{labels['verb'].strip(chr(34))} {labels['resource'].strip(chr(34))}"
        key += f"/{sub}" if sub else ""
        counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def _pod(ns: str, name: str, tag: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {LABEL: tag}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
                }
            ]
        },
    }


async def _watch(
    api: Api, tag: str, n: int, ungated: dict[str, float], bound: dict[str, float]
) -> None:
    """When each pod of round `tag` is first seen without our gate, and bound.

    A watch the server ends early is opened again (its first events then list every pod
    of the round as it is: those seen for the first time get a late timestamp)."""
    while len(bound) < n:
        await _watch_once(api, tag, n, ungated, bound)


async def _watch_once(
    api: Api, tag: str, n: int, ungated: dict[str, float], bound: dict[str, float]
) -> None:
    path = f"/api/v1/pods?watch=1&labelSelector={LABEL}%3D{tag}"
    async with api.session.get(
        api.base + path, timeout=aiohttp.ClientTimeout(total=None)
    ) as response:
        async for line in response.content:
            obj = json.loads(line)["object"]
            key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
            now = time.monotonic()
            spec = obj["spec"]
            if key not in ungated and not any(
                g["name"] == GATE for g in spec.get("schedulingGates") or ()
            ):
                ungated[key] = now
            if key not in bound and spec.get("nodeName"):
                bound[key] = now
                if len(bound) >= n:
                    return


async def _round(api: Api, side: str, tag: str, n: int) -> dict[str, float]:
    namespaces = _namespaces(side)
    created: dict[str, float] = {}
    ungated: dict[str, float] = {}
    bound: dict[str, float] = {}
    watcher = asyncio.create_task(_watch(api, tag, n, ungated, bound))
    await asyncio.sleep(0.5)  # the watch is open before the first pod
    names = iter(range(n))
    cpu_before = _cpu()
    requests_before = await _requests(api)

    async def worker() -> None:
        for i in names:
            ns = namespaces[i % len(namespaces)]
            name = f"{tag}-{i:05d}"
            started = time.monotonic()
            await api.call("POST", f"/api/v1/namespaces/{ns}/pods", _pod(ns, name, tag))
            created[f"{ns}/{name}"] = started

    begin = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    created_at = time.monotonic()
    await asyncio.wait_for(watcher, timeout=600)
    cpu_after = _cpu()
    requests = await _requests(api)
    for key, count in requests_before.items():
        requests[key] -= count
    to_gate = sorted(ungated[k] - created[k] for k in created)
    to_bound = sorted(bound[k] - created[k] for k in created)

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return {
        "created_per_s": n / (created_at - begin),
        "ungated_per_s": n / (max(ungated.values()) - begin),
        "bound_per_s": n / (max(bound.values()) - begin),
        "gate_p50": pct(to_gate, 0.5),
        "gate_p99": pct(to_gate, 0.99),
        "bound_p50": pct(to_bound, 0.5),
        "bound_p99": pct(to_bound, 0.99),
        **{
            f"cpu_ms_per_pod {name}": 1000 * (cpu_after[name] - cpu_before.get(name, 0.0)) / n
            for name in cpu_after
        },
        **{f"requests {key}": count for key, count in sorted(requests.items()) if count >= 1},
    }


async def _clean(api: Api, side: str, tag: str) -> None:
    """Delete the round's pods and wait until they are gone (the nodes' room comes back)."""
    for ns in _namespaces(side):
        await api.call("DELETE", f"/api/v1/namespaces/{ns}/pods?labelSelector={LABEL}%3D{tag}")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        left = await api.call("GET", f"/api/v1/pods?labelSelector={LABEL}%3D{tag}&limit=1")
        if not left["items"]:
            return
        await asyncio.sleep(1)
    raise RuntimeError(f"pods of round {tag} still there after 300 s")


def _flags(component: str) -> str:
    """The running component's client rate limits (its command line; upstream's if unset)."""
    defaults = {"kube-scheduler": ("50", "100"), "kube-controller-manager": ("20", "30")}
    pid = (cluster.RUN_DIR / "pids" / f"{component}.pid").read_text().strip()
    args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    found = dict(a[2:].split("=", 1) for a in args if a.startswith("--kube-api-") and "=" in a)
    qps = found.get("kube-api-qps", defaults[component][0])
    burst = found.get("kube-api-burst", defaults[component][1])
    return f"{component} qps {qps} / burst {burst}"


def _settings() -> str:
    nodes = cluster.kubectl_json("get", "nodes")["items"]
    pods = {n["status"]["allocatable"].get("pods") for n in nodes}
    return (
        f"{_flags('kube-scheduler')}; {_flags('kube-controller-manager')}; "
        f"{len(nodes)} fake nodes of {'/'.join(sorted(pods))} pods"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    # The operator started here reads QUOTREE_ADMIT_AT_CREATE from this environment.
    cluster.ensure_cluster(fresh=False)
    os.environ["KUBECONFIG"] = str(cluster.KUBECONFIG)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    # A previous run's namespaces may still be terminating: wait until they are gone.
    cluster.kubectl(
        "delete",
        "namespace",
        *_namespaces("q"),
        *_namespaces("b"),
        "--ignore-not-found",
        "--wait=true",
        "--timeout=300s",
        timeout=330,
    )
    port = os.environ.get("QUOTREE_BENCH_WEBHOOK_PORT", "29446")  # beside other runs: another
    op = start_operator(
        {"QUOTREE_WEBHOOK_PORT": port, "QUOTREE_CERT_DIR": "/tmp/quotree-bench-kueue-pki"},
        log_name="operator-bench-kueue",
    )
    results: dict[str, list[dict[str, float]]] = {"baseline": [], "quotree": []}
    try:
        op.wait_for_log("configurations quotree.io written", 60)
        cluster.kubectl("apply", "-f", "-", input=_tree())
        last = _namespaces("q")[-1]
        cluster.wait_until(
            lambda: (
                "true"
                in cluster.kubectl(
                    "get", "namespace", last, "-o", "jsonpath={.metadata.labels}"
                ).stdout
            ),
            120,
            "the quota namespaces managed",
        )
        time.sleep(3)
        async with _session() as session:
            api = Api(session, cluster.APISERVER_URL)
            for r in range(args.rounds):
                order = ("baseline", "quotree") if r % 2 == 0 else ("quotree", "baseline")
                for side in order:
                    tag = f"r{r}{side[0]}"
                    letter = "b" if side == "baseline" else "q"
                    figures = await _round(api, letter, tag, args.pods)
                    results[side].append(figures)
                    print(f"round {r} {side}: {json.dumps(figures)}", flush=True)
                    await _clean(api, letter, tag)
    finally:
        op.stop()
        delete_webhook_configurations()
        for c in range(COHORTS):
            cluster.kubectl("delete", "cohort", f"kq-c{c}", "--wait=false", check=False)
        for ns in _namespaces("q") + _namespaces("b"):
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    report(results, args.pods, args.rounds)


def report(results: dict[str, list[dict[str, float]]], n: int, rounds: int) -> None:
    def med(side: str, key: str) -> float:
        return statistics.median(r[key] for r in results[side])

    load = os.getloadavg()
    admit = os.environ.get("QUOTREE_ADMIT_AT_CREATE", "1")
    print(
        f"\n## Kueue's benchmark shape ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()})\n\n{QUOTAS} ElasticQuotas under {COHORTS} Cohorts, "
        f"{n} pods of 100m cpu / 100Mi, {IN_FLIGHT} creations in flight, {rounds} rounds "
        f"per side alternating; {_settings()}; load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f}; QUOTREE_ADMIT_AT_CREATE={admit}. Medians over the rounds.\n"
    )
    print("| figure | quotree | baseline (no admission system) | ratio |")
    print("| --- | --- | --- | --- |")
    rows = (
        ("pods created/s", "created_per_s", "created_per_s"),
        ("admissions/s (gate removed; baseline: created)", "ungated_per_s", "created_per_s"),
        ("pods bound/s", "bound_per_s", "bound_per_s"),
        ("creation -> bound p50 s", "bound_p50", "bound_p50"),
        ("creation -> bound p99 s", "bound_p99", "bound_p99"),
    )
    for label, mine, theirs in rows:
        q, b = med("quotree", mine), med("baseline", theirs)
        print(f"| {label} | {q:.2f} | {b:.2f} | {q / b:.2f} |")
    names = sorted(
        {
            k
            for r in results["quotree"] + results["baseline"]
            for k in r
            if k.startswith("cpu_ms_per_pod ")
        }
    )
    for key in names:
        q = statistics.median(r.get(key, 0.0) for r in results["quotree"])
        b = statistics.median(r.get(key, 0.0) for r in results["baseline"])
        ratio = f"{q / b:.2f}" if b > 0.05 else ""
        print(f"| CPU ms per pod, {key.split(' ', 1)[1]} | {q:.2f} | {b:.2f} | {ratio} |")
    print(
        f"| creation -> gate removal p50 / p99 s | {med('quotree', 'gate_p50'):.3f} / "
        f"{med('quotree', 'gate_p99'):.3f} | (no gate) | |"
    )


if __name__ == "__main__":
    asyncio.run(main())
