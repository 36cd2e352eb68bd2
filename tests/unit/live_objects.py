"""A small live cluster as the API would serve it (for the kubectl plugin's unit tests).

One Ready node (cpu 8), Cohort research (min cpu 6, max 8), ElasticQuotas team-a (min 4,
max 8) and team-b (min 2, max 8) under it; team-a runs 5 cpu and has a gated pod asking
for 2, team-b runs 3 cpu (1 above its min). The statuses say what the operator wrote.

`fake_kubectl` stands in for kubectl on the command line (`main`): it answers `get` with a
state and `config view` with the current context's namespace, and logs its calls.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from quotree import ADMISSION_GATE
from quotree_kubectl.cluster import ClusterState
from tests.unit.objects import node, pod

API = "quotree.io/v1alpha1"


def cluster_node(name: str, cpu: str, ready: bool = True) -> dict[str, Any]:
    return node(name, {"cpu": cpu}, ready="True" if ready else "False", api_version=True)


def tree_object(
    kind: str,
    name: str,
    *,
    namespace: str | None = None,
    parent: str | None = None,
    min_cpu: str,
    max_cpu: str | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"min": {"cpu": min_cpu}}
    if max_cpu is not None:
        spec["max"] = {"cpu": max_cpu}
    if parent:
        spec["parent"] = parent
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
        **({"status": status} if status else {}),
    }


def quota_pod(
    namespace: str, name: str, cpu: str, *, gated: bool, created: str, quota: str | None = None
) -> dict[str, Any]:
    """A pod of `quota`: gated and pending, or running on node-1."""
    return pod(
        namespace,
        name,
        {"cpu": cpu},
        gates=(ADMISSION_GATE,) if gated else None,
        labels={"quotree.io/quota-name": quota} if quota else {},
        container="main",
        created=created,
        phase="Pending" if gated else "Running",
        api_version=True,
        **({} if gated else {"nodeName": "node-1"}),
    )


def status(
    used: str, runtime: str, request: str, admitted: int | None = None, pending: int | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "used": {"cpu": used},
        "runtime": {"cpu": runtime},
        "request": {"cpu": request},
        "conditions": [
            {"type": "Valid", "status": "True", "reason": "Valid", "message": "ok"},
            {"type": "Active", "status": "True", "reason": "Active", "message": "ok"},
        ],
    }
    if admitted is not None:
        out["admittedPods"] = admitted
        out["pendingPods"] = pending
    return out


def live_cluster() -> ClusterState:
    return ClusterState(
        nodes=[cluster_node("node-1", "8"), cluster_node("node-2", "64", ready=False)],
        cohorts=[
            tree_object(
                "Cohort",
                "research",
                min_cpu="6",
                max_cpu="8",
                status=status("8", "8", "10"),
            )
        ],
        quotas=[
            tree_object(
                "ElasticQuota",
                "team-a",
                namespace="ns-a",
                parent="research",
                min_cpu="4",
                max_cpu="8",
                status=status("5", "5", "7", 1, 1),
            ),
            tree_object(
                "ElasticQuota",
                "team-b",
                namespace="ns-b",
                parent="research",
                min_cpu="2",
                max_cpu="8",
                status=status("3", "3", "3", 1, 0),
            ),
        ],
        pods=[
            quota_pod(
                "ns-a", "a-1", "5", gated=False, created="2026-01-01T00:00:00Z", quota="team-a"
            ),
            quota_pod(
                "ns-b", "b-1", "3", gated=False, created="2026-01-01T00:00:01Z", quota="team-b"
            ),
            quota_pod(
                "ns-a", "a-2", "2", gated=True, created="2026-01-01T00:00:02Z", quota="team-a"
            ),
            quota_pod("kube-system", "dns", "0", gated=False, created="2026-01-01T00:00:00Z"),
        ],
    )


def fake_kubectl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: ClusterState, namespace: str = ""
) -> Path:
    """A kubectl that answers `get` with `state` and `config view` with `namespace` (the
    current context's); returns the file its calls are logged to, one line each."""
    items = [*state.nodes, *state.cohorts, *state.quotas, *state.pods]
    answer = tmp_path / "cluster.json"
    answer.write_text(json.dumps({"kind": "List", "items": items}))
    log = tmp_path / "calls.log"
    script = tmp_path / "kubectl"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {shlex.quote(str(log))}\n'
        'for a in "$@"; do\n'
        f'  if [ "$a" = config ]; then printf %s {shlex.quote(namespace)}; exit 0; fi\n'
        "done\n"
        f"cat {shlex.quote(str(answer))}\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("QUOTREE_KUBECTL", str(script))
    return log
