"""Admission webhooks against the real control plane, through real `kubectl`.

One operator (webhooks on, its own port, certificates and namespace) serves the
whole module. YAML files live in tests/e2e/fixtures/webhooks/: `SUFFIX` and
`NAMESPACE` are filled in per test (Cohort names are cluster-wide), and a line
ending in `# FIX: value` is the broken line, whose fixed form is `key: value`.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e import cluster as cluster_mod
from tests.e2e.operator_proc import OperatorProcess, start_operator

FIXTURES = Path(__file__).parent / "fixtures" / "webhooks"
PORT = 19443
OPERATOR_NAMESPACE = "quotree-e2e-webhooks"
QUOTA_LABEL = "quotree.io/quota-name"
GATE = "quotree.io/admission"
_FIX = re.compile(r"^(?P<indent>\s*)(?P<key>[^:#]+):.*#\s*FIX:\s*(?P<good>.*)$")


def render(name: str, namespace: str, suffix: str, *, fixed: bool) -> str:
    text = (FIXTURES / name).read_text().replace("SUFFIX", suffix).replace("NAMESPACE", namespace)
    lines = []
    for line in text.splitlines():
        match = _FIX.match(line)
        fixed_line = f"{match['indent']}{match['key']}: {match['good']}" if match else line
        lines.append(fixed_line if fixed else line)
    return "\n".join(lines) + "\n"


def apply_file(tmp_path: Path, text: str) -> Any:
    path = tmp_path / f"manifest-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(text)
    return cluster_mod.kubectl("apply", "-f", str(path), check=False)


def delete_webhook_configurations() -> None:
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        cluster_mod.kubectl("delete", kind, "quotree.io", "--ignore-not-found", check=False)


def operator_env(cert_dir: Path) -> dict[str, str]:
    return {
        "QUOTREE_WEBHOOK_PORT": str(PORT),
        "QUOTREE_CERT_DIR": str(cert_dir),
        "QUOTREE_NAMESPACE": OPERATOR_NAMESPACE,
        "QUOTREE_IDENTITY": "e2e-webhooks",
        "QUOTREE_RECLAIM_DELAY": "300",
    }


WEBHOOKS_READY = "configurations quotree.io written"


@pytest.fixture(scope="module")
def operator(
    cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    cert_dir = tmp_path_factory.mktemp("webhook-pki")
    proc = start_operator(operator_env(cert_dir), log_name="operator-webhooks")
    try:
        proc.wait_for_log(WEBHOOKS_READY, 60)
        proc.cert_dir = cert_dir  # type: ignore[attr-defined]
        yield proc
    finally:
        proc.stop()
        delete_webhook_configurations()


@pytest.fixture
def suffix() -> str:
    return uuid.uuid4().hex[:6]


def wait_known(text: str) -> None:
    """Wait until the operator has seen every object of `text` (it wrote their status).

    The webhooks judge against the operator's view, which follows the API by watching.
    """
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        meta = doc["metadata"]
        where = ["-n", meta["namespace"]] if meta.get("namespace") else []
        kind = doc["kind"].lower()

        def seen(where: list[str] = where, kind: str = kind, name: str = meta["name"]) -> bool:
            obj = cluster_mod.kubectl_json(*where, "get", kind, name)
            return bool((obj.get("status") or {}).get("conditions"))

        cluster_mod.wait_until(seen, 30, f"the operator to see {kind} {meta['name']}")


def denied(result: Any, expected: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"kubectl apply should have failed:\n{output}"
    assert expected in output, output
    assert "Traceback" not in output


def accepted(result: Any) -> str:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


# ---------------------------------------------------------------- configuration rules

RULE_CASES = [
    # (file, files applied (fixed) first, expected denial)
    ("rule1-huge.yaml", [], "ElasticQuota eq-{s}: spec.min: cpu: '1e30' is out of range"),
    # The CRD's own CEL rule answers first (schema validation runs before validating webhooks),
    # with the same numbers; the webhook would say "ElasticQuota eq-{s}: min cpu 8 is above max 4".
    (
        "rule2-min-over-max.yaml",
        [],
        'The ElasticQuota "eq-{s}" is invalid: spec: Invalid value: min cpu 8 is above max 4',
    ),
    (
        "rule3-parent-is-quota.yaml",
        [],
        "ElasticQuota child-{s}: parent leaf-{s} is an ElasticQuota; only a Cohort can be a parent",
    ),
    ("rule4-cycle.yaml", ["chain"], "Cohort a-{s}: parent c-{s} would make a cycle"),
    (
        "rule5-min-sum.yaml",
        [],
        "ElasticQuota team-b-{s}: min cpu 30 would make the children of Cohort research-{s} "
        "need 50 in all, over research-{s}'s min of 40",
    ),
    (
        "rule5-cohort-min.yaml",
        ["rule5-min-sum.yaml"],
        "Cohort research-{s}: min cpu 30 is below the 40 its children's min add up to",
    ),
    (
        "rule6-name-taken.yaml",
        [],
        "Cohort shared-{s}: the name shared-{s} is already taken by ElasticQuota",
    ),
    (
        "rule8-move.yaml",
        ["rule5-min-sum.yaml"],
        "ElasticQuota team-a-{s}: min cpu 20 would make the children of Cohort small-{s} "
        "need 20 in all, over small-{s}'s min of 10",
    ),
]


def _chain(suffix: str) -> str:
    return "\n---\n".join(
        f"apiVersion: quotree.io/v1alpha1\nkind: Cohort\nmetadata: {{name: {n}-{suffix}}}\n"
        + (f"spec: {{parent: {p}-{suffix}}}\n" if p else "spec: {}\n")
        for n, p in (("a", None), ("b", "a"), ("c", "b"))
    )


@pytest.mark.parametrize(("name", "before", "expected"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule_denied_then_fixed_file_applies(
    operator: OperatorProcess,
    namespace: str,
    suffix: str,
    tmp_path: Path,
    name: str,
    before: list[str],
    expected: str,
) -> None:
    for earlier in before:
        text = (
            _chain(suffix) if earlier == "chain" else render(earlier, namespace, suffix, fixed=True)
        )
        accepted(apply_file(tmp_path, text))
        wait_known(text)
    broken = render(name, namespace, suffix, fixed=False)
    denied(apply_file(tmp_path, broken), expected.format(s=suffix))
    # Same answer on a server-side dry run, and it changed nothing.
    denied(
        cluster_mod.kubectl("apply", "--dry-run=server", "-f", "-", input=broken, check=False),
        expected.format(s=suffix),
    )
    accepted(apply_file(tmp_path, render(name, namespace, suffix, fixed=True)))


@pytest.mark.parametrize("order", ["tree-children-first.yaml", "tree-parents-first.yaml"])
def test_multi_document_file_in_either_order(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path, order: str
) -> None:
    output = accepted(apply_file(tmp_path, render(order, namespace, suffix, fixed=True)))
    if order == "tree-children-first.yaml":
        assert f"parent Cohort dept-{suffix} does not exist yet" in output
        assert f"parent Cohort org-{suffix} does not exist yet" in output
    # Parents first: the operator usually knows the parent by the time the child arrives, but
    # its view follows the API by watching, so a warning may still appear (docs/webhooks.md).
    quotas = cluster_mod.kubectl_json("-n", namespace, "get", "elasticquota", f"leaf-{suffix}")
    assert quotas["spec"]["parent"] == f"dept-{suffix}"


def test_flavor_rules_at_apply(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    org, flavor, team = f"fl-org-{suffix}", f"fl-a-{suffix}", f"fl-team-{suffix}"
    cohort = (
        "apiVersion: quotree.io/v1alpha1\nkind: Cohort\n"
        f"metadata: {{name: {org}}}\n"
        f'spec: {{flavors: [{{name: {flavor}, min: {{nvidia.com/gpu: "4"}}}}]}}\n'
    )
    # A flavor that does not exist yet: allowed, with a warning (like a missing parent).
    output = accepted(apply_file(tmp_path, cohort))
    assert f"ResourceFlavor {flavor} does not exist yet" in output
    wait_known(cohort)
    # Min sum per (flavor, resource): one line with the numbers.
    child = (
        "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {{name: {team}, namespace: {namespace}}}\n"
        f'spec: {{parent: {org}, flavors: [{{name: {flavor}, min: {{nvidia.com/gpu: "6"}}}}]}}\n'
    )
    denied(
        apply_file(tmp_path, child),
        f"ElasticQuota {team}: min nvidia.com/gpu@{flavor} 6 would make the children of "
        f"Cohort {org} need 6 in all, over {org}'s min of 4",
    )


BAD_SPECS = [
    ('{min: {cpu: "lots"}}', "spec.min.cpu"),
    ('{min: {cpu: "-1"}}', "spec.min.cpu"),
    ('{min: {cpu: "1e30"}}', "'1e30' is out of range"),
    ('{max: {memory: "1e30Gi"}}', "spec.max"),
    ('{minimum: {cpu: "1"}}', "minimum"),
    ('{min: "ten"}', "spec.min"),
    ("{parent: [a, b]}", "spec.parent"),
    ('{namespaces: "team-a"}', "spec.namespaces"),
]


@pytest.mark.parametrize(("spec", "expected"), BAD_SPECS, ids=[s for s, _ in BAD_SPECS])
def test_bad_input_refused_with_the_field(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path, spec: str, expected: str
) -> None:
    text = render("bad-input.yaml", namespace, suffix, fixed=False).replace("SPEC", spec)
    denied(apply_file(tmp_path, text), expected)


# ---------------------------------------------------------------- deletions


def wait_admitted_running(namespace: str, pod: str) -> None:
    def done() -> bool:
        obj = cluster_mod.kubectl_json("-n", namespace, "get", "pod", pod)
        gates = obj["spec"].get("schedulingGates") or []
        return not gates and obj.get("status", {}).get("phase") == "Running"

    cluster_mod.wait_until(done, 60, f"pod {namespace}/{pod} admitted and running")


def quota_manifest(name: str, namespace: str, parent: str | None = None, cpu: str = "4") -> str:
    parent_line = f"  parent: {parent}\n" if parent else ""
    return (
        "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {{name: {name}, namespace: {namespace}}}\n"
        f'spec:\n{parent_line}  min: {{cpu: "{cpu}"}}\n  max: {{cpu: "{cpu}"}}\n'
    )


def pod_manifest(name: str, namespace: str, labels: dict[str, str] | None = None) -> str:
    label_text = "".join(f'\n    {k}: "{v}"' for k, v in (labels or {}).items())
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        f"  labels:\n    app: e2e{label_text}\n"
        "spec:\n  containers:\n  - name: c\n    image: example.com/none\n"
        "    resources: {requests: {cpu: 100m}}\n"
    )


IN_USE = "quotree.io/in-use"


def wait_in_use(cohort: str) -> None:
    """Wait until the operator has put its in-use finalizer on `cohort` (it has children)."""

    def protected() -> bool:
        obj = cluster_mod.kubectl_json("get", "cohort", cohort)
        return IN_USE in (obj["metadata"].get("finalizers") or [])

    cluster_mod.wait_until(protected, 15, f"the finalizer {IN_USE} on Cohort {cohort}")


def gone(kind: str, name: str, namespace: str | None = None) -> bool:
    where = ["-n", namespace] if namespace else []
    result = cluster_mod.kubectl(*where, "get", kind, name, check=False)
    return result.returncode != 0 and "NotFound" in result.stderr


def test_a_cohort_deleted_with_children_stays_until_they_are_gone(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    """Rule 7: the deletion of a Cohort that has children is accepted with a warning; the
    Cohort stays (its in-use finalizer holds it, Terminating), its children keep working,
    and it goes once its last child is deleted."""
    text = render("tree-parents-first.yaml", namespace, suffix, fixed=True)
    accepted(apply_file(tmp_path, text))
    wait_known(text)
    dept, leaf = f"dept-{suffix}", f"leaf-{suffix}"
    wait_in_use(dept)
    output = accepted(cluster_mod.kubectl("delete", "cohort", dept, "--wait=false", check=False))
    assert f"Warning: Cohort {dept} stays until its children ({leaf}) are deleted or moved" in (
        output
    )
    held = cluster_mod.kubectl_json("get", "cohort", dept)["metadata"]
    assert held.get("deletionTimestamp")
    assert IN_USE in held["finalizers"]
    # Its child still admits: nothing changed for it.
    accepted(apply_file(tmp_path, pod_manifest("runner", namespace, {QUOTA_LABEL: leaf})))
    wait_admitted_running(namespace, "runner")
    assert not gone("cohort", dept)
    cluster_mod.kubectl("-n", namespace, "delete", "pod", "runner", "--grace-period=0")
    cluster_mod.wait_until(
        lambda: (
            cluster_mod.kubectl(
                "-n", namespace, "delete", "elasticquota", leaf, check=False
            ).returncode
            == 0
        ),
        15,
        "the ElasticQuota without pods to be deletable",
    )
    cluster_mod.wait_until(lambda: gone("cohort", dept), 10, f"Cohort {dept} to go")


def test_a_tree_listed_cohort_first_is_deleted_with_one_kubectl_delete(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    """`kubectl delete -f` deletes in file order: the Cohort before its two ElasticQuotas.
    It succeeds at once (the Cohort's deletion is accepted with a warning), and all three
    are gone within seconds."""
    text = render("tree-delete-cohort-first.yaml", namespace, suffix, fixed=True)
    path = tmp_path / "tree.yaml"
    path.write_text(text)
    accepted(cluster_mod.kubectl("apply", "-f", str(path), check=False))
    wait_known(text)
    org, a, b = (f"first-{part}-{suffix}" for part in ("org", "a", "b"))
    wait_in_use(org)
    output = accepted(cluster_mod.kubectl("delete", "-f", str(path), "--timeout=20s", check=False))
    assert f"Warning: Cohort {org} stays until its children ({a}, {b})" in output
    for deleted in (f'cohort.quotree.io "{org}"', f'elasticquota.quotree.io "{a}"'):
        assert f"{deleted} deleted" in output
    cluster_mod.wait_until(
        lambda: gone("cohort", org) and gone("eq", a, namespace) and gone("eq", b, namespace),
        5,
        "the Cohort and its ElasticQuotas to be gone",
    )


def test_a_whole_tree_is_deleted_with_one_kubectl_delete(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    """`kubectl delete -f` of the file that made a Cohort and its two ElasticQuotas (the
    Cohort after its children, as kubectl deletes in file order) succeeds at once."""
    text = render("tree-delete.yaml", namespace, suffix, fixed=True)
    path = tmp_path / "tree.yaml"
    path.write_text(text)
    accepted(cluster_mod.kubectl("apply", "-f", str(path), check=False))
    wait_known(text)
    output = accepted(cluster_mod.kubectl("delete", "-f", str(path), check=False))
    assert f'cohort.quotree.io "del-org-{suffix}" deleted' in output
    gone = cluster_mod.kubectl("get", "cohort", f"del-org-{suffix}", check=False)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr


HOLD = "e2e.quotree.io/hold"


def test_children_being_deleted_do_not_hold_their_cohort(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    """Children that another controller's finalizer keeps (a GitOps tool's, a foreground
    deletion's) are being deleted, not children: their Cohort goes in the same
    `kubectl delete -f`, while the operator's view still holds them."""
    text = render("tree-delete.yaml", namespace, suffix, fixed=True).replace(
        f"namespace: {namespace}}}", f"namespace: {namespace}, finalizers: [{HOLD}]}}"
    )
    path = tmp_path / "tree.yaml"
    path.write_text(text)
    accepted(cluster_mod.kubectl("apply", "-f", str(path), check=False))
    wait_known(text)
    try:
        output = accepted(
            cluster_mod.kubectl("delete", "-f", str(path), "--wait=false", check=False)
        )
        assert f'cohort.quotree.io "del-org-{suffix}" deleted' in output
    finally:
        for child in ("del-a", "del-b"):
            cluster_mod.kubectl(
                "-n", namespace, "patch", "elasticquota", f"{child}-{suffix}", "--type=merge",
                "-p", '{"metadata": {"finalizers": null}}', check=False,
            )  # fmt: skip


def test_quota_with_running_pods_cannot_be_deleted_but_its_namespace_can(
    operator: OperatorProcess, cluster: ModuleType, suffix: str, tmp_path: Path
) -> None:
    namespace = f"e2e-wh-nsdel-{suffix}"
    cluster_mod.kubectl("create", "namespace", namespace)
    try:
        text = quota_manifest(f"q-{suffix}", namespace)
        accepted(apply_file(tmp_path, text))
        wait_known(text)
        cluster_mod.wait_until(
            lambda: (
                cluster_mod.kubectl("-n", namespace, "get", "sa", "default", check=False).returncode
                == 0
            ),
            60,
            "default service account",
        )
        accepted(apply_file(tmp_path, pod_manifest("runner", namespace)))
        wait_admitted_running(namespace, "runner")
        result = cluster_mod.kubectl(
            "-n", namespace, "delete", "elasticquota", f"q-{suffix}", check=False
        )
        denied(
            result,
            f"ElasticQuota q-{suffix}: cannot delete an ElasticQuota with 1 admitted pods",
        )
        cluster_mod.kubectl("delete", "namespace", namespace, "--wait=false")
        cluster_mod.wait_until(
            lambda: cluster_mod.kubectl("get", "namespace", namespace, check=False).returncode != 0,
            120,
            f"namespace {namespace} to be deleted with its ElasticQuota",
        )
    finally:
        cluster_mod.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


# ---------------------------------------------------------------- pods


def test_deployment_pods_are_gated_and_labelled(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    # max 0: nothing is admitted, so the pods stay gated for us to look at.
    text = quota_manifest(f"q-{suffix}", namespace, cpu="0")
    accepted(apply_file(tmp_path, text))
    wait_known(text)
    deployment = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {namespace}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: c
        image: example.com/none
        resources: {{requests: {{cpu: 100m}}}}
"""
    accepted(apply_file(tmp_path, deployment))

    def pods() -> list[dict[str, Any]] | None:
        items = cluster_mod.kubectl_json("-n", namespace, "get", "pods", "-l", "app=web")["items"]
        return items if len(items) >= 2 else None

    for pod in cluster_mod.wait_until(pods, 60, "the Deployment's pods"):
        assert pod["metadata"]["labels"][QUOTA_LABEL] == f"q-{suffix}"
        assert {"name": GATE} in pod["spec"]["schedulingGates"]


def test_kube_system_pod_untouched(operator: OperatorProcess, suffix: str, tmp_path: Path) -> None:
    name = f"e2e-untouched-{suffix}"
    try:
        accepted(apply_file(tmp_path, pod_manifest(name, "kube-system")))
        pod = cluster_mod.kubectl_json("-n", "kube-system", "get", "pod", name)
        assert QUOTA_LABEL not in pod["metadata"]["labels"]
        assert not pod["spec"].get("schedulingGates")
    finally:
        cluster_mod.kubectl("-n", "kube-system", "delete", "pod", name, "--wait=false", check=False)


def test_pod_naming_another_namespaces_quota_refused(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    other = f"{namespace}-x"[:63]
    cluster_mod.kubectl("create", "namespace", other)
    try:
        for text in (
            quota_manifest(f"mine-{suffix}", namespace),
            quota_manifest(f"theirs-{suffix}", other),
        ):
            accepted(apply_file(tmp_path, text))
            wait_known(text)
        text = pod_manifest("p", namespace, {QUOTA_LABEL: f"theirs-{suffix}"})
        denied(
            apply_file(tmp_path, text),
            f"Pod {namespace}/p: ElasticQuota theirs-{suffix} does not cover namespace "
            f"{namespace} (quotas covering it: mine-{suffix})",
        )
    finally:
        cluster_mod.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_quota_label_of_admitted_pod_cannot_change(
    operator: OperatorProcess, namespace: str, suffix: str, tmp_path: Path
) -> None:
    text = quota_manifest(f"q-{suffix}", namespace)
    accepted(apply_file(tmp_path, text))
    wait_known(text)
    accepted(apply_file(tmp_path, pod_manifest("runner", namespace)))
    wait_admitted_running(namespace, "runner")
    pod = cluster_mod.kubectl_json("-n", namespace, "get", "pod", "runner")
    assert pod["metadata"]["labels"][QUOTA_LABEL] == f"q-{suffix}"
    # The admin credentials are the operator's too here: act as another user.
    result = cluster_mod.kubectl(
        "-n",
        namespace,
        "label",
        "pod",
        "runner",
        f"{QUOTA_LABEL}=elsewhere",
        "--overwrite",
        "--as=alice",
        "--as-group=system:masters",
        check=False,
    )
    denied(
        result,
        f"Pod {namespace}/runner: label {QUOTA_LABEL} belongs to quotree once the pod exists",
    )
    # Other labels stay the user's.
    result = cluster_mod.kubectl(
        "-n",
        namespace,
        "label",
        "pod",
        "runner",
        "team=blue",
        "--as=alice",
        "--as-group=system:masters",
        check=False,
    )
    accepted(result)


# ---------------------------------------------------------------- fuzzing the endpoint

_quantity = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
    st.sampled_from(["1", "500m", "40Gi", "1e30", "-1", "1.5Ti", "0.0001", "1E3", "9" * 40]),
    st.none(),
    st.booleans(),
)
_resources = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "bad name", "x" * 300]),
    _quantity,
    max_size=3,
)
_value = st.one_of(
    _resources,
    st.text(max_size=8),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=4), max_size=2),
)
_spec = st.dictionaries(
    st.sampled_from(
        [
            "parent",
            "min",
            "max",
            "sharedWeight",
            "lendingLimit",
            "borrowingLimit",
            "namespaces",
            "preemption",
            "unknown",
        ]
    ),
    _value,
    max_size=6,
)
_names = st.one_of(st.sampled_from(["a", "team-a", "x" * 300, "", "UPPER"]), st.text(max_size=10))


def _review(kind: str, operation: str, obj: Any, old: Any) -> dict[str, Any]:
    plural = "cohorts" if kind == "Cohort" else "elasticquotas"
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "quotree.io", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "quotree.io", "version": "v1alpha1", "resource": plural},
            "operation": operation,
            "userInfo": {"username": "fuzzer"},
            "object": obj,
            "oldObject": old,
            "dryRun": True,
        },
    }


def _post(context: ssl.SSLContext, path: str, review: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"https://127.0.0.1:{PORT}/{path}",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return response.status, json.loads(response.read())


def test_hypothesis_bodies_get_well_formed_answers(operator: OperatorProcess) -> None:
    context = ssl.create_default_context(cafile=str(operator.cert_dir / "ca.crt"))  # type: ignore[attr-defined]
    seen = {"allowed": 0, "denied": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        kind=st.sampled_from(["Cohort", "ElasticQuota"]),
        operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
        name=_names,
        namespace=st.one_of(st.none(), st.sampled_from(["team-a", ""]), st.text(max_size=6)),
        spec=st.one_of(_spec, st.none(), st.text(max_size=5), st.integers()),
        metadata_junk=st.booleans(),
    )
    def check(
        kind: str, operation: str, name: Any, namespace: Any, spec: Any, metadata_junk: bool
    ) -> None:
        metadata: Any = {"name": name, "namespace": namespace} if not metadata_junk else "junk"
        obj = {
            "apiVersion": "quotree.io/v1alpha1",
            "kind": kind,
            "metadata": metadata,
            "spec": spec,
        }
        review = _review(
            kind,
            operation,
            None if operation == "DELETE" else obj,
            obj if operation != "CREATE" else None,
        )
        path = "cohorts-validate" if kind == "Cohort" else "elasticquotas-validate"
        status, answer = _post(context, path, review)
        assert status == 200
        response = answer["response"]
        assert answer["kind"] == "AdmissionReview"
        assert response["uid"] == review["request"]["uid"]
        if response["allowed"]:
            seen["allowed"] += 1
        else:
            seen["denied"] += 1
            message = response["status"]["message"]
            assert message
            assert "Traceback" not in message
            assert "\n" not in message
            assert response["status"]["code"] != 500, message

    check()
    assert operator.alive
    assert seen["allowed"]
    assert seen["denied"]
    assert "Traceback" not in operator.log_text()
    # The process still answers real requests afterwards.
    mutating = cluster_mod.kubectl_json("get", "mutatingwebhookconfiguration", "local.quotree.io")
    assert base64.b64decode(mutating["webhooks"][0]["clientConfig"]["caBundle"]).startswith(
        b"-----BEGIN CERTIFICATE-----"
    )


IMPORT_DATA = Path(__file__).parents[1] / "unit" / "data" / "import"


@pytest.mark.parametrize(
    ("sample", "namespaces"),
    [
        ("kueue.yaml", ["research", "research-dev", "batch"]),
        ("koordinator.yaml", ["test"]),
        ("capacity-scheduling.yaml", ["test", "quota-a", "quota-b"]),
    ],
)
def test_imported_samples_are_accepted_and_valid(
    operator: OperatorProcess, sample: str, namespaces: list[str]
) -> None:
    """`kubectl quotree import SAMPLE | kubectl apply -f -`: the webhook accepts every
    converted object and the operator finds each valid."""
    for name in namespaces:
        cluster_mod.kubectl("create", "namespace", name, check=False)
    converted = subprocess.run(
        [sys.executable, "-m", "quotree_kubectl.cli", "import", str(IMPORT_DATA / sample)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert converted.returncode == 0, converted.stderr
    docs = [d for d in yaml.safe_load_all(converted.stdout) if d]
    try:
        accepted(cluster_mod.kubectl("apply", "-f", "-", input=converted.stdout, check=False))
        members = [d for d in docs if d["kind"] != "ResourceFlavor"]
        wait_known("---\n".join(yaml.safe_dump(d) for d in members))
        for doc in members:
            meta = doc["metadata"]
            where = ["-n", meta["namespace"]] if meta.get("namespace") else []
            obj = cluster_mod.kubectl_json(*where, "get", doc["kind"].lower(), meta["name"])
            valid = [c for c in obj["status"]["conditions"] if c["type"] == "Valid"]
            assert valid[0]["status"] == "True", (meta["name"], valid)
    finally:
        children_first = "---\n".join(yaml.safe_dump(d) for d in reversed(docs))
        cluster_mod.kubectl("delete", "-f", "-", "--ignore-not-found", input=children_first)
        for name in namespaces:  # gone before another sample uses the name
            cluster_mod.kubectl("delete", "namespace", name, "--timeout=60s", check=False)
