"""Installing quotree on a cluster where it also runs locally (`make run`) works.

A local operator writes its webhook configurations with a URL, named local.quotree.io;
`kubectl apply -k manifests/` then creates the installed operator's, with a Service, named
quotree.io, next to them (the API server refuses a webhook with both a URL and a Service,
which is what merging one into the other made). `hack/undeploy.sh` removes both, the
installed objects and the local run's configurations alike, and leaves no gated pod.
"""

from __future__ import annotations

import os
import subprocess
from types import ModuleType

from tests.e2e.cluster import REPO_ROOT
from tests.e2e.operator_proc import start_operator

WEBHOOKS_READY = "configurations quotree.io written"
KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
NAMESPACE = "quotree-system"


def _client_config(cluster: ModuleType, kind: str, name: str) -> dict[str, object]:
    configuration = cluster.kubectl_json("get", kind, name)
    client: dict[str, object] = configuration["webhooks"][0]["clientConfig"]
    return client


def undeploy(cluster: ModuleType) -> subprocess.CompletedProcess[str]:
    """`make undeploy`; once it succeeded, waits until the namespace quotree-system is gone
    (undeploy deletes it without waiting; the next module's operator needs it back, and a
    namespace being deleted takes no new objects)."""
    env = {**os.environ, "PATH": f"{cluster.KUBECTL.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(REPO_ROOT / "hack" / "undeploy.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if done.returncode == 0:
        cluster.wait_until(
            lambda: cluster.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0,
            120,
            f"the namespace {NAMESPACE} to be gone",
        )
    return done


def test_kubectl_apply_k_after_a_local_run(cluster: ModuleType) -> None:
    operator = start_operator(
        {"QUOTREE_WEBHOOK_PORT": "19471"}, log_name="operator-local-run", ready=WEBHOOKS_READY
    )
    installed = False
    try:
        for kind in KINDS:
            assert "url" in _client_config(cluster, kind, "local.quotree.io")
        result = cluster.kubectl("apply", "-k", str(REPO_ROOT / "manifests"), check=False)
        installed = True
        assert result.returncode == 0, result.stderr
        for kind in KINDS:
            local = _client_config(cluster, kind, "local.quotree.io")
            service = _client_config(cluster, kind, "quotree.io")
            assert sorted(k for k in local if k != "caBundle") == ["url"], local
            assert sorted(k for k in service if k != "caBundle") == ["service"], service
    finally:
        operator.stop()
        if installed:
            undone = undeploy(cluster)
            assert undone.returncode == 0, undone.stderr
    for kind in KINDS:
        for name in ("quotree.io", "local.quotree.io"):
            assert cluster.kubectl("get", kind, name, check=False).returncode != 0, (kind, name)
    deployment = cluster.kubectl("-n", "quotree-system", "get", "deployment", check=False)
    assert "quotree-operator" not in deployment.stdout
