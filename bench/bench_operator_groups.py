"""Pod groups through the live operator (a script, not a test): admissions per second.

On the local control plane (as bench_operator.py: 100 ElasticQuotas under 10 Cohorts, the
operator without webhooks, pods created gated with their quota label), the same N pods
(default 4,000) are created as fast as the API server accepts them, in turns:

- single: N pods on their own;
- groups: N/4 plain-pod groups of 4 (`quotree.io/pod-group`, `quotree.io/pod-group-size:
  "4"`), each group's pods created one after the other;

and the time from the first creation until the benchmark's watch has seen every gate gone
gives pods admitted per second. The operator's CPU (user + system, /proc) over each turn,
per pod, is the per-event cost. A warm-up turn is not counted; then turns alternate
(single, groups, groups, single, ...) so that both see the same machine; the median of
the rounds is reported, groups against single pods (the target: >= 0.9x the admission
rate). Pods select a node label no node has, so the scheduler leaves them be.

    .venv/bin/python bench/bench_operator_groups.py [--pods 4000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_operator import (  # noqa: E402
    COHORTS,
    GATE,
    NS_PREFIX,
    QUOTAS,
    Api,
    _cpu_s,
    _delete_namespace,
    _session,
    _tree,
    _watch_ungated,
)

from tests.e2e import cluster  # noqa: E402
from tests.e2e.operator_proc import start_operator  # noqa: E402

GROUP_SIZE = 4


def _pod(ns: str, i: int, grouped: bool) -> dict[str, Any]:
    quota = f"q{(i // GROUP_SIZE if grouped else i) % QUOTAS:03d}"
    metadata: dict[str, Any] = {
        "name": f"p{i:05d}",
        "namespace": ns,
        "labels": {"quotree.io/quota-name": quota},
    }
    if grouped:
        metadata["labels"]["quotree.io/pod-group"] = f"g{i // GROUP_SIZE:05d}"
        metadata["annotations"] = {"quotree.io/pod-group-size": str(GROUP_SIZE)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            # No node has this label: admitted pods stay unschedulable and the scheduler
            # backs off, instead of binding a few hundred and retrying the rest meanwhile.
            "nodeSelector": {"quotree.dev/bench": "nowhere"},
            "schedulingGates": [{"name": GATE}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1m"}}}],
        },
    }


async def _create(api: Api, ns: str, n: int, grouped: bool) -> None:
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            await api.call("POST", f"/api/v1/namespaces/{ns}/pods", _pod(ns, i, grouped))

    await asyncio.gather(*(one(i) for i in range(n)))


async def _turn(api: Api, pid: int, n: int, grouped: bool, label: str) -> tuple[float, float]:
    ns = f"{NS_PREFIX}-{label}"
    _delete_namespace(ns)
    cluster.kubectl("apply", "-f", "-", input=_tree(ns))
    time.sleep(2)  # the status of 100 fresh quotas settles first
    seen: dict[str, float] = {}
    watcher = asyncio.create_task(_watch_ungated(api, ns, n, seen))
    cpu0, start = _cpu_s(pid), time.monotonic()
    await _create(api, ns, n, grouped)
    await asyncio.wait_for(watcher, timeout=900)
    rate = n / (max(seen.values()) - start)
    cpu_ms = (_cpu_s(pid) - cpu0) / n * 1e3
    _delete_namespace(ns)
    return rate, cpu_ms


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.pods - args.pods % GROUP_SIZE
    cluster.ensure_cluster()
    cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    op = start_operator({"QUOTREE_WEBHOOKS": "0"}, log_name="operator-bench-groups")
    try:
        time.sleep(2)
        async with _session() as session:
            api = Api(session, cluster.APISERVER_URL)
            # A first turn warms the operator and the API server up; it is not counted.
            rate, cpu = await _turn(api, op.proc.pid, n, False, "warm-up")
            print(f"warm-up: {rate:.0f} pods/s, {cpu:.3f} CPU ms per pod", flush=True)
            for round_ in range(args.rounds):
                for grouped in (False, True) if round_ % 2 == 0 else (True, False):
                    label = f"{'groups' if grouped else 'single'}-{round_}"
                    rate, cpu = await _turn(api, op.proc.pid, n, grouped, label)
                    figures[grouped].append((rate, cpu))
                    print(f"{label}: {rate:.0f} pods/s, {cpu:.3f} CPU ms per pod", flush=True)
    finally:
        op.stop()
        for c in range(COHORTS):
            cluster.kubectl("delete", "cohort", f"bench-c{c}", "--wait=false", check=False)
    single_rate = statistics.median(r for r, _ in figures[False])
    group_rate = statistics.median(r for r, _ in figures[True])
    single_cpu = statistics.median(c for _, c in figures[False])
    group_cpu = statistics.median(c for _, c in figures[True])
    print(
        f"\n## Pod groups through the live operator ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()})\n\n"
        f"{n} pods, median of {args.rounds} alternating rounds, webhooks off.\n\n"
        "| | pods admitted per second | operator CPU per pod, ms |\n| --- | --- | --- |\n"
        f"| single pods | {single_rate:.0f} | {single_cpu:.3f} |\n"
        f"| {n // GROUP_SIZE} groups of {GROUP_SIZE} | {group_rate:.0f} | {group_cpu:.3f} |\n"
        f"| groups / single | {group_rate / single_rate:.2f}x | {group_cpu / single_cpu:.2f}x |\n"
    )


if __name__ == "__main__":
    asyncio.run(main())
