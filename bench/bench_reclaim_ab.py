"""Evictions that pay: evictions per admitted pod, capacity idle just after evictions, and
CPU per arriving pod in the contended burst, before and after, alternated in one run.

For each shape (no flavors, or nvidia.com/gpu split into 2 flavors as `bench_engine.py
--flavors 2` does) and each version, one process builds the contended engine of
`bench_engine.build_engine` (the cluster holds exactly the sum of the mins, every quota
asks 1.5x its min; reclaim delay 30 s) of the version under test and plays `--events`
random pod events (a pod arriving or leaving, one second apart, so reclaim clocks run
out), carrying each round's evictions out at once and deciding again, as the operator
does once the pods are gone. It counts the pods admitted and evicted, and the GPUs (and
cpu) left idle at the root (runtime - used over runtime): just after each batch of
evictions is done, before the engine is asked again (what the evictions freed: an
eviction that frees more than the pod it is for needs shows there), and once the
engine has admitted what it could. CPU time
(`time.process_time`) is taken per arriving pod (`observe_pod` + `decide()`).
Versions are source folders (`--version after=. --version before=DIR`, DIR a `git
archive` of the other version); every version sees the same events (same seed).

`--mixed` is the issue's own story: GPU pods of two sizes (one 8-GPU pod and many 1-GPU
pods per quota, `MIXED_SIZES`), in Cohorts of 4, where evicting an 8-GPU pod to lend
out one GPU shows; the other shapes' pods all ask the same, so no eviction there can
free more than the pod it is for needs.

Run: .venv/bin/python bench/bench_reclaim_ab.py --version after=. --version before=DIR
     [--size 1000] [--events 2000] [--rounds 2] [--seeds 7,1,2] [--whole] [--mixed]
Prints one JSON line per run, then a Markdown table of the medians over the rounds and
seeds (the order of the versions alternates from one turn to the next), and with several
seeds the counts per seed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SHAPES = (0, 2)  # flavors

#: `--mixed`: the issue's story, GPU pods of two sizes. Quotas of min 8 GPUs (max 24) in
#: Cohorts of 4 under the root; each quota has 4 pods of 1 GPU, one of 8 GPUs, then 12
#: of 1 GPU (created in that order: 3x its min, the 8-GPU pod runs when the quota has
#: room to borrow for it); cpu and memory are not short. With flavors, each flavor has
#: the same min, max and capacity, and each quota twice the pods.
MIXED_SIZES = (1,) * 4 + (8,) + (1,) * 12
MIXED_MIN_GPU, MIXED_PER_COHORT = 8, 4


def build_mixed(bench: Any, n: int) -> tuple[Any, list[Any]]:
    """The `--mixed` engine (contended: the cluster holds the sum of the mins), with the
    version's own classes (as `bench_engine` imports them), and its pods, none observed."""
    gpu, flavors, gi = bench.GPU, list(bench.FLAVORS), bench.GI
    engine = bench.Engine(reclaim_delay=30.0, options=bench.OPTIONS)
    for flavor in flavors:
        engine.set_flavor(bench.FlavorConfig(flavor, {"flavor": flavor}))
    mins = {"cpu": 4000, "memory": 16 * gi, gpu: MIXED_MIN_GPU}
    maxes = {"cpu": 8000, "memory": 32 * gi, gpu: 3 * MIXED_MIN_GPU}

    def split(amounts: dict[str, int], times: int = 1) -> dict[str, int]:
        if not flavors:
            return {r: v * times for r, v in amounts.items()}
        out = {r: v * times for r, v in amounts.items() if r != gpu}
        out.update({f"{gpu}@{f}": amounts[gpu] * times for f in flavors})
        return out

    extra: dict[str, Any] = (
        {"flavors": tuple(flavors), "flavored_resources": frozenset({gpu})} if flavors else {}
    )
    quotas = []
    for c in range(max(n // MIXED_PER_COHORT, 1)):
        cohort = f"c-{c}"
        engine.set_config(
            bench.MemberConfig(
                kind="Cohort", name=cohort, min=split(mins, MIXED_PER_COHORT), **extra
            )
        )
        for q in range(MIXED_PER_COHORT):
            config = bench.MemberConfig(
                kind="ElasticQuota", name=f"q-{c}-{q}", namespace=f"ns-{c}-{q}",
                parent=cohort, min=split(mins), max=split(maxes), **extra,
            )  # fmt: skip
            engine.set_config(config)
            quotas.append(config)
    total = {r: v * len(quotas) for r, v in mins.items()}
    for flavor in flavors:
        engine.set_cluster_node(f"pool-{flavor}", {gpu: total[gpu]}, {"flavor": flavor})
    engine.set_cluster_node("pool", {r: v for r, v in total.items() if r != gpu or not flavors})
    for tree in engine.trees.values():
        tree.settle()
    pods, clock, k = [], 0.0, max(len(flavors), 1)
    sizes = [gpus for gpus in MIXED_SIZES for _ in range(k)]
    for config in quotas:
        for i, gpus in enumerate(sizes):
            clock += 1.0
            request = {"cpu": 100, "memory": gi // 4, gpu: gpus}
            pods.append(
                bench.PodFacts(
                    namespace=config.namespace, name=f"p{i}", request=request,
                    created=clock, gated=True,
                )
            )  # fmt: skip
    return engine, pods


def run_one(  # noqa: PLR0917 (the child run's command line, in order)
    folder: str, size: int, flavors: int, events: int, seed: int, whole: bool, mixed: bool
) -> dict[str, Any]:
    """One version, one shape: the counts and CPU times (in this process)."""
    sys.path.insert(0, str(Path(folder) / "bench"))
    bench = importlib.import_module("bench_engine")
    bench.FLAVORS[:] = [f"f{i}" for i in range(flavors)]
    if mixed:
        engine, pods = build_mixed(bench, size)
        for facts in pods:
            engine.observe_pod(facts)
    else:
        engine, pods = bench.build_engine(size, True)
    gpu = bench.GPU
    gpus = [r for r in engine.tree.root.resources if r == gpu or r.startswith(gpu + "@")]

    def idle(resources: list[str]) -> float:
        root = engine.tree.root
        total = sum(root.runtime[r] for r in resources)
        return sum(root.runtime[r] - root.used[r] for r in resources) / max(total, 1)

    def carry_out(decisions: Any, now: float) -> tuple[int, int]:
        """Evictions done and decide again until none: (admitted, evicted). Just after each
        batch of evictions is done, before the engine is asked again, the GPUs (and cpu)
        left idle are noted: what the evictions freed and nothing else holds yet."""
        admitted, evicted = len(decisions.admitted), 0
        while decisions.evictions:
            evicted += len(decisions.evictions)
            for eviction in decisions.evictions:
                engine.forget_pod(eviction.pod)
            engine.tree.settle()
            idle_gpu_freed.append(idle(gpus))
            idle_cpu_freed.append(idle(["cpu"]))
            decisions = engine.decide(now)
            admitted += len(decisions.admitted)
        return admitted, evicted

    idle_gpu_freed: list[float] = []
    idle_cpu_freed: list[float] = []

    carry_out(engine.decide(1.0), 1.0)
    idle_gpu_freed.clear()
    idle_cpu_freed.clear()
    rnd = random.Random(seed)
    by_quota: dict[str, list[Any]] = {}
    for facts in pods:
        by_quota.setdefault(facts.namespace, []).append(facts)
    groups = list(by_quota.values())
    admitted = evicted = 0
    idle_gpu: list[float] = []
    idle_cpu: list[float] = []
    cpu_per_arrival: list[float] = []
    for k in range(events):
        # One pod arrives or leaves; with `whole`, a quota's pods all leave (it goes idle
        # and lends its min) or all come back (it wants its min back).
        batch = rnd.choice(groups) if whole else [rnd.choice(pods)]
        now = 2.0 + k
        arriving = batch[0].key not in engine.pods
        t0 = time.process_time()
        for facts in batch:
            if arriving:
                engine.observe_pod(facts)
            elif facts.key in engine.pods:
                engine.forget_pod(facts.key)
        decisions = engine.decide(now)
        spent = time.process_time() - t0
        if arriving:
            cpu_per_arrival.append(spent / len(batch))
        got, lost = carry_out(decisions, now)
        admitted += got
        evicted += lost
        if lost:
            engine.tree.settle()
            idle_gpu.append(idle(gpus))
            idle_cpu.append(idle(["cpu"]))
    return {
        "admitted": admitted,
        "evicted": evicted,
        "evictions_per_admitted": evicted / max(admitted, 1),
        "eviction_rounds": len(idle_gpu),
        "idle_gpu_just_after_evictions": (
            statistics.fmean(idle_gpu_freed) if idle_gpu_freed else 0.0
        ),
        "idle_cpu_just_after_evictions": (
            statistics.fmean(idle_cpu_freed) if idle_cpu_freed else 0.0
        ),
        "idle_gpu_after_evictions": statistics.fmean(idle_gpu) if idle_gpu else 0.0,
        "idle_cpu_after_evictions": statistics.fmean(idle_cpu) if idle_cpu else 0.0,
        "cpu_per_arrival_ms": statistics.fmean(cpu_per_arrival) * 1e3,
        "cpu_per_arrival_p50_ms": statistics.median(cpu_per_arrival) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", required=True, help="name=folder")
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--seeds", help="several seeds, comma-separated (overrides --seed)")
    parser.add_argument(
        "--whole", action="store_true", help="events move a quota's pods all at once"
    )
    parser.add_argument(
        "--mixed", action="store_true", help="the issue's story: 8-GPU and 1-GPU pods"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # folder,flavors: a child run
    args = parser.parse_args()
    if args.one:
        folder, flavors = args.one.split(",")
        result = run_one(
            folder, args.size, int(flavors), args.events, args.seed, args.whole, args.mixed
        )
        print(json.dumps(result))
        return
    versions = [v.split("=", 1) for v in args.version]
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    turn = 0
    for seed in seeds:
        for _ in range(args.rounds):
            order = versions if turn % 2 == 0 else list(reversed(versions))
            turn += 1
            for flavors in SHAPES:
                for name, folder in order:
                    result = child(args, name, folder, flavors, seed)
                    print(json.dumps({"version": name, "flavors": flavors, **result}), flush=True)
                    results.setdefault((name, flavors), []).append(result)
    print()
    print(
        "| flavors | version | admitted | evicted | evictions per admitted pod | "
        "GPUs idle just after evictions | GPUs idle once admitted again | "
        "CPU per arriving pod (mean / p50, ms) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for flavors in SHAPES:
        for name, _ in versions:
            runs = results[(name, flavors)]

            def med(key: str, runs: list[dict[str, Any]] = runs) -> float:
                return statistics.median(r[key] for r in runs)

            print(
                f"| {flavors} | {name} | {med('admitted'):.0f} | {med('evicted'):.0f} | "
                f"{med('evictions_per_admitted'):.3f} | "
                f"{100 * med('idle_gpu_just_after_evictions'):.3f}% | "
                f"{100 * med('idle_gpu_after_evictions'):.3f}% | "
                f"{med('cpu_per_arrival_ms'):.2f} / {med('cpu_per_arrival_p50_ms'):.2f} |"
            )
    if len(seeds) > 1:  # per seed: the counts (they do not depend on the load)
        print()
        names = [name for name, _ in versions]
        print(
            f"| flavors | seed | evictions per admitted pod ({' / '.join(names)}) | "
            f"GPUs idle just after evictions ({' / '.join(names)}) |"
        )
        print("| --- | --- | --- | --- |")
        for flavors in SHAPES:
            for seed in seeds:
                per = [[r for r in results[(n, flavors)] if r["seed"] == seed] for n in names]
                epa = " / ".join(
                    f"{statistics.median(r['evictions_per_admitted'] for r in runs):.3f}"
                    for runs in per
                )
                idle = " / ".join(
                    f"{100 * median(runs, 'idle_gpu_just_after_evictions'):.3f}%" for runs in per
                )
                print(f"| {flavors} | {seed} | {epa} | {idle} |")


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def child(
    args: argparse.Namespace, name: str, folder: str, flavors: int, seed: int
) -> dict[str, Any]:
    """One run, in a process of its own with the version's folder first on the path."""
    env = {**os.environ, "PYTHONPATH": str(Path(folder).resolve())}
    out = subprocess.run(
        [sys.executable, __file__, "--version", f"{name}={folder}",
         "--one", f"{Path(folder).resolve()},{flavors}",
         "--size", str(args.size), "--events", str(args.events),
         "--seed", str(seed), *(["--whole"] if args.whole else []),
         *(["--mixed"] if args.mixed else [])],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return {**json.loads(out.stdout.splitlines()[-1]), "seed": seed}


if __name__ == "__main__":
    main()
