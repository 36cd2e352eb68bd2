"""The engine's memory per pod, by tracemalloc (a script, not a test; no cluster).

100 quotas, N pods arriving as the operator reads them (each pod a JSON body parsed
afresh, so that no string is shared by accident), a quarter of them GPU pods, one label
each, decided every 100 pods until all are admitted. Reports what tracemalloc counts as
allocated and still held after the pods arrived, per pod, and the lines that hold most.
The operator's own figure (RSS, kopf's bodies included) is bench_scale.py's.

    .venv/bin/python bench/bench_engine_memory.py [--pods 20000] [--top 10]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from quotree.engine import Engine  # noqa: E402
from quotree.models import parse_member  # noqa: E402
from quotree.podfacts import pod_facts  # noqa: E402

QUOTAS = 100


def _quota(q: int) -> dict[str, object]:
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": f"team-{q}", "namespace": f"ns-{q}"},
        "spec": {"min": {"cpu": "100", "memory": "100Gi", "nvidia.com/gpu": "10"}},
    }


def _pod(i: int) -> str:
    requests = {"cpu": "250m", "memory": "1Gi", **({"nvidia.com/gpu": "1"} if i % 4 == 0 else {})}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"pod-{i}",
                "namespace": f"ns-{i % QUOTAS}",
                "uid": f"u{i}",
                "labels": {"app": f"a{i % 7}"},
            },
            "spec": {
                "schedulingGates": [{"name": "quotree.io/admission"}],
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            },
            "status": {"phase": "Pending"},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--top", type=int, default=10, help="lines to list")
    args = parser.parse_args()
    n = args.pods
    engine = Engine()
    engine.set_cluster_node("pool", {"cpu": 10**9, "memory": 10**15, "nvidia.com/gpu": 10**5})
    for q in range(QUOTAS):
        engine.set_config(parse_member(_quota(q)))
    engine.decide(0.0)
    bodies = [_pod(i) for i in range(n)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i, body in enumerate(bodies):
        engine.observe_pod(pod_facts(json.loads(body), default_created=float(i)))
        if i % 100 == 99:
            engine.decide(float(i))
    engine.decide(float(n))
    gc.collect()
    after = tracemalloc.take_snapshot()
    diff = after.compare_to(before, "lineno")
    admitted = sum(1 for r in engine.pods.values() if r.state == "admitted")
    print(f"{n} pods, {admitted} admitted: {sum(s.size_diff for s in diff) / n:.0f} bytes per pod")
    for stat in diff[: args.top]:
        print(f"{stat.size_diff / n:8.1f} B/pod  {stat.traceback}")


if __name__ == "__main__":
    main()
