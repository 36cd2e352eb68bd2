"""The webhook process (docs/webhooks.md, "The webhook process") with the real operator.

The operator serves its webhooks from a child process that answers pod creations from a
copy of the operator's view: the copy must follow configuration changes, and a killed
child must be replaced (the operator stays up, logs one line, and creations are gated
again once the new child listens).
"""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import cluster as cluster_mod
from tests.e2e.operator_proc import OperatorProcess, start_operator
from tests.e2e.test_webhooks_rules import (
    GATE,
    QUOTA_LABEL,
    WEBHOOKS_READY,
    accepted,
    apply_file,
    operator_env,
    pod_manifest,
    quota_manifest,
    wait_known,
)

SERVES = re.compile(r"the webhook process (\d+) serves")


def dry_run_pod(namespace: str) -> dict[str, object] | None:
    """The pod as the API server would store it (webhooks applied), or None if refused."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    result = cluster_mod.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-",
        input=pod_manifest(name, namespace), check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    pod: dict[str, object] = json.loads(result.stdout)
    return pod


def charged(pod: dict[str, object] | None) -> str | None:
    """The quota the webhook charged the pod to, if it labelled and gated it."""
    if pod is None:
        return None
    labels = pod["metadata"].get("labels") or {}  # type: ignore[attr-defined]
    gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]  # type: ignore[attr-defined]
    if GATE not in gates:
        return None
    quota: str | None = labels.get(QUOTA_LABEL)
    return quota


def quota_text(name: str, namespace: str) -> str:
    return (
        "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {{name: {name}, namespace: {namespace}}}\n"
        'spec:\n  max: {cpu: "0"}\n'
    )


def child_pids(operator: OperatorProcess) -> list[int]:
    return [int(pid) for pid in SERVES.findall(operator.log_text())]


@pytest.fixture
def operator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    env = operator_env(tmp_path_factory.mktemp("webhook-pki"))
    proc = start_operator(env, log_name="operator-webhook-process")
    proc.wait_for_log(WEBHOOKS_READY, 60)
    try:
        yield proc
    finally:
        proc.stop()


def test_the_webhook_process_follows_the_configuration(
    operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    # No quota covers the namespace yet: a pod is left alone.
    assert charged(dry_run_pod(namespace)) is None
    suffix = uuid.uuid4().hex[:6]
    first = quota_text(f"first-{suffix}", namespace)
    accepted(apply_file(tmp_path, first))
    wait_known(first)
    cluster_mod.wait_until(
        lambda: charged(dry_run_pod(namespace)) == f"first-{suffix}",
        10,
        "pods charged to the new quota",
    )
    # A second quota with its home in the namespace: pods must now name one (ambiguous).
    second = quota_text(f"second-{suffix}", namespace)
    accepted(apply_file(tmp_path, second))
    wait_known(second)
    cluster_mod.wait_until(
        lambda: dry_run_pod(namespace) is None, 10, "unlabelled pods refused (two quotas)"
    )
    # The first goes: pods are charged to the second.
    cluster_mod.kubectl("-n", namespace, "delete", "elasticquota", f"first-{suffix}")
    cluster_mod.wait_until(
        lambda: charged(dry_run_pod(namespace)) == f"second-{suffix}",
        10,
        "pods charged to the remaining quota",
    )
    assert len(child_pids(operator)) == 1  # all of it answered by the one webhook process


def test_a_killed_webhook_process_is_replaced(
    operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    text = quota_text(f"q-{suffix}", namespace)
    accepted(apply_file(tmp_path, text))
    wait_known(text)
    cluster_mod.wait_until(
        lambda: charged(dry_run_pod(namespace)) == f"q-{suffix}", 10, "pods charged"
    )
    [child] = child_pids(operator)
    os.kill(child, signal.SIGKILL)
    operator.wait_for_log("the webhook process exited (killed by SIGKILL)", 10)
    cluster_mod.wait_until(lambda: len(child_pids(operator)) == 2, 20, "a new webhook process")
    assert operator.alive
    assert child_pids(operator)[1] != child
    # The new process has the operator's view: pods are charged again.
    assert charged(dry_run_pod(namespace)) == f"q-{suffix}"
    # Quota objects are still judged by the operator (passed on by the new process).
    parent = f"apiVersion: quotree.io/v1alpha1\nkind: Cohort\nmetadata: {{name: c-{suffix}}}\n"
    accepted(apply_file(tmp_path, parent + 'spec:\n  min: {cpu: "1"}\n'))
    output = apply_file(tmp_path, quota_manifest(f"big-{suffix}", namespace, f"c-{suffix}", "2"))
    assert output.returncode != 0
    assert 'admission webhook "elasticquotas-validate.quotree.io" denied' in output.stderr
    assert f"over c-{suffix}'s min of 1" in output.stderr, output.stderr
