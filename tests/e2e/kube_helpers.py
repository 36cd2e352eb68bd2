"""Small builders and readers for the operator e2e tests (real kubectl, nothing mocked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.e2e import cluster

GATE = "quotree.io/admission"
IN_USE = "quotree.io/in-use"
LOW, HIGH = "quotree-e2e-low", "quotree-e2e-high"


def _as_list(docs: tuple[Mapping[str, Any], ...]) -> str:
    # JSON, not YAML: PyYAML writes a name like `y` unquoted, and kubectl reads it as a bool.
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [dict(d) for d in docs]})


def apply(*docs: Mapping[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=_as_list(docs))


def create(*docs: Mapping[str, Any]) -> None:
    cluster.kubectl("create", "-f", "-", input=_as_list(docs), timeout=300)


def without_in_use(cohort: str) -> None:
    """Take the operator's in-use finalizer off `cohort` ("cohort.quotree.io/NAME" or a
    name), if it has it, as `make undeploy` does: with the operator stopped nothing else
    would, and a deleted Cohort would stay. A JSON patch that tests the finalizer at that
    index, then removes it."""
    target = cohort if "/" in cohort else f"cohort.quotree.io/{cohort}"
    found = cluster.kubectl("get", target, "-o", "json", check=False)
    if found.returncode != 0:
        return
    finalizers = json.loads(found.stdout)["metadata"].get("finalizers") or []
    if IN_USE not in finalizers:
        return
    path = f"/metadata/finalizers/{finalizers.index(IN_USE)}"
    ops = [{"op": "test", "path": path, "value": IN_USE}, {"op": "remove", "path": path}]
    cluster.kubectl("patch", target, "--type=json", "-p", json.dumps(ops), check=False)


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cohort(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def quota(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def pod_spec(requests: Mapping[str, str], priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulingGates": [{"name": GATE}],
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": dict(requests), "limits": dict(requests)},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def pod(
    name: str,
    ns: str,
    requests: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})},
        "spec": pod_spec(requests, priority_class),
    }


def deployment(
    name: str,
    ns: str,
    replicas: int,
    requests: Mapping[str, str],
    priority_class: str | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": pod_spec(requests, priority_class),
            },
        },
    }


def job(name: str, ns: str, parallelism: int, requests: Mapping[str, str]) -> dict[str, Any]:
    spec = pod_spec(requests)
    spec["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"metadata": {"labels": {"job": name}}, "spec": spec},
        },
    }


def priority_classes() -> None:
    apply(
        *(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
            for name, value in ((LOW, 10), (HIGH, 1000))
        )
    )


def status(kind: str, name: str, ns: str | None = None) -> dict[str, Any]:
    args = ["get", kind, name] + (["-n", ns] if ns else [])
    obj = cluster.kubectl_json(*args)
    out: dict[str, Any] = obj.get("status") or {}
    out["_annotations"] = obj["metadata"].get("annotations") or {}
    return out


def condition(st: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for c in st.get("conditions") or ():
        if c["type"] == kind:
            return dict(c)
    return {}


def pods(ns: str, selector: str | None = None) -> list[dict[str, Any]]:
    args = ["get", "pods", "-n", ns] + (["-l", selector] if selector else [])
    items: list[dict[str, Any]] = cluster.kubectl_json(*args)["items"]
    return items


def gated(p: Mapping[str, Any]) -> bool:
    return any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or ())


def live(p: Mapping[str, Any]) -> bool:
    return not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") not in (
        "Succeeded",
        "Failed",
    )


def admitted_pods(ns: str, selector: str | None = None) -> list[dict[str, Any]]:
    return [p for p in pods(ns, selector) if live(p) and not gated(p)]


def events(ns: str, reason: str) -> list[dict[str, Any]]:
    items = cluster.kubectl_json("get", "events", "-n", ns)["items"]
    return [e for e in items if e.get("reason") == reason]


def kubectl_quotree(
    cluster: ModuleType, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`kubectl quotree ARGS` through the real kubectl, which finds the plugin in the venv."""
    full = dict(os.environ)
    full["KUBECONFIG"] = str(cluster.KUBECONFIG)
    venv_bin = Path(sys.executable).parent
    full["PATH"] = os.pathsep.join([str(cluster.KUBECTL.parent), str(venv_bin), full["PATH"]])
    full.update(env or {})
    return subprocess.run(
        [str(cluster.KUBECTL), "quotree", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        check=False,
    )
