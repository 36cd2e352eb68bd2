"""Scale benchmark on the real API server (a script, not a test): the operator at scale.

10,000 ElasticQuotas under 1,000 Cohorts (10 top-level Cohorts, 990 under them, the
quotas spread over the 990) in 100 namespaces, and 30,000 pods of 1m cpu (3 per quota,
each well within its quota's min), on a fresh local control plane that this script starts
itself (hack/cluster.sh up --fresh, QUOTREE_NODES=10 nodes with room for 4,000 pods each).
Every pod fits: 29,000 are created already admitted (no gate, bound to a node), 1,000
gated (the start-up has to admit them). Objects are created with 64 requests in flight.

Phases, all in one run:

1. idle: the operator (webhooks on) against the cluster with the CRDs and no quota
   objects: its RSS (the baseline for memory);
2. webhook p99 at 100 quotas: the first 100 quotas (10 Cohorts) exist; 300 pod CREATEs
   paced at 50/s into a namespace whose quota holds them (no admission writes), each
   call's latency; the operator is stopped and its webhook configurations deleted;
3. quotas only: all 10,000 quotas and 1,000 Cohorts, an operator started against them:
   start-up and RSS (the per-quota memory), stopped again;
4. the 30,000 pods are created (no webhook configured: they go in as they are), and the
   benchmark waits until kwok has made the bound ones Running (a quiet cluster);
5. start-up: an operator started against the populated cluster. Phases on the
   benchmark's clock from the process start: `loaded` (its log says the list + load is
   done), `leading` (it took the Lease and acts), `admitted` (the benchmark's pod watch
   has seen all 1,000 gated pods ungated: the first decisions are carried out) and
   `status` (its log says the first status round is written). Ready to admit (issue
   21's start-up figure) = the first gated pod admitted; everything done = the later of
   `admitted` and `status`;
6. status work per flush: once the statuses are quiet, 20 pods in 10 quotas (through the
   webhook, then admitted); the operator's own counters (quotree_status_rounds_total,
   quotree_status_examined_total, quotree_status_writes_total) before and after: objects
   examined and PATCHes per round;
7. webhook p99 at 10,000 quotas: the same 300 paced CREATEs as in 2;
8. failover: a standby (its own identity and ports) starts beside the leader and loads;
   240 pods arrive through the webhook at 4/s, one per quota, and the leader gets SIGKILL
   a quarter of the way in: the longest gap between two admissions, and when the first
   admission after the kill came against the Lease's deadline (its last renewTime plus
   its duration); the standby's RSS (a warm engine that writes nothing);
9. baseline: the start-up of 5 with paged lists (QUOTREE_LIST_PAGE_SIZE=500, the way
   the operator listed before its lists came from the watch cache): list + load and RSS.
10. the start-up with the pod list read in the operator's own process
   (QUOTREE_LIST_READER=0) and in its helper process (the default), twice each,
   alternated: loaded, leading, and the operator's CPU until loaded.

The operators run from this tree's modules compiled first, as the image runs them (its
build compiles them; an environment with PYTHONDONTWRITEBYTECODE would otherwise compile
them at every start).

RSS: per pod = (RSS with pods, 20 s after serving - RSS quotas only) / pods, per quota
object = (RSS quotas only - idle RSS) / objects.

Ports and files follow QUOTREE_RUN, QUOTREE_*_PORT (the control plane, as hack/lib.sh),
QUOTREE_WEBHOOK_PORT and QUOTREE_METRICS_PORT (the operators), so that two runs on one
machine do not meet.

The control plane is stopped at the end (its data is left; the next run starts fresh).

    .venv/bin/python bench/bench_scale.py [--quotas 10000] [--cohorts 1000] [--pods 30000]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import itertools
import json
import os
import platform
import re
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

NODES = 10
# Room for every pod on the fake nodes (set before the cluster module reads them).
os.environ.update(
    {
        "QUOTREE_NODES": str(NODES),
        "QUOTREE_NODE_PODS": "4000",
        "QUOTREE_NODE_CPU": "1000",
        "QUOTREE_SCHEDULER_QPS": os.environ.get("QUOTREE_SCHEDULER_QPS", "500"),
        "QUOTREE_SCHEDULER_BURST": os.environ.get("QUOTREE_SCHEDULER_BURST", "1000"),
        "QUOTREE_KWOK_POD_PARALLELISM": os.environ.get("QUOTREE_KWOK_POD_PARALLELISM", "32"),
    }
)

import aiohttp  # noqa: E402
from bench_operator import GATE, Api, _cpu_s, _rss_mb, _session  # noqa: E402

from tests.e2e import cluster  # noqa: E402
from tests.e2e.operator_proc import (  # noqa: E402
    OperatorProcess,
    delete_webhook_configurations,
    start_operator,
)

NAMESPACES = 100
IN_FLIGHT = 64
# The operators' ports: QUOTREE_WEBHOOK_PORT / QUOTREE_METRICS_PORT when set (the standby
# of phase 9 takes the next two), so that two benchmarks on one machine do not collide.
WEBHOOK_PORT = int(os.environ.get("QUOTREE_WEBHOOK_PORT", "29546"))
METRICS_PORT = int(os.environ.get("QUOTREE_METRICS_PORT", "29547"))
PODS_MUTATE = "pods-mutate"  # the pod CREATE webhook (quotree_webhooks.configurations)
WH_NS = "scale-wh"
NONE_NS = "scale-none"  # no quota: the API server calls no webhook for it
RUN = cluster.RUN_DIR / "bench-scale"  # under QUOTREE_RUN, as the control plane's files
QUOTA_LABEL = "quotree.io/quota-name"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _ns(q: int) -> str:
    return f"s{q * NAMESPACES // QUOTAS_N[0]:03d}"


QUOTAS_N = [10000]  # set from the arguments (module-level so _ns stays a plain function)


def cohorts(n: int) -> list[dict[str, Any]]:
    """10 top-level Cohorts and n - 10 under them (each under top i % 10)."""
    tops = 10
    middle = n - tops
    per_middle = -(-QUOTAS_N[0] // middle)  # quotas per middle Cohort, rounded up
    out = []
    for t in range(tops):
        room = per_middle * 10 * (-(-middle // tops))
        out.append(_cohort(f"ct{t}", None, f"{room}m"))
    for m in range(middle):
        out.append(_cohort(f"cm{m:03d}", f"ct{m % tops}", f"{per_middle * 10}m"))
    return out


def _cohort(name: str, parent: str | None, cpu: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"min": {"cpu": cpu}}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def quota(q: int, middle: int) -> dict[str, Any]:
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": f"q{q:05d}", "namespace": _ns(q)},
        "spec": {"parent": f"cm{q % middle:03d}", "min": {"cpu": "10m"}},
    }


def pod(i: int, quotas: int, gated: bool) -> dict[str, Any]:
    q = i % quotas
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1m"}}}]
    }
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    else:
        spec["nodeName"] = f"quotree-node-{i % NODES}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{i:05d}",
            "namespace": _ns(q),
            "labels": {QUOTA_LABEL: f"q{q:05d}"},
        },
        "spec": spec,
    }


async def create_all(api: Api, items: list[tuple[str, dict[str, Any]]]) -> float:
    """POST every (path, body) with IN_FLIGHT requests in flight; objects per second."""
    it = iter(items)
    start = time.monotonic()

    async def worker() -> None:
        for path, body in it:
            for attempt in range(5):
                try:
                    await api.call("POST", path, body)
                    break
                except RuntimeError as exc:
                    if "409" in str(exc):
                        break  # already there (a retried POST that had gone through)
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.5 * (attempt + 1))

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return len(items) / (time.monotonic() - start)


async def running(api: Api, limit: float = 900) -> float:
    """Wait (up to `limit` s) until kwok has made every bound pod Running, so that the
    start-up below meets a quiet cluster, not kwok's backlog of status writes; the wait."""
    start = time.monotonic()
    bound_pending = "status.phase%3DPending,spec.nodeName!%3D"
    while time.monotonic() - start < limit:
        page = await api.call("GET", f"/api/v1/pods?fieldSelector={bound_pending}&limit=1")
        if not page["items"]:
            break
        await asyncio.sleep(5)
    return time.monotonic() - start


def quota_items(quotas: range | list[int], middle: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"/apis/quotree.io/v1alpha1/namespaces/{_ns(q)}/elasticquotas", quota(q, middle))
        for q in quotas
    ]


def cohort_items(bodies: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [("/apis/quotree.io/v1alpha1/cohorts", b) for b in bodies]


def namespace_items(names: list[str]) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
        for n in names
    ]


RUNNING: list[OperatorProcess] = []  # stopped at the end whatever happens


def operator(name: str, env: dict[str, str] | None = None) -> OperatorProcess:
    op = start_operator(
        {
            "QUOTREE_WEBHOOK_PORT": str(WEBHOOK_PORT),
            "QUOTREE_METRICS_PORT": str(METRICS_PORT),
            "QUOTREE_CERT_DIR": str(RUN / "pki"),
            "QUOTREE_IDENTITY": "bench-scale",
            **(env or {}),
        },
        log_name=f"operator-scale-{name}",
        ready=None,
    )
    RUNNING.append(op)
    return op


def stop(op: OperatorProcess) -> None:
    op.stop()
    delete_webhook_configurations()


def metrics() -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=30).read()
    out = {}
    for line in text.decode().splitlines():
        m = re.match(r"(quotree_status_\w+_total) ([0-9.e+]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


class Startup:
    """When the operator's log shows each start-up phase, on the benchmark's clock."""

    MARKS = (
        ("loaded", "quota objects ("),
        ("leading", "acquired the leader lease"),
        ("status", "first status round"),
        ("webhooks", "configurations quotree.io written"),
    )

    def __init__(self, op: OperatorProcess, t0: float) -> None:
        self.op, self.t0 = op, t0
        self.at: dict[str, float] = {}

    async def follow(self, until: tuple[str, ...], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not all(k in self.at for k in until):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"operator start-up: no {until} in {timeout} s\n" + self.op.log_tail()
                )
            if not self.op.alive:
                raise RuntimeError("operator exited\n" + self.op.log_tail())
            text = self.op.log_text()
            for key, needle in self.MARKS:
                if key not in self.at and needle in text:
                    self.at[key] = time.monotonic() - self.t0
            await asyncio.sleep(0.05)

    def line(self, needle: str) -> str:
        return next((ln for ln in self.op.log_text().splitlines() if needle in ln), "")


async def watch_ungated(api: Api, names: set[str], seen: dict[str, float], version: str) -> None:
    """Every pod of `names` seen without the gate (watch over all namespaces)."""
    path = f"/api/v1/pods?watch=1&resourceVersion={version}&labelSelector={QUOTA_LABEL}"
    timeout = aiohttp.ClientTimeout(total=None)
    async with api.session.get(api.base + path, timeout=timeout) as r:
        async for line in r.content:
            obj = json.loads(line)["object"]
            meta = obj.get("metadata") or {}
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            gates = (obj.get("spec") or {}).get("schedulingGates") or []
            if key in names and key not in seen and not any(g["name"] == GATE for g in gates):
                seen[key] = time.monotonic()
                if len(seen) >= len(names):
                    return


async def paced_creates(
    api: Api, n: int, rate: float, tag: str, ns: str = "", *, held: bool = True
) -> list[float]:
    """n pod CREATEs into `ns` (WH_NS) paced at `rate`/s: each call's latency in ms; `held`:
    check that the webhook gated every one."""
    ns = ns or WH_NS
    lat: list[float] = []
    start = time.monotonic()

    async def one(i: int) -> None:
        await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{tag}-{i}", "namespace": ns},
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1m"}}}
                ]
            },
        }
        t = time.perf_counter()
        await api.call("POST", f"/api/v1/namespaces/{ns}/pods", body)
        lat.append((time.perf_counter() - t) * 1e3)

    await asyncio.gather(*(one(i) for i in range(n)))
    if not held:
        return lat
    listed = cluster.kubectl_json("-n", WH_NS, "get", "pods")
    tagged = [p for p in listed["items"] if p["metadata"]["name"].startswith(f"{tag}-")]
    held = sum(
        1 for p in tagged if any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or [])
    )
    assert held == n, f"{tag}: {held} of {n} pods gated by the webhook"
    return lat


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


async def wait_managed(ns: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while (
        "true"
        not in cluster.kubectl("get", "namespace", ns, "-o", "jsonpath={.metadata.labels}").stdout
    ):
        if time.monotonic() > deadline:
            raise RuntimeError(f"namespace {ns} not managed after {timeout} s")
        await asyncio.sleep(0.5)


async def quiet_status(timeout: float = 600, quiet: float = 12.0) -> dict[str, float]:
    """Wait until no status round ran for `quiet` seconds; the counters then."""
    last, since = metrics(), time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = metrics()
        if now != last:
            last, since = now, time.monotonic()
    return last


def webhook_hist() -> dict[float, float]:
    """The operator's quotree_webhook_duration_seconds buckets for the pod CREATE webhook."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=60).read()
    out: dict[float, float] = {}
    for line in text.decode().splitlines():
        if not line.startswith("quotree_webhook_duration_seconds_bucket{"):
            continue
        labels, value = line[line.index("{") + 1 :].split("} ")
        fields = dict(part.split("=", 1) for part in labels.split(","))
        if fields.get("webhook", "").strip('"') != PODS_MUTATE:
            continue
        bound = fields["le"].strip('"')
        le = float("inf") if bound == "+Inf" else float(bound)
        out[le] = out.get(le, 0.0) + float(value)
    return out


def hist_p99(before: dict[float, float], after: dict[float, float]) -> float:
    """The bucket bound (ms) at or below which 99% of the answers in the window fall."""
    counts = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    total = counts[-1][1] if counts else 0.0
    for le, cumulative in counts:
        if total and cumulative >= 0.99 * total:
            return le * 1e3
    return float("nan")


async def webhook_round(api: Api, label: str, out: dict[str, Any]) -> None:
    """300 paced CREATEs through the webhook and 300 into a namespace with no webhook, in
    alternating rounds of 100: each call's p50/p99, and the webhook's own answer time."""
    await wait_managed(WH_NS)
    await asyncio.sleep(3)  # the API server picks up the webhook configurations
    await paced_creates(api, 30, 50.0, f"warm{label}")  # connections, caches
    await paced_creates(api, 30, 50.0, f"warm{label}", NONE_NS, held=False)
    hist0 = webhook_hist()
    lat: list[float] = []
    none: list[float] = []
    for r in range(3):
        lat += await paced_creates(api, 100, 50.0, f"wh{label}-{r}")
        none += await paced_creates(api, 100, 50.0, f"none{label}-{r}", NONE_NS, held=False)
    own = hist_p99(hist0, webhook_hist())
    out[f"wh_p50_{label}"], out[f"wh_p99_{label}"] = pct(lat, 0.5), pct(lat, 0.99)
    out[f"none_p50_{label}"], out[f"none_p99_{label}"] = pct(none, 0.5), pct(none, 0.99)
    out[f"wh_own_p99_{label}"] = own
    log(
        f"pod CREATE at {label} quotas: through the webhook p50 {pct(lat, 0.5):.1f} ms, p99 "
        f"{pct(lat, 0.99):.1f} ms; no webhook p50 {pct(none, 0.5):.1f}, p99 "
        f"{pct(none, 0.99):.1f} ms; the webhook's own answer p99 <= {own:.1f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quotas", type=int, default=10000)
    parser.add_argument("--cohorts", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--keep", action="store_true", help="leave the control plane up")
    args = parser.parse_args()
    QUOTAS_N[0] = nq = args.quotas
    middle = args.cohorts - 10
    n_pods = args.pods
    RUN.mkdir(exist_ok=True)
    r: dict[str, Any] = {}
    t_bench = time.monotonic()
    # The image compiles quotree's modules when it is built (Dockerfile). An environment
    # that forbids writing bytecode (PYTHONDONTWRITEBYTECODE, as on the machine these
    # figures come from) would otherwise compile them again at each operator start, and in
    # its pod list's helper process: about 1 s that no deployed operator spends.
    for source in ("quotree", "operator", "webhooks"):
        compileall.compile_dir(ROOT / source, quiet=1)
    log("fresh control plane")
    if cluster.is_running():
        cluster.cluster_down()
    cluster.cluster_up(fresh=True)
    cluster.kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
    try:
        async with _session() as session:
            api = Api(session, cluster.APISERVER_URL)
            await run(api, r, nq, middle, n_pods)
    finally:
        for op in RUNNING:
            op.stop()
        if not args.keep:
            cluster.cluster_down()
    r["bench_s"] = time.monotonic() - t_bench
    report(r, nq, args.cohorts, n_pods)


async def run(api: Api, r: dict[str, Any], nq: int, middle: int, n_pods: int) -> None:
    namespaces = sorted({_ns(q) for q in range(nq)})
    await create_all(api, namespace_items([*namespaces, WH_NS, NONE_NS]))

    # 1. idle
    op = operator("idle")
    st = Startup(op, time.monotonic())
    await st.follow(("leading", "webhooks"))
    await asyncio.sleep(3)
    r["rss_idle"] = _rss_mb(op.proc.pid)
    log(f"idle RSS {r['rss_idle']:.1f} MiB")

    # 2. webhook p99 at 100 quotas (the first 10 middle Cohorts' quotas)
    await create_all(api, cohort_items(cohorts(middle + 10)[:20]))
    small = [q for q in range(nq) if q % middle < 10][:100]
    await create_all(api, quota_items(small, middle))
    await api.call(
        "POST",
        f"/apis/quotree.io/v1alpha1/namespaces/{WH_NS}/elasticquotas",
        {
            "apiVersion": "quotree.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "wh", "namespace": WH_NS},
            "spec": {"max": {"cpu": "0"}},
        },
    )
    await webhook_round(api, "100", r)
    stop(op)

    # 3. every quota and Cohort; an operator against them (no pods yet)
    t = time.monotonic()
    await create_all(api, cohort_items(cohorts(middle + 10)[20:]))
    for chunk in range(0, nq, 2000):
        await create_all(api, quota_items(range(chunk, min(nq, chunk + 2000)), middle))
    r["create_quotas_s"] = time.monotonic() - t
    log(f"{nq} quotas and {middle + 10} Cohorts in {r['create_quotas_s']:.0f} s")
    op = operator("quotas")
    st = Startup(op, time.monotonic())
    await st.follow(("loaded", "leading", "webhooks"))
    # RSS 20 s after it serves (its first status round, 22,000 PATCHes, is still going:
    # the loaded operator's RSS below is taken at the same point of its start)
    await asyncio.sleep(20)
    r["startup_quotas"] = dict(st.at)
    r["rss_quotas"] = _rss_mb(op.proc.pid)
    log(f"quotas only: start-up {st.at}, RSS {r['rss_quotas']:.1f} MiB")
    stop(op)

    # 4. pods: every 30th gated (the start-up admits them), the rest admitted and bound
    t = time.monotonic()
    gated = {i for i in range(n_pods) if i % 30 == 0}
    items = [
        (f"/api/v1/namespaces/{_ns(i % nq)}/pods", pod(i, nq, i in gated)) for i in range(n_pods)
    ]
    r["create_pods_rate"] = await create_all(api, items)
    r["create_pods_s"] = time.monotonic() - t
    log(f"{n_pods} pods in {r['create_pods_s']:.0f} s ({r['create_pods_rate']:.0f}/s)")
    r["kwok_s"] = await running(api)
    log(f"waited {r['kwok_s']:.0f} s for kwok to make every bound pod Running (limit 900 s)")

    # 5. start-up against the populated cluster; first, what a plain client's paged list of
    # the same objects takes now (the floor of the operator's list + load)
    t = time.monotonic()
    listed = 0
    for path in (
        "/apis/quotree.io/v1alpha1/cohorts",
        "/apis/quotree.io/v1alpha1/elasticquotas",
        "/api/v1/pods",
    ):
        token = ""
        while True:
            page = await api.call(
                "GET", f"{path}?limit=500" + (f"&continue={token}" if token else "")
            )
            listed += len(page["items"])
            token = page["metadata"].get("continue") or ""
            if not token:
                break
    r["list_floor_s"] = time.monotonic() - t
    log(f"a plain paged list of the {listed} objects: {r['list_floor_s']:.1f} s")
    listing = await api.call("GET", "/api/v1/pods?limit=1")
    names = {f"{_ns(i % nq)}/p{i:05d}" for i in gated}
    seen: dict[str, float] = {}
    watcher = asyncio.create_task(
        watch_ungated(api, names, seen, listing["metadata"]["resourceVersion"])
    )
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    op = operator("loaded")
    st = Startup(op, t0)
    await st.follow(("loaded", "leading", "webhooks"))
    await asyncio.wait_for(watcher, timeout=300)
    st.at["admitted"] = max(seen.values()) - t0
    after = sorted(v - t0 for v in seen.values())
    first, half = r["admitted_spread"] = (after[0], after[len(after) // 2])
    log(f"start-up: {st.at}; the first gated pod admitted at {first:.1f} s, half at {half:.1f} s")
    await asyncio.sleep(20)
    r["rss_early"] = _rss_mb(op.proc.pid)
    log(f"RSS 20 s after serving {r['rss_early']:.1f} MiB")
    await st.follow(("status",), timeout=1500)
    r["startup"] = dict(st.at)
    r["startup_loaded_line"] = st.line("quota objects (")
    r["startup_status_line"] = st.line("first status round")
    log(f"start-up and first status round: {st.at}")

    # 6. status work per flush when a few quotas change
    before = await quiet_status()
    r["rss_loaded"] = _rss_mb(op.proc.pid)
    log(f"RSS 20 s after serving {r['rss_early']:.1f} MiB, settled {r['rss_loaded']:.1f} MiB")
    changed = [q * 997 % nq for q in range(10)]
    extra = []
    for k, q in enumerate(changed * 2):
        body = pod(q, nq, gated=False)
        body["metadata"]["name"] = f"x{k:03d}"
        del body["spec"]["nodeName"]  # through the webhook (gated), then admitted
        extra.append((f"/api/v1/namespaces/{_ns(q)}/pods", body))
    xseen: dict[str, float] = {}
    listing = await api.call("GET", "/api/v1/pods?limit=1")
    xwatch = asyncio.create_task(
        watch_ungated(
            api,
            {f"{path.split('/')[4]}/{body['metadata']['name']}" for path, body in extra},
            xseen,
            listing["metadata"]["resourceVersion"],
        )
    )
    await create_all(api, extra)
    await asyncio.wait_for(xwatch, timeout=120)
    after = await quiet_status()
    r["flush"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    log(f"status work for 20 pods in 10 quotas: {r['flush']}")

    # 7. webhook p99 at 10,000 quotas
    await webhook_round(api, "10000", r)
    r["rss_end"] = _rss_mb(op.proc.pid)

    # 8. failover: a standby beside the leader, then the leader killed while pods come
    await failover(api, r, op, nq)

    # 9. the same start-up with paged lists (QUOTREE_LIST_PAGE_SIZE=500): the baseline
    op = operator("paged", {"QUOTREE_LIST_PAGE_SIZE": "500"})
    st = Startup(op, time.monotonic())
    await st.follow(("loaded", "leading"))
    await asyncio.sleep(20)
    r["paged_startup"] = dict(st.at)
    r["paged_loaded_line"] = st.line("quota objects (")
    r["rss_paged"] = _rss_mb(op.proc.pid)
    log(f"paged lists: start-up {st.at}, RSS 20 s after leading {r['rss_paged']:.1f} MiB")
    stop(op)

    # 10. the streamed start-up again, with the pod list read in the operator's own process
    # (QUOTREE_LIST_READER=0) and in the helper (the default), each twice, alternated: what
    # the helper process saves, on the same cluster and at the same time
    r["reader_ab"] = []
    for reader in ("0", "1", "0", "1"):
        op = operator(f"reader{reader}", {"QUOTREE_LIST_READER": reader})
        st = Startup(op, time.monotonic())
        await st.follow(("loaded",))
        cpu = _cpu_s(op.proc.pid)
        await st.follow(("loaded", "leading"))
        r["reader_ab"].append((reader, st.at["loaded"], st.at["leading"], cpu))
        log(f"pod list reader={reader}: {st.at}, CPU until loaded {cpu:.1f} s")
        stop(op)


LEASE_S = 15  # the Lease's duration (leader.py)
FAILOVER_PODS, FAILOVER_RATE = 240, 4.0


async def failover(api: Api, r: dict[str, Any], leader: OperatorProcess, nq: int) -> None:
    """A standby (its own identity and ports) loads and watches; pods arrive through the
    webhook at FAILOVER_RATE/s, one per quota; the leader gets SIGKILL a quarter of the way
    in. The gap: the longest time between two admissions seen, and how long after the
    Lease's deadline (its last renewTime + duration) the first admission came."""
    standby = operator(
        "standby",
        {
            "QUOTREE_IDENTITY": "bench-scale-b",
            "QUOTREE_WEBHOOK_PORT": str(WEBHOOK_PORT + 2),
            "QUOTREE_METRICS_PORT": str(METRICS_PORT + 2),
        },
    )
    sb = Startup(standby, time.monotonic())
    await sb.follow(("loaded", "webhooks"))
    await asyncio.sleep(20)  # its webhook configuration, written last, is the one in use
    r["standby_startup"] = dict(sb.at)
    r["rss_standby"] = _rss_mb(standby.proc.pid)
    log(f"standby: start-up {sb.at}, RSS {r['rss_standby']:.1f} MiB")
    quotas = [q * 7919 % nq for q in range(FAILOVER_PODS)]
    items = []
    for k, q in enumerate(quotas):
        body = pod(q, nq, gated=False)
        body["metadata"]["name"] = f"f{k:03d}"
        del body["spec"]["nodeName"]
        items.append((f"/api/v1/namespaces/{_ns(q)}/pods", body))
    names = {f"{_ns(q)}/f{k:03d}" for k, q in enumerate(quotas)}
    seen: dict[str, float] = {}
    listing = await api.call("GET", "/api/v1/pods?limit=1")
    watcher = asyncio.create_task(
        watch_ungated(api, names, seen, listing["metadata"]["resourceVersion"])
    )
    start = time.monotonic()

    async def create(i: int, path: str, body: dict[str, Any]) -> None:
        await asyncio.sleep(max(0.0, start + i / FAILOVER_RATE - time.monotonic()))
        await api.call("POST", path, body)

    creating = asyncio.gather(*(create(i, *item) for i, item in enumerate(items)))
    await asyncio.sleep(FAILOVER_PODS / FAILOVER_RATE / 4)
    lease = cluster.kubectl_json("-n", "quotree-system", "get", "lease", "quotree-operator")
    renewed = datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
    leader.kill()
    killed = time.monotonic()
    taking_over = asyncio.create_task(sb.follow(("leading",)))  # when its log says so
    # The Lease's deadline on the monotonic clock (wall clocks of one machine agree).
    deadline = killed + renewed.timestamp() + LEASE_S - time.time()
    await creating
    await asyncio.wait({watcher}, timeout=180)  # what is not admitted by then is reported
    watcher.cancel()
    await taking_over
    times = sorted(seen.values())
    gaps = [b - a for a, b in itertools.pairwise(times)]
    after = [t for t in times if t > killed] or [float("nan")]
    r["failover"] = {
        "gap": max(gaps, default=float("nan")),
        "first_after_kill": after[0] - killed,
        "after_deadline": after[0] - deadline,
        "leading_after_kill": sb.at["leading"] - (killed - sb.t0),
        "admitted": len(times),
        "created": len(names),
    }
    log(f"failover: {r['failover']}")
    stop(standby)


def report(r: dict[str, Any], nq: int, nc: int, n_pods: int) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, CPython {platform.python_version()}"
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    objects = nq + nc + 1
    per_quota = (r["rss_quotas"] - r["rss_idle"]) * 1024 / objects
    per_pod = (r["rss_early"] - r["rss_quotas"]) * 1024 / n_pods
    budget = (10 * objects + 3 * n_pods) / 1024  # MiB: 10 KiB a quota object, 3 KiB a pod
    s = r["startup"]
    flush = r["flush"]
    f = r["failover"]
    paged_per_pod = (r["rss_paged"] - r["rss_quotas"]) * 1024 / n_pods
    standby_per_pod = (r["rss_standby"] - r["rss_quotas"]) * 1024 / n_pods
    rounds = flush.get("quotree_status_rounds_total", 0) or 1
    print(
        f"\n{date}, {machine}, load {load}; {nq} ElasticQuotas, {nc} Cohorts, {n_pods} pods; "
        f"benchmark took {r['bench_s']:.0f} s\n"
        f"- creation: quotas + Cohorts {r['create_quotas_s']:.0f} s; "
        f"pods {r['create_pods_s']:.0f} s "
        f"({r['create_pods_rate']:.0f}/s); every bound pod Running {r['kwok_s']:.0f} s later\n"
        f"- start-up, s after the process start: loaded {s['loaded']:.1f}, leading "
        f"{s['leading']:.1f}, ready to admit (its first admission; target: "
        f"within 15 s) {r['admitted_spread'][0]:.1f}, half the gated pods admitted "
        f"{r['admitted_spread'][1]:.1f}, all {s['admitted']:.1f}, first status round "
        f"{s['status']:.1f}, webhooks configured {s['webhooks']:.1f}; everything done "
        f"{max(s['admitted'], s['status']):.1f} s (quotas only: {r['startup_quotas']})\n"
        f"  {r['startup_loaded_line']}\n  {r['startup_status_line']}\n"
        f"  (a plain client's paged list of the same objects just before: "
        f"{r['list_floor_s']:.1f} s)\n"
        f"- status work for 20 pods in 10 quotas: "
        f"{flush.get('quotree_status_rounds_total', 0):.0f} "
        f"rounds, {flush.get('quotree_status_examined_total', 0):.0f} objects examined "
        f"({flush.get('quotree_status_examined_total', 0) / rounds:.0f} per round), "
        f"{flush.get('quotree_status_writes_total', 0):.0f} PATCHes\n"
        f"- RSS: idle {r['rss_idle']:.1f} MiB; 20 s after serving: quotas only "
        f"{r['rss_quotas']:.1f}, with pods {r['rss_early']:.1f} -> {per_quota:.2f} KiB per "
        f"quota object, {per_pod:.2f} KiB per pod; settled (every status written) "
        f"{r['rss_loaded']:.1f}, at the end {r['rss_end']:.1f}: "
        f"{r['rss_loaded'] - r['rss_idle']:.1f} MiB above idle against a budget of "
        f"{budget:.1f} MiB (10 KiB a quota object + 3 KiB a pod)\n"
        f"- pod CREATE p50 / p99 through the webhook (no webhook; the webhook's own p99): "
        f"at 100 quotas {r['wh_p50_100']:.1f} / {r['wh_p99_100']:.1f} ms "
        f"({r['none_p50_100']:.1f} / {r['none_p99_100']:.1f}; {r['wh_own_p99_100']:.1f}), "
        f"at {nq} quotas {r['wh_p50_10000']:.1f} / {r['wh_p99_10000']:.1f} ms "
        f"({r['none_p50_10000']:.1f} / {r['none_p99_10000']:.1f}; "
        f"{r['wh_own_p99_10000']:.1f}); ratio of p99s {r['wh_p99_10000'] / r['wh_p99_100']:.2f}\n"
        f"- failover ({FAILOVER_PODS} pods at {FAILOVER_RATE:.0f}/s, the leader killed; "
        f"{f['admitted']} admitted within 180 s of the last creation): longest "
        f"gap between admissions {f['gap']:.1f} s; first admission {f['first_after_kill']:.1f} s "
        f"after the kill, {f['after_deadline']:+.1f} s from the Lease's deadline (lease "
        f"{LEASE_S} s); the standby led {f['leading_after_kill']:.1f} s after the kill; "
        f"standby: loaded {r['standby_startup']['loaded']:.1f} s, RSS {r['rss_standby']:.1f} "
        f"MiB ({standby_per_pod:.2f} KiB per pod above the quotas-only process)\n"
        f"- baseline, paged lists (QUOTREE_LIST_PAGE_SIZE=500): loaded "
        f"{r['paged_startup']['loaded']:.1f} s, leading {r['paged_startup']['leading']:.1f} s; "
        f"{r['paged_loaded_line']}; RSS 20 s after leading {r['rss_paged']:.1f} MiB "
        f"({paged_per_pod:.2f} KiB per pod)\n"
        + "".join(
            f"- pod list read {'in a helper process' if reader == '1' else 'in-process'} "
            f"(QUOTREE_LIST_READER={reader}): loaded {loaded:.1f} s, leading {leading:.1f} s, "
            f"operator CPU until loaded {cpu:.1f} s\n"
            for reader, loaded, leading, cpu in r["reader_ab"]
        )
    )
    (RUN / "result.json").write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
