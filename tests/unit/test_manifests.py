"""manifests/ must agree with the code: the webhook configurations are generated from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_manifests", ROOT / "hack/gen_manifests.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def test_webhook_configurations_are_generated_from_the_code() -> None:
    assert (MANIFESTS / "webhooks.yaml").read_text() == _generator().render(), (
        "manifests/webhooks.yaml is stale: run "
        "`.venv/bin/python hack/gen_manifests.py > manifests/webhooks.yaml`"
    )


def test_webhooks_trust_the_deployments_service_account_and_service() -> None:
    (deployment,) = _docs("deployment.yaml")
    pod = deployment["spec"]["template"]["spec"]
    (service,) = _docs("service.yaml")
    account = next(d for d in _docs("access/rbac.yaml") if d["kind"] == "ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    namespace = deployment["metadata"]["namespace"]
    assert env["QUOTREE_WEBHOOK_SERVICE"] == f"{namespace}/{service['metadata']['name']}"
    username = f"system:serviceaccount:{namespace}:{account['metadata']['name']}"
    for configuration in _docs("webhooks.yaml"):
        for webhook in configuration["webhooks"]:
            client = webhook["clientConfig"]["service"]
            assert (client["namespace"], client["name"]) == (namespace, service["metadata"]["name"])
            assert client["port"] == service["spec"]["ports"][0]["port"]
            conditions = " ".join(c["expression"] for c in webhook.get("matchConditions", ()))
            if webhook["name"].startswith("pods-validate"):
                assert f"'{username}'" in conditions


def _kustomization_resources() -> list[str]:
    return list(yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"])


def test_apply_k_installs_every_object_file_of_manifests() -> None:
    """`kubectl apply -k manifests/` creates every object the top directory holds (the
    metrics Service the docs and the ServiceMonitor name among them)."""
    files = {p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml"}
    missing = files - set(_kustomization_resources())
    assert not missing, f"manifests/kustomization.yaml does not list {sorted(missing)}"
    (service,) = _docs("metrics-service.yaml")
    assert service["metadata"]["name"] == "quotree-metrics"


def test_undeploy_deletes_every_file_it_installs_but_the_crds() -> None:
    script = (ROOT / "hack" / "undeploy.sh").read_text()
    for resource in _kustomization_resources():
        if resource == "../crds":
            continue
        flag = "-k" if (MANIFESTS / resource).is_dir() else "-f"
        assert f'{flag} "${{M}}/{resource}"' in script, f"make undeploy leaves {resource}"


def test_the_metrics_service_reaches_the_operator_pods_metrics_port() -> None:
    """quotree-metrics selects the Deployment's pods, and they serve metrics on the port it
    names, on every address (the operator's default is 127.0.0.1)."""
    (service,) = _docs("metrics-service.yaml")
    (deployment,) = _docs("deployment.yaml")
    template = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    (container,) = template["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ports
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env.get("QUOTREE_METRICS_HOST") == "0.0.0.0"
    assert int(env.get("QUOTREE_METRICS_PORT", "8000")) == ports[port["targetPort"]]
