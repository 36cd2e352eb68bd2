"""`make undeploy` (hack/undeploy.sh) strands no pod behind quotree's gate, no Cohort
behind its finalizer.

The image runs as the ServiceAccount with webhooks on; a quota with max 0 keeps pods
gated (one of them also carries a gate of someone else's, before ours). The container
stops where a cluster's undeploy would end the Deployment's pods. Then undeploy:
the webhook configurations are gone, no pod in the cluster keeps the quotree.io/admission
gate, the other gate stays, no Cohort keeps the quotree.io/in-use finalizer (the quota's
Cohort, deleted while the operator held it, is gone), no namespace keeps the
quotree.io/managed label, the ServiceAccount and its RBAC are gone, the CRDs and the
quota objects stay. The operator's namespace is gone before the module ends (later
modules make it again).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.container_proc import image_exists, sa_kubeconfig, start_container
from tests.e2e.test_webhooks_rules import WEBHOOKS_READY

ROOT = Path(__file__).resolve().parents[2]
GATE = "quotree.io/admission"
OTHER_GATE = "example.com/not-quotree"
IN_USE = "quotree.io/in-use"


def _gated_pods(cluster: ModuleType) -> list[str]:
    items = cluster.kubectl_json("get", "pods", "-A")["items"]
    return [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in items
        if any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or ())
    ]


def _finalizers(cluster: ModuleType, cohort: str) -> list[str]:
    finalizers: list[str] = (
        cluster.kubectl_json("get", "cohort", cohort)["metadata"].get("finalizers") or []
    )
    return finalizers


def _managed(cluster: ModuleType, ns: str) -> bool:
    labels = cluster.kubectl_json("get", "namespace", ns)["metadata"].get("labels") or {}
    return labels.get("quotree.io/managed") == "true"


def test_undeploy_removes_webhooks_first_and_releases_every_gate(
    cluster: ModuleType, tmp_path: Path
) -> None:
    if not image_exists():
        pytest.fail("the image is missing: run `make image` (make test/e2e build it first)")
    s = k.suffix()
    ns = f"undeploy-{s}"
    operator = start_container(
        sa_kubeconfig(tmp_path),
        {"QUOTREE_WEBHOOK_PORT": "19449"},
        log_name="operator-undeploy",
        ready=WEBHOOKS_READY,
        cert_dir=tmp_path / "pki",
    )
    try:
        held = f"held-{s}"
        k.apply(
            k.namespace(ns),
            k.cohort(held, min={"cpu": "0"}),
            k.quota(f"closed-{s}", ns, parent=held, min={"cpu": "0"}, max={"cpu": "0"}),
        )
        cluster.wait_until(
            lambda: k.status("eq", f"closed-{s}", ns), 30, "the operator to see the quota"
        )
        # The operator keeps its in-use finalizer on the Cohort (it has a child), and the
        # Cohort, deleted, stays: undeploy must take the finalizer off, or it stays for ever.
        cluster.wait_until(
            lambda: IN_USE in _finalizers(cluster, held), 30, f"{IN_USE} on Cohort {held}"
        )
        cluster.kubectl("delete", "cohort", held, "--wait=false")
        assert cluster.kubectl_json("get", "cohort", held)["metadata"].get("deletionTimestamp")
        # The operator labels the namespace within a decision round of seeing the quota
        # (docs/webhooks.md); pods created before that would not be gated.
        cluster.wait_until(
            lambda: _managed(cluster, ns), 30, f"the namespace {ns} to be labelled managed"
        )
        pods = [k.pod(f"p{i}", ns, {"cpu": "100m"}) for i in range(5)]
        for pod in pods:
            pod["spec"].pop("schedulingGates", None)  # the webhook adds ours
        pods[0]["spec"]["schedulingGates"] = [{"name": OTHER_GATE}]
        k.create(*pods)
        assert len([p for p in _gated_pods(cluster) if p.startswith(f"{ns}/")]) == 5
        # In a cluster, undeploy's step 2 deletes the Deployment and waits until its pods are
        # gone, so no operator runs during the later steps. This container is not the
        # Deployment's pod: stop it here, or it would label the namespace again after
        # step 4 removed the label (its namespace watch sees the removal).
        operator.stop()

        env = dict(os.environ)
        env["KUBECONFIG"] = str(cluster.KUBECONFIG)
        env["PATH"] = f"{cluster.KUBECTL.parent}{os.pathsep}{env['PATH']}"
        result = subprocess.run(
            [str(ROOT / "hack" / "undeploy.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        # Our 5 pods, and any gated pod an earlier module's namespace still holds while it
        # is being deleted (the cluster is shared by the session).
        released = re.search(
            r"no pod carries the quotree.io/admission gate \((\d+) released\)", result.stderr
        )
        assert released is not None, result.stderr
        assert int(released.group(1)) >= 5, result.stderr

        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            for name in ("quotree.io", "local.quotree.io"):
                gone = cluster.kubectl("get", kind, name, check=False)
                assert gone.returncode != 0, f"{kind} {name} is still there"
        assert _gated_pods(cluster) == []
        assert "no Cohort carries the quotree.io/in-use finalizer" in result.stderr
        cohorts = cluster.kubectl_json("get", "cohorts")["items"]
        assert not [c for c in cohorts if IN_USE in (c["metadata"].get("finalizers") or [])]
        assert held not in {c["metadata"]["name"] for c in cohorts}  # deleted, nothing holds it
        labelled = cluster.kubectl("get", "namespaces", "-l", "quotree.io/managed", "-o", "name")
        assert labelled.stdout.strip() == "", labelled.stdout
        first = cluster.kubectl_json("-n", ns, "get", "pod", "p0")
        assert first["spec"]["schedulingGates"] == [{"name": OTHER_GATE}]
        for args in (
            ("-n", "quotree-system", "get", "serviceaccount", "quotree"),
            ("get", "clusterrole", "quotree"),
            ("get", "clusterrolebinding", "quotree"),
        ):
            assert cluster.kubectl(*args, check=False).returncode != 0, args
        assert (
            cluster.kubectl("get", "crd", "elasticquotas.quotree.io", check=False).returncode == 0
        )
        assert k.status("eq", f"closed-{s}", ns) is not None
        # Pods are created ungated now: nothing waits for the (uninstalled) operator.
        late = k.pod("after", ns, {"cpu": "100m"})
        late["spec"].pop("schedulingGates")
        k.create(late)
        after = cluster.kubectl_json("-n", ns, "get", "pod", "after")
        assert not after["spec"].get("schedulingGates")
    finally:
        operator.stop()
        cluster.kubectl(
            "delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False
        )
        cluster.kubectl(
            "delete",
            "-k",
            str(ROOT / "manifests" / "access"),
            "--ignore-not-found",
            "--wait=false",
            check=False,
        )
        cluster.wait_until(
            lambda: (
                cluster.kubectl("get", "namespace", "quotree-system", check=False).returncode != 0
            ),
            120,
            "the namespace quotree-system to be gone",
        )
