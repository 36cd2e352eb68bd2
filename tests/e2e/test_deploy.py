"""The install path: manifests/ against the real API server, and the ServiceAccount's RBAC.

- `kubectl apply --dry-run=server -k manifests/` passes (every object is valid for this
  API server, the CRDs come from crds/ through kustomize, the image is set).
- `kubectl auth can-i --list` for the ServiceAccount equals the checked-in expectation
  (tests/e2e/fixtures/rbac-expected.txt): no wildcard verbs, Secrets only in its own
  namespace and only by name. The stories that prove these permissions are enough run in
  test_deploy_stories.py (the image, as this ServiceAccount).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e.container_proc import SERVICE_ACCOUNT

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "fixtures" / "rbac-expected.txt"
# One row of `kubectl auth can-i --list`: resource, [non-resource URLs], [names], [verbs].
ROW = re.compile(
    r"(?P<resource>[^[\s]*) ?\[(?P<urls>[^]]*)\] \[(?P<names>[^]]*)\] \[(?P<verbs>[^]]*)\]"
)


@pytest.fixture(scope="module")
def access(cluster: ModuleType) -> ModuleType:
    cluster.kubectl("apply", "-k", str(ROOT / "manifests" / "access"))
    return cluster


def test_manifests_pass_a_server_side_dry_run(access: ModuleType) -> None:
    result = access.kubectl(
        "apply", "--dry-run=server", "-k", str(ROOT / "manifests"), "-o", "json", check=False
    )
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)["items"]
    kinds = {item["kind"] for item in items}
    assert {
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    } <= kinds
    (deployment,) = [i for i in items if i["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "localhost/quotree:dev"
    assert deployment["spec"]["replicas"] == 2
    crds = {i["metadata"]["name"] for i in items if i["kind"] == "CustomResourceDefinition"}
    assert crds == {"cohorts.quotree.io", "elasticquotas.quotree.io", "resourceflavors.quotree.io"}


def _can_i(cluster: ModuleType, *where: str) -> list[str]:
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={SERVICE_ACCOUNT}", *where).stdout
    header, *rows = out.splitlines()
    assert header.split()[0] == "Resources", out
    return sorted(" ".join(row.split()) for row in rows if row.strip())


def test_service_account_permissions_are_exactly_the_expected(access: ModuleType) -> None:
    listing = {
        "cluster-wide (namespace default)": _can_i(access, "-n", "default"),
        "namespace quotree-system": _can_i(access, "-n", "quotree-system"),
    }
    text = "".join(
        f"# {where}\n" + "".join(f"{row}\n" for row in rows) for where, rows in listing.items()
    )
    assert text == EXPECTED.read_text(), (
        f"permissions of {SERVICE_ACCOUNT} changed; if intended, update {EXPECTED}:\n{text}"
    )
    for where, rows in listing.items():
        for row in rows:
            match = ROW.fullmatch(row)
            assert match, f"unexpected kubectl auth can-i row {row!r}"
            assert "*" not in match["verbs"].split(), f"{where}: wildcard verb in {row!r}"
            if match["resource"].startswith("secrets"):
                assert where == "namespace quotree-system", f"Secrets outside: {row!r}"
                assert match["names"] == "quotree-webhook-tls" or match["verbs"] == "create", row
