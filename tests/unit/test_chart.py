"""charts/quotree renders the objects of manifests/, and is generated from it.

Both real binaries (built by `make cluster-build`, which `make test` and `make unit` run
first): `helm template --include-crds` with default values and `kubectl kustomize
manifests/` give the same objects, compared whole (nothing normalised: the chart adds no
labels of its own). The values reach the objects as the operator reads them: the never-gated
namespaces in the webhooks' selectors are the operator's own list (quotree.resolution).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from quotree.resolution import never_gated

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "quotree"


def _versions() -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in (ROOT / "hack" / "versions.env").read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    return {key.strip(): value.strip() for key, value in pairs}


CACHE = Path(os.environ.get("QUOTREE_CACHE", Path.home() / ".cache" / "quotree"))
HELM = CACHE / f"helm-{_versions()['HELM_VERSION']}" / "helm"
KUBECTL = CACHE / f"kubectl-{_versions()['KUBE_VERSION']}" / "kubectl"


def _run(binary: Path, *args: str) -> str:
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run `make cluster-build` (make test builds it first)")
    result = subprocess.run(
        [str(binary), *args], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _objects(text: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for doc in yaml.safe_load_all(text):
        if doc:
            meta = doc["metadata"]
            key = (doc["kind"], meta.get("namespace", ""), meta["name"])
            assert key not in out, f"{key} twice"
            out[key] = doc
    return out


def _helm(*args: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return _objects(_run(HELM, "template", "quotree", str(CHART), "--include-crds", *args))


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_chart", ROOT / "hack" / "gen_chart.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_chart_is_generated_from_the_manifests() -> None:
    expected: dict[str, str] = _generator().files()
    on_disk = {
        str(path.relative_to(CHART)): path.read_text()
        for path in CHART.rglob("*")
        if path.is_file()
    }
    assert sorted(on_disk) == sorted(expected), "run .venv/bin/python hack/gen_chart.py"
    for name, text in expected.items():
        assert on_disk[name] == text, f"charts/quotree/{name} differs: run hack/gen_chart.py"


def test_default_values_render_exactly_the_manifests() -> None:
    kustomized = _objects(_run(KUBECTL, "kustomize", str(ROOT / "manifests")))
    rendered = _helm()
    assert sorted(rendered) == sorted(kustomized)
    for key, obj in kustomized.items():
        assert rendered[key] == obj, f"{key} differs between the chart and manifests/"


def _container(objects: dict[tuple[str, str, str], dict[str, Any]], ns: str) -> dict[str, Any]:
    deployment = objects[("Deployment", ns, "quotree-operator")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_values_reach_the_deployment() -> None:
    objects = _helm(
        "--set",
        "replicas=3,reclaimDelay=5,logLevel=DEBUG,image.repository=registry.example/quotree",
        "--set",
        "image.tag=v1,image.pullPolicy=IfNotPresent,defaultQuota=everyone",
        "--set",
        "resources.requests.cpu=1,systemNamespaces={monitoring,logging}",
    )
    deployment = objects[("Deployment", "quotree-system", "quotree-operator")]
    assert deployment["spec"]["replicas"] == 3
    container = _container(objects, "quotree-system")
    assert container["image"] == "registry.example/quotree:v1"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["resources"]["requests"] == {"cpu": 1, "memory": "256Mi"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["QUOTREE_RECLAIM_DELAY"] == "5"
    assert env["QUOTREE_LOG_LEVEL"] == "DEBUG"
    assert env["QUOTREE_SYSTEM_NAMESPACES"] == "monitoring,logging"
    assert env["QUOTREE_DEFAULT_QUOTA"] == "everyone"


def test_system_namespaces_and_namespace_reach_every_object() -> None:
    objects = _helm("--set", "namespace=quotas,systemNamespaces={monitoring}")
    expected = sorted(never_gated("quotas", ["monitoring"]))
    selectors = [
        expression["values"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for webhook in objects[(kind, "", "quotree.io")]["webhooks"]
        for expression in (webhook.get("namespaceSelector") or {}).get("matchExpressions", [])
        if expression["key"] == "kubernetes.io/metadata.name"
    ]
    assert len(selectors) == 4
    assert all(values == expected for values in selectors), selectors
    text = yaml.safe_dump_all(objects.values())
    crds = [obj for (kind, _, _), obj in objects.items() if kind == "CustomResourceDefinition"]
    assert "quotree-system" not in text.replace(yaml.safe_dump_all(crds), "")
    assert ("Namespace", "", "quotas") in objects
    assert objects[("Service", "quotas", "quotree-webhooks")]
    env = {e["name"]: e.get("value") for e in _container(objects, "quotas")["env"]}
    assert env["QUOTREE_WEBHOOK_SERVICE"] == "quotas/quotree-webhooks"
    conditions = [
        c["expression"]
        for webhook in objects[("ValidatingWebhookConfiguration", "", "quotree.io")]["webhooks"]
        for c in webhook.get("matchConditions", [])
        if c["name"] == "not-the-operator"
    ]
    assert conditions
    assert all("system:serviceaccount:quotas:quotree" in c for c in conditions)


def test_the_rendered_chart_runs_through_the_simulator() -> None:
    """`helm template charts/quotree | quotree simulate -`: the chart's kinds the simulator does
    not read (CRDs, RBAC, Services, ...) are skipped and named once on standard error; its
    Deployment's pods, in no quota, are simulated as unmanaged."""
    rendered = _run(HELM, "template", "quotree", str(CHART), "--include-crds")
    result = subprocess.run(
        [sys.executable, "-m", "quotree.cli", "simulate", "-", "-o", "json"],
        input=rendered,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("quotree: note:")]
    assert len(notes) == 1, result.stderr
    assert "skipped" in notes[0]
    for kind in ("CustomResourceDefinition", "ClusterRole", "Service", "ServiceAccount"):
        assert kind in notes[0]
    pods = json.loads(result.stdout)["pods"]
    assert pods
    assert {entry["state"] for entry in pods.values()} == {"unmanaged"}
