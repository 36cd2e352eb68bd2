"""A failed start-up is one line that says what is missing and how to fix it."""

from __future__ import annotations

import pytest

from quotree_main.startup import explain
from quotree_operator.kube_errors import CredentialsError, KubeError


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (CredentialsError("kubeconfig /x: Invalid kube-config file."), "set KUBECONFIG"),
        (KubeError(0, "list nodes: ClientConnectorError: refused"), "does not answer"),
        (KubeError(401, "list nodes: 401 Unauthorized"), "make a new one"),
        (KubeError(403, "list nodes: 403 nodes is forbidden"), "kubectl apply -k manifests/"),
        (KubeError(404, "list Cohort: 404 404 page not found"), "kubectl apply -f crds/"),
        (KubeError(404, "list ResourceFlavor: 404 page not found"), "kubectl apply -f crds/"),
        (KubeError(500, "list pods: 500 etcd\nleader changed"), "500 etcd leader changed"),
    ],
)
def test_one_line_that_names_the_fix(error: KubeError, says: str) -> None:
    line = explain(error)
    assert line.startswith("quotree cannot start: ")
    assert "\n" not in line
    assert says in line
    assert " ".join(str(error).split()) in line


def test_a_404_of_something_else_is_not_blamed_on_the_crds() -> None:
    assert "crds" not in explain(KubeError(404, "Lease quotree-system/x: 404 not found"))
