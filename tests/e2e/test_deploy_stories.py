"""The operator stories and webhook rules again, run by the image as its ServiceAccount.

One container of the image built by `make image` (container_proc.py: host network, UID
65532, read-only root, no capabilities), authenticated with a TokenRequest token of
`system:serviceaccount:quotree-system:quotree` and only the RBAC of manifests/access.
Webhooks are on, so both the operator's and the webhooks' API calls run with exactly
those permissions: any call the RBAC misses fails a story (and shows in the log, checked
at the end for `403`). The tests are the ones of test_operator_stories.py and
test_webhooks_rules.py, imported so that they run here with this module's `operator`.

Because the operator is no longer the admin, the admin's kubectl is checked like any
user's: it cannot remove a pod's admission gate (`make run` runs the same way).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e import cluster as cluster_mod
from tests.e2e import kube_helpers as k
from tests.e2e.container_proc import (
    SERVICE_ACCOUNT,
    ContainerOperator,
    image_exists,
    sa_kubeconfig,
    start_container,
)
from tests.e2e.test_operator_stories import (  # noqa: F401  (run here, with our operator)
    RECLAIM_DELAY,
    objects,
    test_capacity_story_1_borrowing_and_reclaim_of_lent_min,
    test_capacity_story_2_preemption_by_priority_within_a_quota,
    test_koordinator_runtime_example,
    test_kueue_hierarchical_cohort_with_borrowing_limit_zero,
)
from tests.e2e.test_webhooks_rules import (  # noqa: F401
    WEBHOOKS_READY,
    accepted,
    apply_file,
    denied,
    pod_manifest,
    quota_manifest,
    suffix,
    test_a_cohort_deleted_with_children_stays_until_they_are_gone,
    test_deployment_pods_are_gated_and_labelled,
    test_kube_system_pod_untouched,
    test_quota_label_of_admitted_pod_cannot_change,
    test_quota_with_running_pods_cannot_be_deleted_but_its_namespace_can,
    test_rule_denied_then_fixed_file_applies,
    wait_known,
)

PORT = 19444
GATE = "quotree.io/admission"


@pytest.fixture(scope="module")
def operator(
    cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContainerOperator]:
    if not image_exists():
        pytest.fail("the image is missing: run `make image` (make test/e2e build it first)")
    k.priority_classes()
    workdir = tmp_path_factory.mktemp("deploy")
    proc = start_container(
        sa_kubeconfig(workdir),
        {"QUOTREE_RECLAIM_DELAY": RECLAIM_DELAY, "QUOTREE_WEBHOOK_PORT": str(PORT)},
        log_name="operator-container",
        cert_dir=workdir / "pki",
    )
    try:
        proc.wait_for_log(WEBHOOKS_READY, 60)
        yield proc
    finally:
        alive = proc.alive
        proc.stop()
    assert alive, "the operator container died during the stories\n" + proc.log_tail()
    log = proc.log_text()
    # RBAC denials say `... is forbidden: User "<name>" cannot <verb> ...` (a 403 for a
    # namespace being deleted says "unable to create new content" and is no RBAC matter).
    refused = [line for line in log.splitlines() if f'forbidden: User "{SERVICE_ACCOUNT}"' in line]
    assert not refused, "the ServiceAccount was refused a call:\n" + "\n".join(refused[:20])


def test_the_operator_is_the_service_account(operator: ContainerOperator) -> None:
    assert f"the operator is {SERVICE_ACCOUNT}" in operator.log_text(), operator.log_tail()


def test_admin_cannot_remove_the_gate(
    operator: ContainerOperator,
    namespace: str,
    suffix: str,  # noqa: F811  (the imported fixture)
    tmp_path: Path,
) -> None:
    # max 0: the pod stays gated; the admin (not the operator any more) tries to admit it.
    text = quota_manifest(f"q-{suffix}", namespace, cpu="0")
    accepted(apply_file(tmp_path, text))
    wait_known(text)
    accepted(apply_file(tmp_path, pod_manifest("waiting", namespace)))
    pod = cluster_mod.kubectl_json("-n", namespace, "get", "pod", "waiting")
    assert {"name": GATE} in pod["spec"]["schedulingGates"]
    patch = json.dumps({"spec": {"schedulingGates": []}})
    result = cluster_mod.kubectl(
        "-n", namespace, "patch", "pod", "waiting", "--type=merge", "-p", patch, check=False
    )
    denied(result, f"Pod {namespace}/waiting: only the quotree operator may remove the")
