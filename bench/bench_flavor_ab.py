"""Per-event engine cost with flavors and trees, before and after, alternated in one run.

For each size (quotas), regime (roomy, contended) and shape (no flavors or `--flavors 2`
of `bench_engine.py`, 1 tree or 2), one process per run builds the engine with
`bench_engine.build_engine` of the version under test and times `--events` random pod
events (`forget_pod` / `observe_pod` + `decide()`, evictions carried out at once) in CPU
time (`time.process_time`, which moves less with the machine's load than wall time).
Versions are given as source folders (`--version after=. --version before=/tmp/snap`);
each run uses that folder's `quotree` and `bench/bench_engine.py` (PYTHONPATH), and the
same seed, so every version sees the same events. Rounds alternate the versions' order.
`name=folder#off` measures a folder with pending pods holding nothing on their other
flavors (`EngineOptions.holds` off; in versions from before that option, `#off`, `#freed`
or `#all` set `Decider.hold_mode`).

With `--counts`, each version runs each case once more, untimed, counting per event the
quotas the decider looks at (`Decider._decide_quota`), the pending queues it scans
(`_scan_pending`), the pods whose demand moves to another flavor (`_charge_to`) and the
evictions: what the time is spent on.

Run: .venv/bin/python bench/bench_flavor_ab.py --version after=. [--version before=DIR]
     [--sizes 1000,10000] [--events 2000] [--rounds 2] [--counts]
Prints one JSON line per run, then a Markdown table of the medians over the rounds, with
each shape's p50 against the flavorless single-tree p50 of the same version.
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

SHAPES = [(0, 1), (2, 1), (0, 2), (2, 2)]  # (flavors, trees)


#: One run: (flavors, trees, quotas, contended, events).
Case = tuple[int, int, int, bool, int]


def _count(counts: dict[str, int]) -> None:
    """Count the decider's work (the version under test's `Decider`)."""
    decider = importlib.import_module("quotree.decide").Decider
    for method in ("_decide_quota", "_scan_pending"):
        original = getattr(decider, method)

        def counted(
            self: object, *args: object, _f: object = original, _m: str = method, **kwargs: object
        ) -> object:
            counts[_m] += 1
            return _f(self, *args, **kwargs)  # type: ignore[operator]

        setattr(decider, method, counted)
    try:  # where a version moves a pending pod's demand to another flavor
        owner, name = importlib.import_module("quotree.placement").Placement, "charge_to"
    except ModuleNotFoundError:
        owner, name = decider, "_charge_to"
    charge_to = getattr(owner, name)

    def moving(self: object, record: object, flavor: str) -> None:
        if record.flavor != flavor:  # type: ignore[attr-defined]
            counts["demand moves"] += 1
        charge_to(self, record, flavor)

    setattr(owner, name, moving)


def worker(folder: str, case: Case, counting: bool = False) -> None:
    flavors, trees, n, contended, events = case
    folder, _, hold = folder.partition("#")
    sys.path.insert(0, str(Path(folder) / "bench"))
    b = importlib.import_module("bench_engine")  # the version under test's
    if hold and hasattr(b, "OPTIONS"):
        options = importlib.import_module("quotree.options")
        b.OPTIONS = options.EngineOptions(holds=hold != "off")
    elif hold:
        hold_module = importlib.import_module("quotree.hold")
        importlib.import_module("quotree.decide").Decider.hold_mode = hold_module.Mode(hold)
    counts = dict.fromkeys(("_decide_quota", "_scan_pending", "demand moves", "evictions"), 0)

    if hasattr(b, "FLAVORS"):
        b.FLAVORS[:] = [f"f{i}" for i in range(flavors)]
    elif flavors or trees > 1:
        raise SystemExit(f"{folder}/bench/bench_engine.py predates flavors and trees")
    if os.environ.get("QUOTREE_BENCH_SPLIT_GPUS") and flavors:
        b.SPLIT_GPUS = True  # a version's bench_engine without it would ignore it: refuse
        if not hasattr(b, "_share"):
            raise SystemExit(f"{folder}/bench/bench_engine.py cannot split the GPUs")
    rnd = random.Random(7)
    # (a `--baseline` from before flavors and trees takes two arguments)
    engine, pods = (
        b.build_engine(n, contended, trees) if trees > 1 else b.build_engine(n, contended)
    )
    _evicted(engine, engine.decide(1.0))
    if counting:
        _count(counts)
    costs = []
    kinds: dict[str, list[float]] = {}
    for k in range(events):
        facts = rnd.choice(pods)
        record = engine.pods.get(facts.key)
        kind = "arrival" if record is None else f"{record.state.value} pod leaves"
        start = time.process_time()
        if record is not None:
            engine.forget_pod(facts.key)
        else:
            engine.observe_pod(facts)
        decisions = engine.decide(2.0 + k)
        costs.append(time.process_time() - start)
        kinds.setdefault(kind, []).append(costs[-1])
        counts["evictions"] += len(decisions.evictions)
        _evicted(engine, decisions)
    if counting:
        print(json.dumps({k: v / events for k, v in counts.items()}))
        return
    costs.sort()
    print(
        json.dumps(
            {
                "p50_ms": statistics.median(costs) * 1e3,
                "p99_ms": costs[min(int(0.99 * len(costs)), len(costs) - 1)] * 1e3,
                "mean_ms": statistics.mean(costs) * 1e3,
                # per kind of event: its share of the events and its p50
                "kinds": {
                    kind: [len(c) / events, statistics.median(c) * 1e3]
                    for kind, c in sorted(kinds.items())
                },
            }
        )
    )


def _evicted(engine: object, decisions: object) -> None:
    """The cluster carries out the evictions at once (as `bench_engine._evicted`, which a
    `--baseline` from before it may lack)."""
    for eviction in decisions.evictions:  # type: ignore[attr-defined]
        engine.forget_pod(eviction.pod)  # type: ignore[attr-defined]


def run(folder: str, case: Case, counting: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(folder.partition("#")[0]).resolve())}
    args = [sys.executable, __file__, "--worker", folder, *(str(int(x)) for x in case)]
    args += ["count"] if counting else []
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        flavors, trees, n, contended, events = (int(x) for x in sys.argv[3:8])
        worker(sys.argv[2], (flavors, trees, n, bool(contended), events), "count" in sys.argv)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", action="append", required=True, help="name=folder")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--counts", action="store_true", help="count the decider's work too")
    parser.add_argument("--regimes", default="roomy,contended")
    parser.add_argument(
        "--baseline",
        help="name=folder: a version run without flavors and with 1 tree only (one from "
        "before both, such as the engine before flavors were built); every shape is also "
        "given against it",
    )
    parser.add_argument(
        "--split-gpus",
        action="store_true",
        help="the flavors share the GPUs (bench_engine.SPLIT_GPUS), not K times as many",
    )
    args = parser.parse_args()
    if args.split_gpus:
        os.environ["QUOTREE_BENCH_SPLIT_GPUS"] = "1"
    regimes = [r for r in args.regimes.split(",") if r]
    versions = [tuple(v.split("=", 1)) for v in args.version]
    baseline = tuple(args.baseline.split("=", 1)) if args.baseline else None
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results: dict[tuple[str, str, int, int, int], list[dict]] = {}
    for round_ in range(args.rounds):
        order = versions if round_ % 2 == 0 else list(reversed(versions))
        for n in sizes:
            for regime in regimes:
                for flavors, trees in SHAPES:
                    runs = list(order)
                    if baseline and (flavors, trees) == (0, 1):
                        runs.append(baseline)  # same seed, same events, the old engine
                    for name, folder in runs:
                        case = (flavors, trees, n, regime == "contended", args.events)
                        row = run(folder, case)
                        results.setdefault((name, regime, n, flavors, trees), []).append(row)
                        print(
                            json.dumps(
                                {
                                    "round": round_,
                                    "version": name,
                                    "regime": regime,
                                    "quotas": n,
                                    "flavors": flavors,
                                    "trees": trees,
                                    **row,
                                }
                            ),
                            flush=True,
                        )

    if args.counts:
        print(
            "\n| regime | quotas | flavors | trees | version | per event: "
            + " | ".join(("quotas looked at", "queues scanned", "demand moves", "evictions"))
            + " |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in sizes:
            for regime in regimes:
                for flavors, trees in SHAPES:
                    for name, folder in versions:
                        case = (flavors, trees, n, regime == "contended", args.events)
                        c = run(folder, case, counting=True)
                        print(
                            f"| {regime} | {n:,} | {flavors} | {trees} | {name} | "
                            + " | ".join(
                                f"{c[k]:.2f}"
                                for k in (
                                    "_decide_quota",
                                    "_scan_pending",
                                    "demand moves",
                                    "evictions",
                                )
                            )
                            + " |",
                            flush=True,
                        )

    if not results:
        return

    def med(key: tuple[str, str, int, int, int], field: str) -> float:
        return statistics.median(r[field] for r in results[key])

    against = f" | / {baseline[0]} (no flavors, 1 tree)" if baseline else ""
    print(
        "\n| regime | quotas | flavors | trees | "
        + " | ".join(
            f"{name} p50 ms | {name} p99 ms | {name} p50 / no flavors, 1 tree"
            + (f" | {name} p50 / {baseline[0]} (no flavors, 1 tree)" if baseline else "")
            for name, _ in versions
        )
        + (f" | {baseline[0]} p50 ms" if baseline else "")
        + " |"
    )
    columns = (4 if baseline else 3) * len(versions) + (1 if baseline else 0)
    print("| --- | --- | --- | --- |" + " --- |" * columns)
    for regime in regimes:
        for n in sizes:
            old = med((baseline[0], regime, n, 0, 1), "p50_ms") if baseline else None
            for flavors, trees in SHAPES:
                cells = []
                for name, _ in versions:
                    key = (name, regime, n, flavors, trees)
                    base = med((name, regime, n, 0, 1), "p50_ms")
                    p50 = med(key, "p50_ms")
                    cells += [f"{p50:.3f}", f"{med(key, 'p99_ms'):.3f}", f"{p50 / base:.2f}x"]
                    if old is not None:
                        cells.append(f"{p50 / old:.2f}x")
                if old is not None:
                    cells.append(f"{old:.3f}" if (flavors, trees) == (0, 1) else "")
                print(f"| {regime} | {n:,} | {flavors} | {trees} | " + " | ".join(cells) + " |")

    # The p50 above is that of whichever kind of event is the most common; per kind, each
    # against the same kind without flavors and with 1 tree (medians over the rounds).
    def kind_med(key: tuple[str, str, int, int, int], kind: str, i: int) -> float | None:
        values = [r["kinds"][kind][i] for r in results[key] if kind in r.get("kinds", {})]
        return statistics.median(values) if values else None

    print(
        "\n| regime | quotas | flavors | trees | version | kind of event | share | p50 ms "
        "| p50 / no flavors, 1 tree" + against + " |"
    )
    print(
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if baseline else "")
    )
    for regime in regimes:
        for n in sizes:
            for flavors, trees in SHAPES:
                for name, _ in versions:
                    key = (name, regime, n, flavors, trees)
                    kinds = sorted({k for r in results[key] for k in r.get("kinds", {})})
                    for kind in kinds:
                        share, p50 = kind_med(key, kind, 0), kind_med(key, kind, 1)
                        base = kind_med((name, regime, n, 0, 1), kind, 1)
                        if share is None or p50 is None:
                            continue
                        ratio = f"{p50 / base:.2f}x" if base else "-"
                        if baseline:
                            old_p50 = kind_med((baseline[0], regime, n, 0, 1), kind, 1)
                            ratio += f" | {p50 / old_p50:.2f}x" if old_p50 else " | -"
                        print(
                            f"| {regime} | {n:,} | {flavors} | {trees} | {name} | {kind} | "
                            f"{share:.0%} | {p50:.3f} | {ratio} |"
                        )


if __name__ == "__main__":
    main()
