"""Only managed namespaces depend on quotree (docs/reference/pods.md, "System and managed
namespaces").

The operator (as its ServiceAccount, webhooks on) labels the namespaces its quotas cover
`quotree.io/managed: "true"`; the pod webhooks select by that label. Nobody else may set
or remove it. With the operator stopped, a pod in an unmanaged namespace is created as
usual and one in a managed namespace is refused fast with the webhook's error; after a
restart the managed namespace creates gated pods again; without its quota the namespace
loses the label.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from tests.e2e import kube_helpers as k
from tests.e2e.container_proc import sa_kubeconfig
from tests.e2e.operator_proc import start_operator
from tests.e2e.test_webhooks_rules import (
    WEBHOOKS_READY,
    accepted,
    apply_file,
    denied,
    pod_manifest,
    quota_manifest,
)

LABEL = "quotree.io/managed"
GATE = "quotree.io/admission"


def _labelled(cluster: ModuleType, name: str) -> str | None:
    labels = cluster.kubectl_json("get", "namespace", name)["metadata"].get("labels") or {}
    value: str | None = labels.get(LABEL)
    return value


def test_only_managed_namespaces_wait_for_the_operator(cluster: ModuleType, tmp_path: Path) -> None:
    s = k.suffix()
    managed, plain = f"managed-{s}", f"plain-{s}"
    env = {
        "KUBECONFIG": str(sa_kubeconfig(tmp_path)),
        "QUOTREE_WEBHOOK_PORT": "19452",
        "QUOTREE_CERT_DIR": str(tmp_path / "pki"),
        "QUOTREE_IDENTITY": f"e2e-managed-{s}",
    }
    operator = start_operator(env, log_name="operator-managed")
    procs = [operator]
    try:
        operator.wait_for_log(WEBHOOKS_READY, 60)
        k.apply(k.namespace(managed), k.namespace(plain))
        accepted(apply_file(tmp_path, quota_manifest(f"q-{s}", managed, cpu="0")))
        cluster.wait_until(lambda: _labelled(cluster, managed) == "true", 30, "the label")
        assert _labelled(cluster, plain) is None

        # Nobody but the operator sets or removes it (the admin is not the operator here).
        result = cluster.kubectl("label", "namespace", managed, f"{LABEL}-", check=False)
        denied(result, f"Namespace {managed}: label {LABEL} belongs to quotree")
        result = cluster.kubectl("label", "namespace", plain, f"{LABEL}=true", check=False)
        denied(result, f"Namespace {plain}: label {LABEL} belongs to quotree")
        # Other labels of a managed namespace stay the user's.
        accepted(cluster.kubectl("label", "namespace", managed, "team=blue", check=False))

        operator.kill()  # a crash: no cleanup
        started = time.monotonic()
        accepted(apply_file(tmp_path, pod_manifest("free", plain)))
        assert time.monotonic() - started < 5
        pod = cluster.kubectl_json("-n", plain, "get", "pod", "free")
        assert not pod["spec"].get("schedulingGates")
        started = time.monotonic()
        result = apply_file(tmp_path, pod_manifest("waits", managed))
        elapsed = time.monotonic() - started
        denied(result, 'failed calling webhook "pods-mutate.quotree.io"')
        assert elapsed < 10, f"refusal took {elapsed:.1f}s"
        # Nor can the label be dropped while the operator is down.
        result = cluster.kubectl("label", "namespace", managed, f"{LABEL}-", check=False)
        assert result.returncode != 0, result.stdout
        assert _labelled(cluster, managed) == "true"

        restarted = start_operator(env, log_name="operator-managed-2")
        procs.append(restarted)
        restarted.wait_for_log(WEBHOOKS_READY, 60)
        accepted(apply_file(tmp_path, pod_manifest("after", managed)))
        pod = cluster.kubectl_json("-n", managed, "get", "pod", "after")
        assert {"name": GATE} in pod["spec"]["schedulingGates"]

        # No quota covers it any more: the label goes.
        cluster.kubectl("-n", managed, "delete", "pod", "after", "--wait=false")
        cluster.kubectl("-n", managed, "delete", "elasticquota", f"q-{s}")
        cluster.wait_until(lambda: _labelled(cluster, managed) is None, 30, "the label to go")
    finally:
        for proc in procs:
            proc.stop()
        for name in (managed, plain):
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_pods_of_a_covered_namespace_are_gated_before_it_is_labelled(
    cluster: ModuleType, tmp_path: Path
) -> None:
    """Pods created in a namespace a quota covers but that is not labelled managed yet are
    gated and charged all the same, and only the operator may free them: the unlabelled
    namespaces' webhooks ask the engine which quota covers the namespace
    (configurations.py), not the label. Without them the pods would run uncounted, past
    their quota's max, or could be freed by anyone.

    The moment between a namespace appearing and the leader labelling it is short, so the
    test makes it last: another replica holds the leader Lease (a real Lease object, as a
    second replica would write it), so the operator under test is a standby. A standby
    answers the webhooks with the same view of the tree but never labels namespaces.
    """
    s = k.suffix()
    home, later, plain = f"home-{s}", f"later-{s}", f"plain-{s}"
    k.apply(k.namespace("quotree-system"))
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "quotree-operator", "namespace": "quotree-system"},
        "spec": {
            "holderIdentity": f"other-replica-{s}",
            "leaseDurationSeconds": 3600,
            "acquireTime": now,
            "renewTime": now,
        },
    }
    cluster.kubectl(
        "-n", "quotree-system", "delete", "lease", "quotree-operator", "--ignore-not-found"
    )
    cluster.kubectl("create", "-f", "-", input=json.dumps(lease))
    env = {
        "KUBECONFIG": str(sa_kubeconfig(tmp_path)),
        "QUOTREE_WEBHOOK_PORT": "19453",
        "QUOTREE_CERT_DIR": str(tmp_path / "pki"),
        "QUOTREE_IDENTITY": f"e2e-standby-{s}",
    }
    operator = start_operator(env, log_name="operator-standby", ready=WEBHOOKS_READY)
    try:
        operator.wait_for_log(WEBHOOKS_READY, 60)
        k.apply(k.namespace(home))
        quota = k.quota(f"q-{s}", home, min={"cpu": "0"}, max={"cpu": "0"})
        quota["spec"]["namespaces"] = [later]
        accepted(apply_file(tmp_path, json.dumps(quota)))
        both = "---\n".join(
            [f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {later}}}\n"]
            + [pod_manifest(f"p{i}", later) for i in range(3)]
        )
        # The standby learns of the quota through its watch a moment after the apply.
        time.sleep(2)
        accepted(apply_file(tmp_path, both))
        assert _labelled(cluster, later) is None  # nobody labelled it: the leader is elsewhere
        for i in range(3):
            pod = cluster.kubectl_json("-n", later, "get", "pod", f"p{i}")
            assert {"name": GATE} in (pod["spec"].get("schedulingGates") or []), pod["spec"]
            assert pod["metadata"]["labels"].get("quotree.io/quota-name") == f"q-{s}"
        # Nobody but the operator frees such a pod in that moment (pods-validate-unlabelled).
        freed = cluster.kubectl(
            "-n",
            later,
            "patch",
            "pod",
            "p0",
            "--type=json",
            "-p",
            '[{"op": "remove", "path": "/spec/schedulingGates"}]',
            check=False,
        )
        assert freed.returncode != 0, freed.stdout
        assert "only the quotree operator may remove the scheduling gate" in freed.stderr
        relabelled = cluster.kubectl(
            "-n",
            later,
            "label",
            "pod",
            "p1",
            "--overwrite",
            "quotree.io/quota-name=other",
            check=False,
        )
        assert relabelled.returncode != 0, relabelled.stdout
        assert "label quotree.io/quota-name belongs to quotree" in relabelled.stderr
        # A namespace no quota covers is left alone by the same webhook.
        k.apply(k.namespace(plain))
        accepted(apply_file(tmp_path, pod_manifest("free", plain)))
        pod = cluster.kubectl_json("-n", plain, "get", "pod", "free")
        assert not pod["spec"].get("schedulingGates"), pod["spec"]
        assert "quotree.io/quota-name" not in pod["metadata"]["labels"]
    finally:
        operator.stop()
        cluster.kubectl("-n", "quotree-system", "delete", "lease", "quotree-operator", check=False)
        for name in (home, later, plain):
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
