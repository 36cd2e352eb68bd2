"""Inputs for the scale benchmarks, written as `quotree simulate` reads them (YAML documents).

Two shapes, each a function of its size so that a benchmark can grow it and report the
growth ratio:

- `one_quota(pods)`: one ElasticQuota whose pods arrive one by one (created in file
  order), a node pool with room for all of them, a guarantee of half of them: the first
  half is in-quota, the rest over-quota, and priorities are mixed so that a newcomer often
  lands in the middle of the in-quota order;
- `mixed_tree(quotas, pods)`: 3 levels (top Cohorts, Cohorts under them, the quotas spread
  over those), 4 resource kinds (cpu, memory, nvidia.com/gpu, ephemeral-storage), a quarter
  of the pods GPU pods, priorities from three classes, a cluster 20 % short of the sum of
  what the pods ask, so some wait and some borrow.

Deterministic (a seeded generator); nothing here is timed.
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["mixed_tree", "one_quota"]

GI = 1 << 30
PRIORITIES = (0, 100, 1000)


def _pod(name: str, namespace: str, *, cpu_m: int, memory: int, gpus: int, priority: int) -> str:
    gpu = f', nvidia.com/gpu: "{gpus}"' if gpus else ""
    return (
        "apiVersion: v1\nkind: Pod\n"
        f"metadata: {{name: {name}, namespace: {namespace}}}\n"
        f"spec: {{priority: {priority}, containers: [{{name: c, resources: {{requests: "
        f'{{cpu: "{cpu_m}m", memory: "{memory >> 20}Mi", ephemeral-storage: "1Gi"{gpu}}}}}}}]}}\n'
    )


def one_quota(pods: int, path: Path) -> int:
    """One quota, `pods` pods of 100m cpu and 64Mi each; returns the pod count."""
    rnd = random.Random(21)
    docs = [
        "apiVersion: v1\nkind: Node\nmetadata: {name: pool}\n"
        f'status: {{allocatable: {{cpu: "{pods * 100}m", memory: "{pods * 64}Mi", '
        f'ephemeral-storage: "{pods}Gi"}}}}\n',
        "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
        "metadata: {name: team, namespace: team}\n"
        f'spec: {{min: {{cpu: "{pods * 50}m", memory: "{pods * 32}Mi"}}}}\n',
    ]
    for i in range(pods):
        docs.append(
            _pod(
                f"p{i}", "team", cpu_m=100, memory=64 << 20, gpus=0, priority=rnd.choice(PRIORITIES)
            )
        )
    path.write_text("---\n".join(docs))
    return pods


def mixed_tree(quotas: int, pods: int, path: Path) -> int:
    """The mixed tree; returns the pod count."""
    rnd = random.Random(42)
    top = max(quotas // 1000, 1)
    mid = max(quotas // 100, 1)
    # What one quota is guaranteed, as written (cpu in m, memory in Mi, storage in Gi).
    per_quota = {"cpu": 4000, "memory": 16384, "nvidia.com/gpu": 2, "ephemeral-storage": 64}

    def mins(count: int) -> str:
        cpu, memory = per_quota["cpu"] * count, per_quota["memory"] * count
        gpus, storage = per_quota["nvidia.com/gpu"] * count, per_quota["ephemeral-storage"] * count
        return (
            f'min: {{cpu: "{cpu}m", memory: "{memory}Mi", nvidia.com/gpu: "{gpus}", '
            f'ephemeral-storage: "{storage}Gi"}}'
        )

    docs = []
    in_dept = [len(range(m, quotas, mid)) for m in range(mid)]
    for t in range(top):
        count = sum(in_dept[m] for m in range(t, mid, top))
        docs.append(
            "apiVersion: quotree.io/v1alpha1\nkind: Cohort\n"
            f"metadata: {{name: top-{t}}}\nspec: {{{mins(count)}}}\n"
        )
    for m in range(mid):
        docs.append(
            "apiVersion: quotree.io/v1alpha1\nkind: Cohort\n"
            f"metadata: {{name: dept-{m}}}\nspec: {{parent: top-{m % top}, {mins(in_dept[m])}}}\n"
        )
    for q in range(quotas):
        docs.append(
            "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
            f"metadata: {{name: team-{q}, namespace: ns-{q}}}\n"
            f"spec: {{parent: dept-{q % mid}, {mins(1)}, "
            f'sharedWeight: {{cpu: "{rnd.choice((1, 2, 4))}"}}}}\n'
        )
    asked = {"cpu": 0, "memory": 0, "nvidia.com/gpu": 0, "ephemeral-storage": 0}
    pod_docs = []
    for i in range(pods):
        q = rnd.randrange(quotas)
        gpus = rnd.choice((1, 2)) if i % 4 == 0 else 0
        cpu_m = rnd.choice((250, 500, 1000, 2000))
        memory = rnd.choice((1, 2, 4, 8)) * GI
        asked["cpu"] += cpu_m
        asked["memory"] += memory
        asked["nvidia.com/gpu"] += gpus
        asked["ephemeral-storage"] += GI
        pod_docs.append(
            _pod(
                f"p{i}",
                f"ns-{q}",
                cpu_m=cpu_m,
                memory=memory,
                gpus=gpus,
                priority=rnd.choice(PRIORITIES),
            )
        )
    room = {r: int(v * 0.8) for r, v in asked.items()}
    docs.insert(
        0,
        "apiVersion: v1\nkind: Node\nmetadata: {name: pool}\n"
        f'status: {{allocatable: {{cpu: "{room["cpu"]}m", memory: "{room["memory"] >> 20}Mi", '
        f'nvidia.com/gpu: "{room["nvidia.com/gpu"]}", '
        f'ephemeral-storage: "{room["ephemeral-storage"]}"}}}}\n',
    )
    path.write_text("---\n".join(docs + pod_docs))
    return pods
