"""Engine benchmark (issue: the quota engine): full runtime, one pod arriving or leaving, simulate.

Trees of N ElasticQuotas, 1 Cohort per 10 quotas over 3 levels (N/100 top Cohorts, each
with 10 Cohorts of 10 quotas), 4 resources, 10 pods per quota. Two regimes:

- roomy: the cluster holds twice the sum of the mins; demand fits everywhere (no contention);
- contended: the cluster holds exactly the sum of the mins and every quota asks 1.5x its
  min, so every parent water-fills among all its children.

Figures:
  (a) one full runtime computation (tree.recompute) with all pods in;
  (b) one pod leaving or arriving, incremental: engine.forget_pod / observe_pod + decide();
      median and p99 over many random events; the ratio 100k/1k;
      baseline in the same run: the full recomputation the incremental path replaces;
  (c) `quotree simulate` of a burst of 10 pods per quota (10k quotas: the 100k-pod burst),
      in process and through the CLI on a generated file.

With `--trees 2` a second tree (`projects`, docs/reference/objects.md, "Several trees") of the same
shape covers the same namespaces, so every pod is charged to one quota in each tree and is
admitted only when it fits in both.

Run: .venv/bin/python bench/bench_engine.py [--sizes 1000,10000,100000] [--events 2000]
     [--trees 1|2]
Prints a Markdown section for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from quotree.engine import Decisions, Engine
from quotree.flavor_spec import FlavorConfig
from quotree.models import MemberConfig
from quotree.options import EngineOptions
from quotree.podfacts import PodFacts
from quotree.simulate import simulate

GI = 1 << 30
RESOURCES = {"cpu": 4000, "memory": 16 * GI, "nvidia.com/gpu": 2, "ephemeral-storage": 100 * GI}
PODS_PER_QUOTA = 10
GPU = "nvidia.com/gpu"
#: `--flavors K`: nvidia.com/gpu is split into K flavors (each with the same min, max and
#: capacity as the plain resource had), so every GPU pod is placed on a flavor.
FLAVORS: list[str] = []
#: `--split-gpus`: the flavors share the plain resource's GPUs instead (its min, max and
#: capacity divided among them, the remainder to the first ones): the same cluster and
#: the same workload, only the GPUs are of K models. Without it the cluster has K times
#: the GPUs, and K times as many GPU pods run.
SPLIT_GPUS = False


def _share(amount: int, i: int) -> int:
    """Flavor i's part of `amount` GPUs (`SPLIT_GPUS`), or all of it."""
    if not SPLIT_GPUS:
        return amount
    k = len(FLAVORS)
    return amount // k + (1 if i < amount % k else 0)


def _flavored(amounts: dict[str, int]) -> dict[str, int]:
    """The resource list with nvidia.com/gpu split into the flavors (when there are any)."""
    if not FLAVORS or GPU not in amounts:
        return amounts
    out = {r: v for r, v in amounts.items() if r != GPU}
    for i, flavor in enumerate(FLAVORS):
        out[f"{GPU}@{flavor}"] = _share(amounts[GPU], i)
    return out


def _split(config: MemberConfig) -> MemberConfig:
    if not FLAVORS:
        return config
    return MemberConfig(
        kind=config.kind,
        name=config.name,
        namespace=config.namespace,
        parent=config.parent,
        min=_flavored(dict(config.min)),
        max=_flavored(dict(config.max)),
        flavors=tuple(FLAVORS),
        flavored_resources=frozenset({GPU}),
    )


def build_configs(n: int) -> list[MemberConfig]:
    return [_split(c) for c in _plain_configs(n)]


def _plain_configs(n: int) -> list[MemberConfig]:
    configs = []
    tops = max(n // 100, 1)
    for t in range(tops):
        mids = [f"mid-{t}-{m}" for m in range(10)]
        for m, mid in enumerate(mids):
            for q in range(n // (tops * 10)):
                mins = dict(RESOURCES)
                configs.append(
                    MemberConfig(
                        kind="ElasticQuota",
                        name=f"q-{t}-{m}-{q}",
                        namespace=f"ns-{t}-{m}-{q}",
                        parent=mid,
                        min=mins,
                        max={r: 2 * v for r, v in mins.items()},
                    )
                )
        per_mid = n // (tops * 10)
        for mid in mids:
            configs.append(
                MemberConfig(
                    kind="Cohort",
                    name=mid,
                    parent=f"top-{t}",
                    min={r: v * per_mid for r, v in RESOURCES.items()},
                )
            )
        configs.append(
            MemberConfig(
                kind="Cohort",
                name=f"top-{t}",
                min={r: v * per_mid * 10 for r, v in RESOURCES.items()},
            )
        )
    return configs


def project_tree(configs: list[MemberConfig]) -> list[MemberConfig]:
    """The same shape as a second tree: each project quota covers its org quota's namespace."""
    out = []
    for config in configs:
        project = dataclasses.replace(
            config,
            name="p" + config.name,
            parent="p" + config.parent if config.parent else None,
            tree="projects",
        )
        if config.is_leaf:
            project = dataclasses.replace(
                project, namespace="p" + (config.namespace or ""), namespaces=(config.namespace,)
            )
        out.append(project)
    return out


def pod_request(contended: bool) -> dict[str, int]:
    factor = 0.15 if contended else 0.08  # x10 pods: 1.5x min, or 0.8x min
    request = {r: max(int(v * factor), 1) for r, v in RESOURCES.items()}
    request["nvidia.com/gpu"] = 1 if contended else 0
    return {r: v for r, v in request.items() if v}


#: The engine's switches for `build_engine` (None: the product's defaults); `bench_flavor_ab`
#: sets it to compare rules.
OPTIONS: EngineOptions | None = None


def build_engine(n: int, contended: bool, trees: int = 1) -> tuple[Engine, list[PodFacts]]:
    engine = Engine(reclaim_delay=30.0, options=OPTIONS)
    for flavor in FLAVORS:
        engine.set_flavor(FlavorConfig(flavor, {"flavor": flavor}))
    configs = build_configs(n)
    for config in configs + (project_tree(configs) if trees == 2 else []):
        engine.set_config(config)
    total_min = {r: v * n for r, v in RESOURCES.items()}
    capacity = total_min if contended else {r: 2 * v for r, v in total_min.items()}
    if FLAVORS:
        # One pool per flavor with the GPUs; the other resources in a pool of their own.
        for i, flavor in enumerate(FLAVORS):
            gpus = _share(capacity[GPU], i)
            engine.set_cluster_node(f"pool-{flavor}", {GPU: gpus}, {"flavor": flavor})
        capacity = {r: v for r, v in capacity.items() if r != GPU}
    engine.set_cluster_node("pool", capacity)
    for tree in engine.trees.values():
        tree.settle()
    pods = []
    request = pod_request(contended)
    clock = 0.0
    for config in configs:
        if config.kind != "ElasticQuota":
            continue
        for i in range(PODS_PER_QUOTA):
            clock += 1.0
            facts = PodFacts(
                namespace=config.namespace or "",
                name=f"p{i}",
                request=dict(request),
                created=clock,
                gated=True,
            )
            pods.append(facts)
            engine.observe_pod(facts)
    _evicted(engine, engine.decide(0.0))
    return engine, pods


def _evicted(engine: Engine, decisions: Decisions) -> None:
    """The cluster carries out the evictions at once: the pods are gone (as the operator's
    pod watch would report). Without this, a reclaim's victims would stay forever."""
    for eviction in decisions.evictions:
        engine.forget_pod(eviction.pod)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def bench_size(
    n: int, contended: bool, events: int, rnd: random.Random, trees: int = 1
) -> dict[str, float]:
    start = time.perf_counter()
    engine, pods = build_engine(n, contended, trees)
    build = time.perf_counter() - start
    full = []
    for _ in range(3):
        t0 = time.perf_counter()
        for tree in engine.trees.values():
            tree.recompute()
            tree.settle()
        full.append(time.perf_counter() - t0)
    _evicted(engine, engine.decide(1.0))
    costs = []
    for k in range(events):
        facts = rnd.choice(pods)
        t0 = time.perf_counter()
        if facts.key in engine.pods:
            engine.forget_pod(facts.key)
        else:
            engine.observe_pod(facts)
        decisions = engine.decide(2.0 + k)
        costs.append(time.perf_counter() - t0)
        _evicted(engine, decisions)
    return {
        "build_s": build,
        "full_s": min(full),
        "event_p50_ms": statistics.median(costs) * 1e3,
        "event_p99_ms": percentile(costs, 0.99) * 1e3,
    }


def write_burst(n: int, path: Path, contended: bool) -> int:
    """YAML for `quotree simulate`: the tree, one node pool, and 10 gated-to-be pods per quota."""
    lines = []
    total = {r: v * n * (1 if contended else 2) for r, v in RESOURCES.items()}
    alloc = ", ".join(f'{r}: "{v}"' for r, v in total.items() if r != "cpu")
    lines.append(
        "apiVersion: v1\nkind: Node\nmetadata: {name: pool}\n"
        f'status: {{allocatable: {{cpu: "{total["cpu"]}m", {alloc}}}}}\n'
    )

    def res(amounts: dict[str, int]) -> str:
        return ", ".join(
            f'{r}: "{v}m"' if r == "cpu" else f'{r}: "{v}"' for r, v in amounts.items()
        )

    count = 0
    configs = build_configs(n)
    for config in configs:
        meta = f"name: {config.name}"
        if config.namespace:
            meta += f", namespace: {config.namespace}"
        parent = f"parent: {config.parent}, " if config.parent else ""
        maxes = f", max: {{{res(dict(config.max))}}}" if config.max else ""
        lines.append(
            f"apiVersion: quotree.io/v1alpha1\nkind: {config.kind}\nmetadata: {{{meta}}}\n"
            f"spec: {{{parent}min: {{{res(dict(config.min))}}}{maxes}}}\n"
        )
    request = res(pod_request(contended))
    for config in configs:
        if config.kind != "ElasticQuota":
            continue
        for i in range(PODS_PER_QUOTA):
            count += 1
            lines.append(
                "apiVersion: v1\nkind: Pod\n"
                f"metadata: {{name: p{i}, namespace: {config.namespace}}}\n"
                f"spec: {{containers: [{{name: c, resources: {{requests: {{{request}}}}}}}]}}\n"
            )
    path.write_text("---\n".join(lines))
    return count


class _TooLong(Exception):
    pass


def _too_long(signum: int, frame: object) -> None:
    raise _TooLong


def bench_simulate(
    n: int, contended: bool, cli: bool = True, limit: int = 0
) -> dict[str, float] | None:
    """The burst in process (and through the CLI); None when it ran past `limit` s (0: none)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "burst.yaml"
        pods = write_burst(n, path, contended)
        t0, c0 = time.perf_counter(), time.process_time()
        if limit:
            signal.signal(signal.SIGALRM, _too_long)
            signal.alarm(limit)
        try:
            result = simulate([path])
        except _TooLong:
            return None
        finally:
            signal.alarm(0)
        in_process = time.perf_counter() - t0
        cpu = time.process_time() - c0
        admitted = sum(1 for r in result.engine.pods.values() if r.state == "admitted")
        cli_s = float("nan")
        if cli:
            t0 = time.perf_counter()
            try:
                subprocess.run(
                    [sys.executable, "-m", "quotree.cli", "simulate", str(path), "-o", "json"],
                    capture_output=True,
                    check=True,
                    timeout=limit or None,
                )
                cli_s = time.perf_counter() - t0
            except subprocess.TimeoutExpired:
                pass  # nan: did not finish in the limit
    return {
        "pods": pods,
        "admitted": admitted,
        "in_process_s": in_process,
        "cpu_s": cpu,
        "cli_s": cli_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument(
        "--flavors", type=int, default=0, help="split nvidia.com/gpu into this many flavors"
    )
    parser.add_argument(
        "--split-gpus", action="store_true", help="the flavors share the GPUs (SPLIT_GPUS)"
    )
    parser.add_argument(
        "--burst", default="1000,10000", help="quota counts for the roomy simulate bursts"
    )
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI runs of the bursts")
    parser.add_argument(
        "--burst-contended",
        default="200,1000,10000",
        help="quota counts for the contended bursts (the first is the per-pod baseline)",
    )
    parser.add_argument(
        "--burst-limit",
        type=int,
        default=120,
        help="seconds a contended burst of 10,000 quotas or more may run (0: no limit)",
    )
    parser.add_argument(
        "--trees", type=int, choices=(1, 2), default=1, help="2: a project tree over the same pods"
    )
    args = parser.parse_args()
    FLAVORS[:] = [f"f{i}" for i in range(args.flavors)]
    global SPLIT_GPUS  # noqa: PLW0603 (the module's setting, as FLAVORS above)
    SPLIT_GPUS = args.split_gpus
    sizes = [int(s) for s in args.sizes.split(",") if s]
    bursts = {
        "roomy": [int(s) for s in args.burst.split(",") if s],
        "contended": [int(s) for s in args.burst_contended.split(",") if s],
    }
    rnd = random.Random(7)
    print(
        f"## Engine ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{args.trees} tree{'s' if args.trees > 1 else ''}"
        f"{f', {len(FLAVORS)} GPU flavors' if FLAVORS else ''}"
        f"{' sharing the GPUs' if FLAVORS and SPLIT_GPUS else ''})\n"
    )
    for regime, contended in (("roomy", False), ("contended", True)):
        if not sizes:
            break
        rows = {n: bench_size(n, contended, args.events, rnd, args.trees) for n in sizes}
        print(f"### (a), (b): {regime}\n")
        print(
            "| quotas | build s | (a) full runtime s | (b) event p50 ms | (b) event p99 ms "
            "| full / event p50 |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for n, row in rows.items():
            ratio = row["full_s"] * 1e3 / row["event_p50_ms"]
            print(
                f"| {n} | {row['build_s']:.2f} | {row['full_s']:.3f} | "
                f"{row['event_p50_ms']:.3f} | {row['event_p99_ms']:.3f} | {ratio:.0f}x |"
            )
        first, last = rows[sizes[0]], rows[sizes[-1]]
        print(
            f"\nevent p50 ratio {sizes[-1]}/{sizes[0]}: "
            f"{last['event_p50_ms'] / first['event_p50_ms']:.2f}; "
            f"p99 ratio: {last['event_p99_ms'] / first['event_p99_ms']:.2f}\n"
        )
        sys.stdout.flush()
    if not any(bursts.values()):
        return
    print("### (c) simulate burst\n")
    print(
        "| regime | quotas | pods | admitted | in process s | CPU s | per arriving pod, CPU ms "
        "| vs the first size | CLI (YAML in, JSON out) s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for regime, contended in (("roomy", False), ("contended", True)):
        first: float | None = None
        for n in bursts[regime]:
            limit = args.burst_limit if contended and n >= 10000 else 0
            sim = bench_simulate(n, contended, cli=not args.no_cli, limit=limit)
            if sim is None:
                print(f"| {regime} | {n} | | | did not finish in {limit} s | | | | |")
                sys.stdout.flush()
                continue
            # CPU time: on a shared machine it moves far less with the load than wall time.
            per_pod = sim["cpu_s"] * 1e3 / sim["pods"]
            first = per_pod if first is None else first
            print(
                f"| {regime} | {n} | {sim['pods']} | {sim['admitted']} | "
                f"{sim['in_process_s']:.1f} | {sim['cpu_s']:.1f} | {per_pod:.3f} | "
                f"{per_pod / first:.2f}x | "
                f"{sim['cli_s']:.1f} |"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
