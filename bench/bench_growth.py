"""How the cost per pod grows with a quota's fullness and a tree's size (a script, not a test).

Three figures, each against a baseline measured in the same run:

1. one quota, pods arriving one by one through `quotree simulate` (in process): CPU per
   arriving pod at each size, and its ratio to the first size (target: 100,000 pods within
   1.5x of 1,000, and the 100,000-pod run under 30 s);
2. the contended burst of bench_engine.py (`quotree simulate`, every quota asking 1.5x its
   min): CPU per arriving pod at each quota count against the first (target: 1,000 quotas
   within 1.5x of 200; the 100,000-pod burst, 10,000 quotas, under 60 s);
3. a mixed tree (3 levels, 4 resource kinds, a quarter GPU pods, mixed priorities; default
   10,000 quotas and 50,000 pods) through the CLI, `quotree simulate -o json`: wall time
   (target: under 10 s).

A size that runs past `--limit` seconds is reported as not finished. The inputs come from
bench/scale_inputs.py. Prints a Markdown section for bench/RESULTS.md.

    .venv/bin/python bench/bench_growth.py [--one-quota 1000,10000,100000]
        [--contended 200,1000,10000] [--mixed 10000:50000] [--limit 300]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_engine  # noqa: E402
from scale_inputs import mixed_tree, one_quota  # noqa: E402

from quotree.simulate import simulate  # noqa: E402


class _TooLong(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TooLong


def _timed_simulate(path: Path, limit: int) -> tuple[float, float] | None:
    """(wall s, CPU s) of `simulate([path])` in process; None past `limit` seconds."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        simulate([path])
    except _TooLong:
        return None
    finally:
        signal.alarm(0)
    return time.perf_counter() - t0, time.process_time() - c0


def one_quota_rows(sizes: list[int], limit: int) -> list[str]:
    rows = []
    first: float | None = None
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            path = Path(folder) / f"one-{n}.yaml"
            one_quota(n, path)
            timed = _timed_simulate(path, limit)
            if timed is None:
                rows.append(f"| {n} | not finished in {limit} s | | |")
                continue
            wall, cpu = timed
            per_pod = cpu / n * 1e3
            first = first if first is not None else per_pod
            rows.append(f"| {n} | {wall:.1f} | {per_pod:.3f} | {per_pod / first:.2f}x |")
            sys.stdout.flush()
    return rows


def contended_rows(quota_counts: list[int], limit: int) -> list[str]:
    rows = []
    first: float | None = None
    for n in quota_counts:
        result = bench_engine.bench_simulate(n, True, cli=False, limit=limit)
        if result is None:
            rows.append(
                f"| {n} | {n * bench_engine.PODS_PER_QUOTA} | not finished in {limit} s | | |"
            )
            continue
        per_pod = result["cpu_s"] / result["pods"] * 1e3
        first = first if first is not None else per_pod
        rows.append(
            f"| {n} | {int(result['pods'])} | {result['in_process_s']:.1f} | {per_pod:.3f} "
            f"| {per_pod / first:.2f}x |"
        )
    return rows


def mixed_row(quotas: int, pods: int, limit: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mixed.yaml"
        mixed_tree(quotas, pods, path)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.perf_counter()
        try:
            subprocess.run(
                [sys.executable, "-m", "quotree.cli", "simulate", str(path), "-o", "json"],
                capture_output=True,
                check=True,
                timeout=limit,
                env=env,
            )
        except subprocess.TimeoutExpired:
            return f"| {quotas} | {pods} | not finished in {limit} s |"
        return f"| {quotas} | {pods} | {time.perf_counter() - t0:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-quota", default="1000,10000,100000", help="pod counts")
    parser.add_argument("--contended", default="200,1000,10000", help="quota counts")
    parser.add_argument("--mixed", default="10000:50000", help="QUOTAS:PODS ('' to skip)")
    parser.add_argument("--limit", type=int, default=300, help="seconds one size may run")
    args = parser.parse_args()
    print(
        f"## Growth ({datetime.now(UTC):%Y-%m-%d}, {platform.node()}, {platform.machine()}, "
        f"{os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()})\n"
    )
    sizes = [int(s) for s in args.one_quota.split(",") if s]
    if sizes:
        print("### One quota, pods arriving one by one (simulate, in process)\n")
        print("| pods | wall s | CPU per arriving pod, ms | vs the first size |")
        print("| --- | --- | --- | --- |")
        print("\n".join(one_quota_rows(sizes, args.limit)) + "\n")
        sys.stdout.flush()
    counts = [int(s) for s in args.contended.split(",") if s]
    if counts:
        print("### Contended burst (bench_engine's, simulate in process)\n")
        print("| quotas | pods | wall s | CPU per arriving pod, ms | vs the first size |")
        print("| --- | --- | --- | --- | --- |")
        print("\n".join(contended_rows(counts, args.limit)) + "\n")
        sys.stdout.flush()
    if args.mixed:
        quotas, pods = (int(x) for x in args.mixed.split(":"))
        print("### Mixed tree through the CLI (`quotree simulate -o json`)\n")
        print("| quotas | pods | wall s |")
        print("| --- | --- | --- |")
        print(mixed_row(quotas, pods, args.limit) + "\n")


if __name__ == "__main__":
    main()
