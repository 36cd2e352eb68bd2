"""Several trees (docs/reference/objects.md, "Several trees") against the real control plane.

An organisation tree (the default tree: a Cohort with the team's ElasticQuota) and a
project tree (`spec.tree: projects`) over the same namespace. The operator runs with its
webhooks, so plain pods are labelled for both trees and gated by the mutating webhook. A
pod that fits its team's quota but not its project's waits, with a Pending event that
names the project quota and its tree, and is admitted once the project quota has room.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

WEBHOOKS_READY = "configurations quotree.io written"
MANAGED = "quotree.io/managed"
QUOTA_LABEL = "quotree.io/quota-name"
PROJECT_LABEL = "quotree.io/quota-name.projects"


@pytest.fixture
def operator(cluster: ModuleType, tmp_path: Path) -> Iterator[OperatorProcess]:
    env = {
        "QUOTREE_WEBHOOK_PORT": "19457",
        "QUOTREE_CERT_DIR": str(tmp_path / "pki"),
        "QUOTREE_IDENTITY": f"e2e-forests-{k.suffix()}",
        "QUOTREE_RECLAIM_DELAY": "300",
    }
    proc = start_operator(env, log_name="operator-forests")
    try:
        proc.wait_for_log(WEBHOOKS_READY, 60)
        yield proc
    finally:
        proc.stop()
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            cluster.kubectl("delete", kind, "quotree.io", "--ignore-not-found", check=False)


def plain_pod(name: str, ns: str, cpu: str) -> dict[str, Any]:
    """A pod as a user writes it: no gate, no label (the mutating webhook adds them)."""
    obj = k.pod(name, ns, {"cpu": cpu})
    del obj["spec"]["schedulingGates"]
    return obj


def wait(cluster: ModuleType, operator: OperatorProcess, what: str, predicate: Any) -> Any:
    try:
        return cluster.wait_until(predicate, 60, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{operator.log_tail(40)}") from None


def test_a_pod_waits_for_its_project_quota_then_is_admitted(
    cluster: ModuleType, operator: OperatorProcess, namespace: str
) -> None:
    s = k.suffix()
    org, team, project = f"org-{s}", f"team-{s}", f"proj-{s}"
    k.apply(
        k.cohort(org, min={"cpu": "4"}, max={"cpu": "4"}),
        k.quota(team, namespace, parent=org, min={"cpu": "4"}),
        k.quota(project, namespace, tree="projects", max={"cpu": "1"}),
    )
    try:
        wait(
            cluster,
            operator,
            "the namespace to be managed",
            lambda: (
                (cluster.kubectl_json("get", "namespace", namespace)["metadata"].get("labels")).get(
                    MANAGED
                )
                == "true"
            ),
        )
        # `kubectl get eq` shows each quota's tree
        table = cluster.kubectl("get", "eq", "-n", namespace).stdout
        assert "TREE" in table.splitlines()[0]
        assert any(project in line and "projects" in line for line in table.splitlines())

        k.create(plain_pod("first", namespace, "1"))
        first = cluster.kubectl_json("-n", namespace, "get", "pod", "first")
        assert first["metadata"]["labels"][QUOTA_LABEL] == team
        assert first["metadata"]["labels"][PROJECT_LABEL] == project
        wait(
            cluster,
            operator,
            "the first pod to be admitted",
            lambda: [p["metadata"]["name"] for p in k.admitted_pods(namespace)] == ["first"],
        )

        # The second pod fits the team (2 of 4 cpu) but not the project (max 1).
        k.create(plain_pod("second", namespace, "1"))
        expected = f"does not fit in ElasticQuota {project} (tree projects): cpu: used 1"

        def pending_event() -> list[str]:
            return [
                e["message"]
                for e in k.events(namespace, "Pending")
                if e["involvedObject"]["name"] == "second" and expected in e["message"]
            ]

        messages = wait(cluster, operator, "a Pending event naming the project", pending_event)
        assert messages[0].startswith(expected), messages
        second = cluster.kubectl_json("-n", namespace, "get", "pod", "second")
        assert k.gated(second)

        def counts(name: str) -> tuple[Any, Any, Any]:
            status = k.status("eq", name, namespace)
            return status.get("admittedPods"), status.get("pendingPods"), status.get("used")

        # Each quota's status counts the pods charged to it, in its own tree.
        wait(
            cluster,
            operator,
            "both quotas to count one admitted and one pending pod",
            lambda: counts(project) == counts(team) == (1, 1, {"cpu": "1"}),
        )

        # The project gets room: the pod is admitted.
        k.apply(k.quota(project, namespace, tree="projects", max={"cpu": "2"}))
        wait(
            cluster,
            operator,
            "the second pod to be admitted",
            lambda: (
                sorted(p["metadata"]["name"] for p in k.admitted_pods(namespace))
                == ["first", "second"]
            ),
        )
        wait(
            cluster,
            operator,
            "both trees to show the second pod in their status",
            lambda: (
                k.status("eq", project, namespace).get("used") == {"cpu": "2"}
                and k.status("coh", org).get("used") == {"cpu": "2"}
            ),
        )
    finally:
        # The namespace fixture and the module's hygiene remove the rest (Cohorts last).
        cluster.kubectl("-n", namespace, "delete", "pods", "--all", "--wait=false", check=False)
