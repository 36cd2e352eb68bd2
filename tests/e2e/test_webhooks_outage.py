"""While the operator is down: managed namespaces fail fast, kube-system does not; restart heals.

The webhook configurations stay in place when the operator stops (on purpose), so
the API server keeps calling a port nobody listens on: `failurePolicy: Fail`
turns that into a quick, clear refusal instead of ungated pods.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.e2e import cluster as cluster_mod
from tests.e2e.operator_proc import start_operator
from tests.e2e.test_webhooks_rules import (
    GATE,
    QUOTA_LABEL,
    WEBHOOKS_READY,
    accepted,
    apply_file,
    delete_webhook_configurations,
    operator_env,
    pod_manifest,
    quota_manifest,
    wait_known,
)


def test_operator_down_fails_fast_and_recovers(
    namespace: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    env = operator_env(tmp_path_factory.mktemp("webhook-pki"))
    operator = start_operator(env, log_name="operator-webhooks-outage")
    procs = [operator]
    suffix = uuid.uuid4().hex[:6]
    system_pod = f"e2e-outage-{suffix}"
    try:
        operator.wait_for_log(WEBHOOKS_READY, 60)
        text = quota_manifest(f"q-{suffix}", namespace)
        accepted(apply_file(tmp_path, text))
        wait_known(text)

        operator.kill()  # a crash: no cleanup at all
        started = time.monotonic()
        result = apply_file(tmp_path, pod_manifest("while-down", namespace))
        elapsed = time.monotonic() - started
        output = result.stdout + result.stderr
        assert result.returncode != 0, output
        assert 'failed calling webhook "pods-mutate.quotree.io"' in output, output
        assert "connection refused" in output, output
        assert elapsed < 10, f"refusal took {elapsed:.1f}s"

        # kube-system is outside the webhooks' namespaceSelector.
        accepted(apply_file(tmp_path, pod_manifest(system_pod, "kube-system")))

        # Restart: the same certificates and configurations come back; nothing to do by hand.
        restarted = start_operator(env, log_name="operator-webhooks-outage-2")
        procs.append(restarted)
        restarted.wait_for_log(WEBHOOKS_READY, 60)
        accepted(apply_file(tmp_path, pod_manifest("after-restart", namespace)))
        pod = cluster_mod.kubectl_json("-n", namespace, "get", "pod", "after-restart")
        assert pod["metadata"]["labels"][QUOTA_LABEL] == f"q-{suffix}"

        def admitted() -> bool:
            obj = cluster_mod.kubectl_json("-n", namespace, "get", "pod", "after-restart")
            return {"name": GATE} not in (obj["spec"].get("schedulingGates") or [])

        cluster_mod.wait_until(admitted, 60, "the pod created after the restart to be admitted")
    finally:
        for proc in procs:
            proc.stop()
        delete_webhook_configurations()
        cluster_mod.kubectl(
            "-n", "kube-system", "delete", "pod", system_pod, "--wait=false", check=False
        )
