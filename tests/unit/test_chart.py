"""charts/quotree renders the objects of manifests/, and is generated from it.

Both real binaries (built by `make cluster-build`, which `make test` and `make unit` run
first): `helm template --include-crds` with default values and `kubectl kustomize
manifests/` give the same objects, compared whole but for Helm's standard labels, which the
chart adds to every object it templates; with the monitoring switches on, the chart adds
exactly the objects of the component manifests/monitoring/. The values reach the objects
as the operator reads them: the never-gated namespaces in the webhooks' selectors are the
operator's own list (quotree.resolution). Values the chart does not know, or of the wrong
type, fail `helm template` naming them (values.schema.json); `helm lint --strict` passes.
"""

from __future__ import annotations

import copy
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


#: Helm's standard labels, which the chart adds to every object it templates.
STANDARD_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
)
#: Every monitoring switch on.
MONITORING = (
    "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,"
    "monitoring.dashboard.enabled=true"
)


def _call(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run `make cluster-build` (make test builds it first)")
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, check=False, timeout=120
    )


def _run(binary: Path, *args: str) -> str:
    result = _call(binary, *args)
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


def _helm(*args: str, release: str = "quotree") -> dict[tuple[str, str, str], dict[str, Any]]:
    return _objects(_run(HELM, "template", release, str(CHART), "--include-crds", *args))


def _without_helm_labels(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without Helm's standard labels (on it and on its pod template)."""
    out = copy.deepcopy(obj)
    for meta in (out["metadata"], out.get("spec", {}).get("template", {}).get("metadata", {})):
        for label in STANDARD_LABELS:
            meta.get("labels", {}).pop(label, None)
    return out


def _kustomize_with_monitoring(tmp_path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """manifests/ with its optional component manifests/monitoring/, as a user adds it."""
    manifests = os.path.relpath(ROOT / "manifests", tmp_path)  # kustomize wants relative
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{manifests}]\ncomponents: [{manifests}/monitoring]\n"
    )
    text = _run(KUBECTL, "kustomize", str(tmp_path))
    return _objects(text)


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
        assert _without_helm_labels(rendered[key]) == obj, f"{key} differs from manifests/"


def test_the_monitoring_switches_add_the_component_manifests_monitoring(tmp_path: Path) -> None:
    kustomized = _kustomize_with_monitoring(tmp_path)
    rendered = _helm("--set", MONITORING)
    assert sorted(rendered) == sorted(kustomized)
    for key, obj in kustomized.items():
        assert _without_helm_labels(rendered[key]) == obj, f"{key} differs from the component"
    dashboard = rendered[("ConfigMap", "quotree-system", "quotree-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert (
        dashboard["data"]["quotree.json"]
        == (ROOT / "manifests/monitoring/dashboard.json").read_text()
    )


@pytest.mark.parametrize(
    ("switch", "kind"),
    [
        ("serviceMonitor", "ServiceMonitor"),
        ("prometheusRule", "PrometheusRule"),
        ("dashboard", "ConfigMap"),
    ],
)
def test_each_monitoring_switch_adds_its_object_alone(switch: str, kind: str) -> None:
    default = set(_helm())
    assert not any(k[0] == kind for k in default)
    added = set(_helm("--set", f"monitoring.{switch}.enabled=true")) - default
    assert [k[0] for k in added] == [kind]


def test_every_templated_object_has_the_standard_labels() -> None:
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    objects = _helm("--set", MONITORING, release="team-quotas")
    for (kind, _, name), obj in objects.items():
        if kind == "CustomResourceDefinition":
            continue  # crds/: Helm installs them as they are, untemplated (docs/deploy.md)
        for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata")):
            if meta is None:
                continue
            labels = meta["labels"]
            assert labels["app.kubernetes.io/name"] == "quotree", (kind, name)
            assert labels["app.kubernetes.io/instance"] == "team-quotas", (kind, name)
            assert labels["app.kubernetes.io/managed-by"] == "Helm", (kind, name)
            assert labels["app.kubernetes.io/version"] == version, (kind, name)
            assert labels["helm.sh/chart"] == f"quotree-{version}", (kind, name)
    # The selectors stay as they are: an upgrade never changes what a Deployment selects.
    deployment = objects[("Deployment", "quotree-system", "quotree-operator")]
    assert set(deployment["spec"]["selector"]["matchLabels"]) == {
        "app.kubernetes.io/name",
        "app.kubernetes.io/component",
    }


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("monitoring.enabled=true", ["monitoring", "enabled"]),
        ("nodeSelectr.x=y", ["nodeSelectr"]),
        ("image.tga=v1", ["image", "tga"]),
        ("replicas=two", ["replicas"]),
        ("replicas=0", ["replicas"]),
        ("reclaimDelay=-1", ["reclaimDelay"]),
        ("logLevel=LOUD", ["logLevel"]),
        ("monitoring.dashboard.enabled=yes", ["dashboard", "enabled"]),
        ("monitoring.serviceMonitor.interval=often", ["interval"]),
        ("resources.requests.cpu=lots", ["cpu"]),
        ("systemNamespaces={Not_A_Namespace}", ["systemNamespaces"]),
    ],
)
def test_a_value_the_chart_does_not_know_fails_naming_it(setting: str, named: list[str]) -> None:
    done = _call(HELM, "template", "quotree", str(CHART), "--set", setting)
    assert done.returncode != 0, f"--set {setting} rendered:\n{done.stdout[:500]}"
    assert done.stdout == ""
    for word in named:
        assert word in done.stderr, done.stderr


def test_scheduling_values_reach_the_operator_pods() -> None:
    objects = _helm(
        "--set",
        "nodeSelector.x=y,tolerations[0].key=dedicated,tolerations[0].operator=Exists",
    )
    spec = objects[("Deployment", "quotree-system", "quotree-operator")]["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"x": "y"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert "affinity" in spec  # the replicas' anti-affinity stays


def test_monitoring_values_reach_their_objects() -> None:
    objects = _helm(
        "--set",
        MONITORING,
        "--set",
        "monitoring.serviceMonitor.interval=10s,monitoring.serviceMonitor.labels.release=prom",
        "--set",
        "monitoring.prometheusRule.labels.role=alerts,monitoring.dashboard.namespace=grafana",
    )
    monitor = objects[("ServiceMonitor", "quotree-system", "quotree-operator")]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert [e["interval"] for e in monitor["spec"]["endpoints"]] == ["10s"]
    rule = objects[("PrometheusRule", "quotree-system", "quotree")]
    assert rule["metadata"]["labels"]["role"] == "alerts"
    # The alert texts reach Prometheus as written: Helm leaves their {{ $labels }} alone.
    texts = yaml.safe_dump(rule["spec"])
    assert "{{ $labels.node }}" in texts
    assert ("ConfigMap", "grafana", "quotree-dashboard") in objects


def test_helm_lint_strict_passes() -> None:
    for args in ((), ("--set", MONITORING)):
        done = _call(HELM, "lint", "--strict", str(CHART), *args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "0 chart(s) failed" in done.stdout


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
