"""charts/quotree with a real helm on the local control plane: install, upgrade, uninstall.

- `helm install --wait`: every object of the chart is created and the Deployment becomes
  available (kwok runs its pods: the local control plane has no kubelet and no pod network,
  so the image itself is exercised by test_deploy*.py, not here).
- `helm upgrade --set reclaimDelay=5 --set replicas=3`: the Deployment rolls out with the
  new value in QUOTREE_RECLAIM_DELAY and three replicas.
- Uninstall as docs/deploy.md says (`make undeploy`, then `helm uninstall`): a pod left
  behind quotree's gate is released, and nothing of quotree is left: no webhook
  configuration, Deployment, Service, RBAC, namespace or release; the CRDs stay.
"""

from __future__ import annotations

import os
import subprocess
from types import ModuleType

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.cluster import REPO_ROOT
from tests.e2e.test_install_next_to_local_run import undeploy

CHART = REPO_ROOT / "charts" / "quotree"
RELEASE = "quotree"
NS = "quotree-system"
GATE = "quotree.io/admission"


def helm(cluster: ModuleType, *args: str) -> subprocess.CompletedProcess[str]:
    if not cluster.HELM.is_file():
        pytest.fail(f"{cluster.HELM} is missing: run `make cluster-build`")
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG)}
    return subprocess.run(
        [str(cluster.HELM), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _env(cluster: ModuleType) -> dict[str, str]:
    deployment = cluster.kubectl_json("-n", NS, "get", "deployment", "quotree-operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_install_upgrade_uninstall(cluster: ModuleType) -> None:
    # The operator's namespace belongs to the release: start without one made by other tests.
    cluster.kubectl("delete", "namespace", NS, "--ignore-not-found", "--timeout=120s")
    installed = helm(cluster, "install", RELEASE, str(CHART), "--wait", "--timeout", "3m")
    try:
        assert installed.returncode == 0, installed.stderr
        deployment = cluster.kubectl_json("-n", NS, "get", "deployment", "quotree-operator")
        assert deployment["status"].get("availableReplicas") == 2, deployment["status"]
        assert deployment["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            client = cluster.kubectl_json("get", kind, "quotree.io")["webhooks"][0]
            assert client["clientConfig"]["service"]["name"] == "quotree-webhooks"
        assert _env(cluster)["QUOTREE_RECLAIM_DELAY"] == "30"

        upgraded = helm(
            cluster,
            "upgrade",
            RELEASE,
            str(CHART),
            "--set",
            "reclaimDelay=5,replicas=3",
            "--wait",
            "--timeout",
            "3m",
        )
        assert upgraded.returncode == 0, upgraded.stderr
        deployment = cluster.kubectl_json("-n", NS, "get", "deployment", "quotree-operator")
        assert deployment["spec"]["replicas"] == 3
        assert deployment["status"].get("updatedReplicas") == 3, deployment["status"]
        assert _env(cluster)["QUOTREE_RECLAIM_DELAY"] == "5"

        # A pod behind quotree's gate, as the operator would leave it when it goes.
        s = k.suffix()
        ns = f"helm-{s}"
        gated = k.pod("waiting", ns, {"cpu": "1"})
        gated["spec"]["schedulingGates"] = [{"name": GATE}]
        k.apply(k.namespace(ns), gated)
    finally:
        undone = undeploy(cluster)
        uninstalled = helm(cluster, "uninstall", RELEASE, "--wait", "--timeout", "3m")
    assert undone.returncode == 0, undone.stderr
    assert uninstalled.returncode == 0, uninstalled.stderr
    try:
        released = cluster.kubectl_json("-n", ns, "get", "pod", "waiting")
        assert not released["spec"].get("schedulingGates"), released["spec"]
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        for name in ("quotree.io", "local.quotree.io"):
            assert cluster.kubectl("get", kind, name, check=False).returncode != 0, (kind, name)
    for kind, name in (("clusterrole", "quotree"), ("clusterrolebinding", "quotree")):
        assert cluster.kubectl("get", kind, name, check=False).returncode != 0, (kind, name)
    cluster.wait_until(
        lambda: cluster.kubectl("get", "namespace", NS, check=False).returncode != 0,
        120,
        f"namespace {NS} deleted",
    )
    assert helm(cluster, "status", RELEASE).returncode != 0
    assert cluster.kubectl("get", "crd", "elasticquotas.quotree.io", check=False).returncode == 0
