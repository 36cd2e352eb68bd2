"""The webhook layer without a cluster: decisions, Kopf handlers, configurations.

Handlers are called the way Kopf calls them (keyword arguments, a `kopf.Patch`,
a `warnings` list); the engine is a real `quotree.Engine` fed configurations.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kopf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotree import ADMISSION_GATE, QUOTA_LABEL, STANDING_LABEL, Engine, PodFacts, parse_member
from quotree.models import IN_USE_FINALIZER
from quotree.resolution import never_gated
from quotree_operator.kube_errors import KubeError
from quotree_webhooks import configurations, decisions, handlers
from quotree_webhooks.settings import WebhookSettings, WebhookState
from tests.unit.objects import cohort, engine_with, quota
from tests.unit.objects import user_pod as pod
from tests.unit.operator.fake_kube import FakeKube

OPERATOR = "system:serviceaccount:quotree-system:quotree"


@pytest.fixture
def tree() -> Engine:
    """research (min cpu 40) with team-a and team-b (min 20 each); ops on top level."""
    return engine_with(
        cohort("research", min={"cpu": "40"}),
        quota("team-a", "team-a", "research", min={"cpu": "20"}, namespaces=["shared"]),
        quota("team-b", "team-b", "research", min={"cpu": "20"}, namespaces=["shared"]),
        quota("ops", "ops"),
    )


def admit_pod(engine: Engine, namespace: str, name: str) -> None:
    engine.observe_pod(
        PodFacts(
            namespace=namespace,
            name=name,
            request={"cpu": 100},
            node_name="node-1",
            phase="Running",
        )
    )


# ---------------------------------------------------------------- Cohorts / ElasticQuotas


def test_api_md_example_message(tree: Engine) -> None:
    verdict = decisions.review_member(
        tree,
        "UPDATE",
        quota("team-b", "team-b", "research", min={"cpu": "30"}),
        quota("team-b", "team-b", "research", min={"cpu": "20"}),
    )
    assert not verdict.allowed
    assert verdict.message == (
        "ElasticQuota team-b: min cpu 30 would make the children of Cohort research need 50 "
        "in all, over research's min of 40"
    )


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            quota("q", "q", min={"cpu": "abc"}),
            "ElasticQuota q: spec.min: cpu: 'abc' is not a quantity",
        ),
        (
            quota("q", "q", min={"cpu": "1e30"}),
            "ElasticQuota q: spec.min: cpu: '1e30' is out of range",
        ),
        (
            quota("q", "q", max={"memory": "-1Gi"}),
            "ElasticQuota q: spec.max: memory: '-1Gi' is negative",
        ),
        (quota("q", "q", minimum={"cpu": "1"}), "ElasticQuota q: spec.minimum: unknown field"),
        (cohort("c", min="lots"), "Cohort c: spec.min: must be an object, not 'lots'"),
        (
            quota("q", "q", min={"cpu": "2"}, max={"cpu": "1"}),
            "ElasticQuota q: min cpu 2 is above max 1",
        ),
        (quota("q", "q", "team-a"), "ElasticQuota q: parent team-a is an ElasticQuota"),
        (
            cohort("team-a"),
            "Cohort team-a: the name team-a is already taken by ElasticQuota team-a/team-a",
        ),
        (cohort("research", "research"), "Cohort research: parent research is the object itself"),
        (
            quota("q", "q", "research", min={"cpu": "1"}),
            "need 41 in all, over research's min of 40",
        ),
    ],
)
def test_rule_denials(tree: Engine, obj: dict[str, Any], expected: str) -> None:
    verdict = decisions.review_member(tree, "CREATE", obj, None)
    assert not verdict.allowed
    assert expected in verdict.message
    assert "\n" not in verdict.message


def test_cycle_is_denied() -> None:
    engine = engine_with(cohort("a"), cohort("b", "a"), cohort("c", "b"))
    verdict = decisions.review_member(engine, "UPDATE", cohort("a", "c"), cohort("a"))
    assert not verdict.allowed
    assert "parent c would make a cycle (a -> c -> b -> a)" in verdict.message


def test_cohort_min_below_children_denied(tree: Engine) -> None:
    verdict = decisions.review_member(
        tree, "UPDATE", cohort("research", min={"cpu": "25"}), cohort("research", min={"cpu": "40"})
    )
    assert not verdict.allowed
    assert (
        verdict.message
        == "Cohort research: min cpu 25 is below the 40 its children's min add up to"
    )


def test_missing_parent_allowed_with_warning(tree: Engine) -> None:
    verdict = decisions.review_member(tree, "CREATE", quota("q", "q", "nowhere"), None)
    assert verdict.allowed
    assert verdict.warnings == [
        "ElasticQuota q: parent Cohort nowhere does not exist yet; "
        "the node stays inactive until it does"
    ]


def test_move_to_a_parent_with_room_allowed(tree: Engine) -> None:
    tree.set_config(parse_member(cohort("dev", min={"cpu": "20"})))
    old = quota("team-a", "team-a", "research", min={"cpu": "20"}, namespaces=["shared"])
    new = quota("team-a", "team-a", "dev", min={"cpu": "20"}, namespaces=["shared"])
    assert decisions.review_member(tree, "UPDATE", new, old).allowed
    new["spec"]["min"] = {"cpu": "21"}
    assert not decisions.review_member(tree, "UPDATE", new, old).allowed


def test_metadata_only_update_always_allowed() -> None:
    # Even when the stored spec is invalid (webhook bypassed), finalizers can come off.
    engine = Engine()
    old = quota("q", "q", min={"cpu": "-1"})
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    assert decisions.review_member(engine, "UPDATE", new, old).allowed
    new["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    new["spec"]["min"] = {"cpu": "-2"}
    assert decisions.review_member(engine, "UPDATE", new, old).allowed


def test_delete_cohort_with_children_denied(tree: Engine) -> None:
    verdict = decisions.review_member(tree, "DELETE", None, cohort("research", min={"cpu": "40"}))
    assert not verdict.allowed
    assert verdict.message == (
        "Cohort research: cannot delete a Cohort that has children (team-a, team-b); "
        "move or delete them first"
    )
    assert decisions.review_member(tree, "DELETE", None, quota("ops", "ops")).allowed


def test_delete_cohort_with_children_and_the_in_use_finalizer_warns(tree: Engine) -> None:
    """The operator's finalizer holds the Cohort while it has children: the deletion is
    accepted and says so; without the finalizer (not written yet) it is refused."""
    old = cohort("research", min={"cpu": "40"})
    old["metadata"]["finalizers"] = ["example.com/other", IN_USE_FINALIZER]
    verdict = decisions.review_member(tree, "DELETE", None, old)
    assert verdict.allowed
    assert verdict.warnings == [
        "Cohort research stays until its children (team-a, team-b) are deleted or moved"
    ]
    old["metadata"]["finalizers"] = ["example.com/other"]
    assert not decisions.review_member(tree, "DELETE", None, old).allowed


def test_a_child_only_the_webhook_knows_of_does_not_make_the_finalizer_hold(
    tree: Engine,
) -> None:
    """The operator takes the finalizer off once its view shows no child: a child created a
    moment ago (allowed here, not yet in that view) would not keep the Cohort, so its
    deletion is refused, as without the finalizer."""
    recent = decisions.RecentlyAllowed()
    recent.remember(parse_member(quota("team-c", "team-c", "research")))
    old = cohort("research", min={"cpu": "40"})
    old["metadata"]["finalizers"] = [IN_USE_FINALIZER]
    verdict = decisions.review_member(
        tree, "DELETE", None, old, recent=recent, leaving={"team-a", "team-b"}
    )
    assert not verdict.allowed
    assert "cannot delete a Cohort that has children (team-c)" in verdict.message
    held = decisions.review_member(tree, "DELETE", None, old, recent=recent, leaving={"team-a"})
    assert held.allowed
    assert held.warnings == [
        "Cohort research stays until its children (team-b, team-c) are deleted or moved"
    ]


def test_delete_quota_with_admitted_pods(tree: Engine) -> None:
    admit_pod(tree, "ops", "web-1")
    old = quota("ops", "ops")
    verdict = decisions.review_member(tree, "DELETE", None, old)
    assert not verdict.allowed
    assert "ElasticQuota ops: cannot delete an ElasticQuota with 1 admitted pods" in verdict.message
    assert decisions.review_member(tree, "DELETE", None, old, namespace_deleting=True).allowed
    # A same-named object the tree does not hold (another namespace) carries nothing.
    assert decisions.review_member(tree, "DELETE", None, quota("ops", "elsewhere")).allowed


# ---------------------------------------------------------------- pods


def test_pod_gets_label_and_gate(tree: Engine) -> None:
    mutation = decisions.review_pod_create(tree, pod("team-a"), "team-a")
    assert mutation.denied is None
    assert mutation.labels == {QUOTA_LABEL: "team-a"}
    assert mutation.gates == [{"name": ADMISSION_GATE}]


def test_pod_gate_appended_to_existing_gates(tree: Engine) -> None:
    obj = pod("team-a", schedulingGates=[{"name": "example.com/other"}])
    mutation = decisions.review_pod_create(tree, obj, "team-a")
    assert mutation.gates == [{"name": "example.com/other"}, {"name": ADMISSION_GATE}]


def test_pod_user_capacity_label_removed(tree: Engine) -> None:
    obj = pod("team-a", labels={STANDING_LABEL: "in-quota", QUOTA_LABEL: "team-a"})
    mutation = decisions.review_pod_create(tree, obj, "team-a")
    assert mutation.labels == {STANDING_LABEL: None}


def test_pod_bound_at_creation_labelled_not_gated(tree: Engine) -> None:
    mutation = decisions.review_pod_create(tree, pod("team-a", nodeName="node-1"), "team-a")
    assert mutation.labels == {QUOTA_LABEL: "team-a"}
    assert mutation.gates is None


@pytest.mark.parametrize(
    "namespace", ["kube-system", "kube-public", "kube-node-lease", "quotree-system"]
)
def test_system_pods_untouched(namespace: str) -> None:
    engine = engine_with(quota("sys", namespace, namespaces=[namespace]))
    mutation = decisions.review_pod_create(engine, pod(namespace), namespace, {"quotree-system"})
    assert not mutation.changes
    assert mutation.denied is None


def test_unmanaged_namespace_untouched(tree: Engine) -> None:
    assert not decisions.review_pod_create(tree, pod("elsewhere"), "elsewhere").changes


def test_pod_naming_another_namespaces_quota_denied(tree: Engine) -> None:
    mutation = decisions.review_pod_create(
        tree, pod("team-a", labels={QUOTA_LABEL: "ops"}), "team-a"
    )
    assert mutation.denied == (
        "Pod team-a/p: ElasticQuota ops does not cover namespace team-a "
        "(quotas covering it: team-a)"
    )


def test_ambiguous_namespace_denied_and_label_resolves(tree: Engine) -> None:
    mutation = decisions.review_pod_create(tree, pod("shared"), "shared")
    assert mutation.denied is not None
    assert "covered by several ElasticQuotas (team-a, team-b)" in mutation.denied
    labelled = decisions.review_pod_create(
        tree, pod("shared", labels={QUOTA_LABEL: "team-b"}), "shared"
    )
    assert labelled.denied is None
    assert labelled.labels == {}
    assert labelled.gates == [{"name": ADMISSION_GATE}]


def test_generate_name_pod_described() -> None:
    obj = {"metadata": {"generateName": "web-", "namespace": "n"}}
    assert decisions.describe_pod(obj) == "Pod n/web-*"


def test_pod_label_change_only_by_operator() -> None:
    old = pod("team-a", labels={QUOTA_LABEL: "team-a"})
    new = pod("team-a", labels={QUOTA_LABEL: "team-b"})
    reason = decisions.review_pod_update(old, new, "alice", {OPERATOR})
    assert reason is not None
    assert reason.startswith(
        "Pod team-a/p: label quotree.io/quota-name belongs to quotree once the pod exists and "
        "only the quotree operator may change it (was 'team-a', now 'team-b'; you are alice)"
    )
    assert decisions.review_pod_update(old, new, OPERATOR, {OPERATOR}) is None
    removed = pod("team-a", labels={})
    assert "(was 'team-a', now unset" in (
        decisions.review_pod_update(old, removed, "bob", {OPERATOR}) or ""
    )
    added = pod("team-a", labels={QUOTA_LABEL: "team-a", "quotree.io/preemptible": "false"})
    assert "label quotree.io/preemptible" in (
        decisions.review_pod_update(old, added, "bob", set()) or ""
    )


def test_pod_other_changes_allowed() -> None:
    old = pod("team-a", labels={QUOTA_LABEL: "team-a"}, schedulingGates=[{"name": ADMISSION_GATE}])
    new = pod(
        "team-a",
        labels={QUOTA_LABEL: "team-a", "app": "web"},
        schedulingGates=[{"name": ADMISSION_GATE}],
    )
    assert decisions.review_pod_update(old, new, "alice", {OPERATOR}) is None


def test_pod_gate_removal_only_by_operator() -> None:
    old = pod("team-a", schedulingGates=[{"name": ADMISSION_GATE}])
    new = pod("team-a", schedulingGates=[])
    reason = decisions.review_pod_update(old, new, "alice", {OPERATOR})
    assert reason is not None
    assert "only the quotree operator may remove the scheduling gate quotree.io/admission" in reason
    assert decisions.review_pod_update(old, new, OPERATOR, {OPERATOR}) is None


# ---------------------------------------------------------------- Kopf handlers


SETTINGS = WebhookSettings(
    never_gated=never_gated("quotree-system"),
    host="127.0.0.1",
    port=9443,
    cert_dir=Path("/nowhere"),
)


def memo_for(engine: Engine | None, **state: Any) -> SimpleNamespace:
    """Kopf's memo as the entry point fills it (no state at all before it has loaded)."""
    webhooks = None if engine is None else WebhookState(engine, SETTINGS, **state)
    return SimpleNamespace(quotree=SimpleNamespace(webhooks=webhooks))


def member_kwargs(operation: str, new: Any, old: Any, memo: Any, **extra: Any) -> dict[str, Any]:
    body = kopf.Body(new if new is not None else old)
    return {
        "body": body,
        "operation": operation,
        "new": None if new is None else kopf.Body(new),
        "old": None if old is None else kopf.Body(old),
        "userinfo": {"username": "alice"},
        "warnings": [],
        "memo": memo,
        "dryrun": False,
        **extra,
    }


async def test_handler_denies_with_one_line(tree: Engine) -> None:
    kwargs = member_kwargs("CREATE", quota("q", "q", min={"cpu": "1e30"}), None, memo_for(tree))
    with pytest.raises(kopf.AdmissionError) as info:
        await handlers.validate_elasticquota(**kwargs)
    assert info.value.code == 403
    assert str(info.value).startswith("ElasticQuota q: spec.min: cpu: '1e30' is out of range")


async def test_handler_warns_on_missing_parent_and_does_not_touch_the_engine(tree: Engine) -> None:
    before = dict(tree.tree.configs())
    for dryrun in (False, True):
        kwargs = member_kwargs(
            "CREATE", cohort("new", "nowhere"), None, memo_for(tree), dryrun=dryrun
        )
        await handlers.validate_cohort(**kwargs)
        assert kwargs["warnings"] == [
            "Cohort new: parent Cohort nowhere does not exist yet; "
            "the node stays inactive until it does"
        ]
    assert dict(tree.tree.configs()) == before


async def test_handler_delete_quota_namespace_controller_fallback(tree: Engine) -> None:
    admit_pod(tree, "ops", "web-1")
    memo = memo_for(tree)
    assert memo.quotree.webhooks.api is None  # no API: the requester's identity decides
    kwargs = member_kwargs("DELETE", None, quota("ops", "ops"), memo)
    with pytest.raises(kopf.AdmissionError, match="1 admitted pods"):
        await handlers.validate_elasticquota(**kwargs)
    kwargs["userinfo"] = {"username": handlers.NAMESPACE_CONTROLLER}
    await handlers.validate_elasticquota(**kwargs)


async def test_handler_delete_cohort_whose_children_are_leaving(tree: Engine) -> None:
    """`kubectl delete -f` of a whole tree: the children are deleted (or being deleted)
    just before their Cohort, while the tree still shows them; the API says they go."""
    api = FakeKube()
    memo = memo_for(tree, api=api)
    old = cohort("research", min={"cpu": "40"})
    api.leaving = {"team-a"}
    kwargs = member_kwargs("DELETE", None, old, memo)
    with pytest.raises(kopf.AdmissionError, match=r"has children \(team-b\)"):
        await handlers.validate_cohort(**kwargs)
    api.leaving = {"team-a", "team-b"}
    await handlers.validate_cohort(**member_kwargs("DELETE", None, old, memo))


async def test_handler_delete_cohort_in_use_is_allowed_with_a_warning(tree: Engine) -> None:
    """`kubectl delete -f` of a file that lists the Cohort first: its children are not yet
    being deleted, and the Cohort carries the in-use finalizer: accepted, with a warning
    that names the children the API does not show leaving."""
    api = FakeKube()
    api.leaving = {"team-a"}
    memo = memo_for(tree, api=api)
    old = cohort("research", min={"cpu": "40"})
    refused = member_kwargs("DELETE", None, old, memo)
    with pytest.raises(kopf.AdmissionError, match=r"has children \(team-b\)"):
        await handlers.validate_cohort(**refused)
    old["metadata"]["finalizers"] = [IN_USE_FINALIZER]
    kwargs = member_kwargs("DELETE", None, old, memo)
    await handlers.validate_cohort(**kwargs)
    assert kwargs["warnings"] == [
        "Cohort research stays until its children (team-b) are deleted or moved"
    ]


async def test_handler_delete_cohort_child_the_api_cannot_answer_for_counts(tree: Engine) -> None:
    api = FakeKube()
    api.leaving = {"team-a", "team-b"}
    api.down = KubeError(503, "Cohort: read: 503 unavailable")
    old = cohort("research", min={"cpu": "40"})
    kwargs = member_kwargs("DELETE", None, old, memo_for(tree, api=api))
    with pytest.raises(kopf.AdmissionError, match=r"has children \(team-a, team-b\)"):
        await handlers.validate_cohort(**kwargs)


async def test_handler_not_ready_refuses_politely(tree: Engine) -> None:
    for memo in (memo_for(None), SimpleNamespace()):
        kwargs = member_kwargs("CREATE", quota("q", "q"), None, memo)
        with pytest.raises(kopf.AdmissionError, match="quotree is starting") as info:
            await handlers.validate_elasticquota(**kwargs)
        assert info.value.code == 503


async def test_handler_unexpected_error_is_a_clean_denial(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> None:
        raise RuntimeError("internal detail")

    monkeypatch.setattr(decisions, "review_member", boom)
    kwargs = member_kwargs("CREATE", quota("q", "q"), None, memo_for(Engine()))
    with pytest.raises(kopf.AdmissionError) as info:
        await handlers.validate_elasticquota(**kwargs)
    assert str(info.value) == (
        "ElasticQuota q (create): quotree could not decide (RuntimeError); "
        "see the quotree operator's log"
    )
    assert info.value.code == 500


async def test_mutate_handler_patch(tree: Engine) -> None:
    obj = pod("team-a", labels={"app": "web"}, schedulingGates=[{"name": "other"}])
    patch = kopf.Patch(body=kopf.Body(obj))
    await handlers.mutate_pod(body=kopf.Body(obj), patch=patch, memo=memo_for(tree))
    ops = sorted(patch.as_json_patch(), key=lambda op: op["path"])
    assert ops == [
        {"op": "add", "path": "/metadata/labels/quotree.io~1quota-name", "value": "team-a"},
        {"op": "add", "path": "/spec/schedulingGates/1", "value": {"name": ADMISSION_GATE}},
    ]


async def test_mutate_handler_pod_without_labels(tree: Engine) -> None:
    obj = pod("team-a")
    del obj["metadata"]["labels"]
    patch = kopf.Patch(body=kopf.Body(obj))
    await handlers.mutate_pod(body=kopf.Body(obj), patch=patch, memo=memo_for(tree))
    ops = {op["path"]: op for op in patch.as_json_patch()}
    assert ops["/metadata/labels"]["value"] == {QUOTA_LABEL: "team-a"}
    assert ops["/spec/schedulingGates"]["value"] == [{"name": ADMISSION_GATE}]


async def test_mutate_handler_denies(tree: Engine) -> None:
    obj = pod("team-a", labels={QUOTA_LABEL: "ops"})
    with pytest.raises(kopf.AdmissionError, match="does not cover namespace team-a") as info:
        await handlers.mutate_pod(body=kopf.Body(obj), patch=kopf.Patch(), memo=memo_for(tree))
    assert info.value.code == 403


async def test_mutate_handler_leaves_operator_namespace_alone(tree: Engine) -> None:
    obj = pod("quotree-system")
    patch = kopf.Patch(body=kopf.Body(obj))
    await handlers.mutate_pod(body=kopf.Body(obj), patch=patch, memo=memo_for(tree))
    assert patch.as_json_patch() == []


async def test_pod_update_handler() -> None:
    memo = memo_for(Engine(), trusted_users=frozenset({OPERATOR}))
    old = pod("team-a", labels={QUOTA_LABEL: "team-a"})
    new = pod("team-a", labels={QUOTA_LABEL: "ops"})
    kwargs = {"body": kopf.Body(new), "old": kopf.Body(old), "new": kopf.Body(new), "memo": memo}
    with pytest.raises(kopf.AdmissionError, match="only the quotree operator may change it"):
        await handlers.validate_pod_update(**kwargs, userinfo={"username": "alice"})
    await handlers.validate_pod_update(**kwargs, userinfo={"username": OPERATOR})


# ---------------------------------------------------------------- configurations


def test_configurations_shape() -> None:
    mutating, validating = configurations.build_configurations(
        {"url": "https://127.0.0.1:9443", "caBundle": "Q0E="},
        never_gated=never_gated("quotree-system", ["monitoring"]),
        operator_username="quotree-admin",
    )
    pods_mutate, _unlabelled = mutating["webhooks"]
    assert pods_mutate["clientConfig"] == {
        "url": "https://127.0.0.1:9443/pods-mutate",
        "caBundle": "Q0E=",
    }
    assert pods_mutate["failurePolicy"] == "Fail"
    assert pods_mutate["timeoutSeconds"] <= 5
    assert pods_mutate["rules"][0]["operations"] == ["CREATE"]
    assert pods_mutate["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-node-lease",
        "kube-public",
        "kube-system",
        "monitoring",
        "quotree-system",
    ]
    names = [w["name"] for w in validating["webhooks"]]
    assert names == [
        "cohorts-validate.quotree.io",
        "elasticquotas-validate.quotree.io",
        "pods-validate.quotree.io",
        "pods-validate-unlabelled.quotree.io",
        "namespaces-validate.quotree.io",
    ]
    # Only managed namespaces depend on quotree (docs/reference/pods.md, "System and managed
    # namespaces").
    assert pods_mutate["namespaceSelector"]["matchLabels"] == {"quotree.io/managed": "true"}
    namespaces_validate = validating["webhooks"][4]
    assert "namespaceSelector" not in namespaces_validate
    assert {c["name"] for c in namespaces_validate["matchConditions"]} == {
        "managed-label-changed",
        "not-the-operator",
    }
    pods_validate = validating["webhooks"][2]
    assert pods_validate["namespaceSelector"] == pods_mutate["namespaceSelector"]
    assert {c["name"] for c in pods_validate["matchConditions"]} == {
        "quotree-owned-change",
        "not-the-operator",
    }
    assert all(w["sideEffects"] == "None" for w in validating["webhooks"])


def test_unlabelled_namespaces_are_mutated_too_but_never_held_up() -> None:
    """A namespace a quota covers before the operator labelled it: its pods are still gated.

    The second pod webhook covers every namespace without the managed label (never the
    never-gated ones) and goes to the same handler, which asks the engine, not the label;
    `Ignore` keeps those namespaces independent of the operator while it is down.
    """
    mutating, _ = configurations.build_configurations(
        {"url": "https://127.0.0.1:9443", "caBundle": "Q0E="},
        never_gated=never_gated("quotree-system"),
    )
    managed, unlabelled = mutating["webhooks"]
    assert unlabelled["name"] == "pods-mutate-unlabelled.quotree.io"
    assert unlabelled["clientConfig"] == managed["clientConfig"]
    assert unlabelled["rules"] == managed["rules"]
    assert unlabelled["failurePolicy"] == "Ignore"
    assert unlabelled["timeoutSeconds"] <= 2
    assert unlabelled["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "quotree.io/managed", "operator": "NotIn", "values": ["true"]},
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-node-lease", "kube-public", "kube-system", "quotree-system"],
            },
        ]
    }


def test_unlabelled_namespaces_gates_are_guarded_too_but_never_held_up() -> None:
    """A pod gated in a covered namespace before it was labelled: only quotree may free it.

    The validating twin of the unlabelled mutating webhook: same handler and conditions as
    `pods-validate` (called only when the gate goes or a quotree.io label changes, never for
    the operator), over the namespaces without the managed label, `Ignore`.
    """
    mutating, validating = configurations.build_configurations(
        {"url": "https://127.0.0.1:9443", "caBundle": "Q0E="},
        never_gated=never_gated("quotree-system"),
        operator_username="quotree-admin",
    )
    by_name = {w["name"]: w for w in validating["webhooks"]}
    managed = by_name["pods-validate.quotree.io"]
    unlabelled = by_name["pods-validate-unlabelled.quotree.io"]
    assert unlabelled["clientConfig"] == managed["clientConfig"]
    assert unlabelled["clientConfig"]["url"].endswith("/pods-validate")
    assert unlabelled["rules"] == managed["rules"]
    assert unlabelled["matchConditions"] == managed["matchConditions"]
    assert unlabelled["failurePolicy"] == "Ignore"
    assert unlabelled["timeoutSeconds"] <= 2
    assert unlabelled["namespaceSelector"] == mutating["webhooks"][1]["namespaceSelector"]


def test_configurations_service_client_config() -> None:
    service = {"namespace": "quotree-system", "name": "quotree-webhooks", "port": 443}
    mutating, _ = configurations.build_configurations(
        {"service": service, "caBundle": "Q0E="}, never_gated=never_gated("quotree-system")
    )
    assert mutating["webhooks"][0]["clientConfig"] == {
        "service": {**service, "path": "/pods-mutate"},
        "caBundle": "Q0E=",
    }


# ---------------------------------------------------------------- fuzzing the decision layer

_quantity = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["1", "500m", "40Gi", "1e30", "-1", "1.5", "0x10", "1Ki", ""]),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
_resources = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "Bad Name", ""]), _quantity, max_size=3
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
            "bogus",
        ]
    ),
    st.one_of(
        _resources,
        st.text(max_size=8),
        st.integers(),
        st.none(),
        st.lists(st.text(max_size=5), max_size=2),
    ),
    max_size=5,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(["Cohort", "ElasticQuota", "Pod", None]),
    name=st.one_of(st.sampled_from(["research", "team-a", "new", ""]), st.text(max_size=8)),
    spec=st.one_of(_spec, st.text(max_size=5), st.none()),
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
)
def test_decisions_never_raise(
    tree: Engine, kind: Any, name: Any, spec: Any, operation: str
) -> None:
    obj = {"kind": kind, "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}
    old = quota("team-a", "team-a", "research", min={"cpu": "20"})
    verdict = decisions.review_member(
        tree,
        operation,
        None if operation == "DELETE" else obj,
        old if operation != "CREATE" else None,
    )
    assert verdict.allowed or (verdict.message and "\n" not in verdict.message)


def test_objects_applied_back_to_back_are_judged_together() -> None:
    # One `kubectl apply` of a folder: the operator's view has not caught up with the
    # first object when the second one is reviewed.
    engine = engine_with(cohort("research", min={"cpu": "40"}))
    recent = decisions.RecentlyAllowed()
    first = decisions.review_member(
        engine, "CREATE", quota("a", "a", "research", min={"cpu": "30"}), None, recent=recent
    )
    assert first.allowed
    second = decisions.review_member(
        engine, "CREATE", quota("b", "b", "research", min={"cpu": "20"}), None, recent=recent
    )
    assert not second.allowed
    assert "need 50 in all, over research's min of 40" in second.message
    same_name = decisions.review_member(engine, "CREATE", cohort("a"), None, recent=recent)
    assert "already taken by ElasticQuota a/a" in same_name.message


def test_dry_runs_are_not_remembered_and_memory_fades() -> None:
    engine = engine_with(cohort("research", min={"cpu": "40"}))
    now = [0.0]
    recent = decisions.RecentlyAllowed(ttl=10, clock=lambda: now[0])
    body = quota("a", "a", "research", min={"cpu": "30"})
    assert decisions.review_member(
        engine, "CREATE", body, None, recent=recent, dry_run=True
    ).allowed
    other = quota("b", "b", "research", min={"cpu": "20"})
    assert decisions.review_member(
        engine, "CREATE", other, None, recent=recent, dry_run=True
    ).allowed
    assert decisions.review_member(engine, "CREATE", body, None, recent=recent).allowed
    assert not decisions.review_member(engine, "CREATE", other, None, recent=recent).allowed
    now[0] = 11.0  # `a` never showed up (another webhook refused it): forgotten
    assert decisions.review_member(engine, "CREATE", other, None, recent=recent).allowed


def test_remembered_objects_are_dropped_once_the_tree_shows_them() -> None:
    engine = engine_with(cohort("research", min={"cpu": "40"}))
    recent = decisions.RecentlyAllowed()
    body = quota("a", "a", "research", min={"cpu": "30"})
    assert decisions.review_member(engine, "CREATE", body, None, recent=recent).allowed
    engine.set_config(parse_member(body))  # the operator's watch caught up
    assert recent.view(engine.tree.configs()) is engine.tree.configs()
