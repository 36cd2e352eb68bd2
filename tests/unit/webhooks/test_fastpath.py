"""The pod CREATE webhook's direct answer (fastpath.py) against Kopf's path (handlers.py).

Both are fed the same reviews; the pod that results from applying each answer's
JSON patch must be the same, and so must a denial's code and message.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import kopf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotree import ADMISSION_GATE, QUOTA_LABEL, STANDING_LABEL, Engine
from quotree_webhooks import fastpath, handlers
from tests.unit.objects import cohort, engine_with, quota
from tests.unit.webhooks.test_webhooks import SETTINGS, memo_for


def tree() -> Engine:
    return engine_with(
        cohort("research", min={"cpu": "40"}),
        quota("team-a", "team-a", "research", min={"cpu": "20"}, namespaces=["shared"]),
        quota("team-b", "team-b", "research", min={"cpu": "20"}, namespaces=["shared"]),
        quota("ops", "ops"),
    )


def review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE", "object": obj},
    }


async def kopf_result(engine: Engine, obj: dict[str, Any]) -> tuple[Any, Any]:
    """(the pod after Kopf's patch, None) or (None, (code, message)) for a denial."""
    patch = kopf.Patch(body=kopf.Body(obj))
    try:
        await handlers.mutate_pod(body=kopf.Body(obj), patch=patch, memo=memo_for(engine))
    except kopf.AdmissionError as exc:
        return None, (exc.code, str(exc))
    return jsonpatch.apply_patch(copy.deepcopy(obj), patch.as_json_patch()), None


def fast_result(engine: Engine, obj: dict[str, Any]) -> tuple[Any, Any]:
    answer = fastpath.mutate_pod(engine, SETTINGS.never_gated, review(obj))
    assert answer is not None
    response = answer["response"]
    assert response["uid"] == "u-1"
    assert answer["kind"] == "AdmissionReview"
    if not response["allowed"]:
        return None, (response["status"]["code"], response["status"]["message"])
    ops = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    assert response.get("patchType", "JSONPatch") == "JSONPatch"
    return jsonpatch.apply_patch(copy.deepcopy(obj), ops), None


label_sets = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from([QUOTA_LABEL, STANDING_LABEL, "app", "a/b~c"]),
        st.sampled_from(["team-a", "team-b", "ops", "nobody", "in-quota", "x"]),
        max_size=3,
    ),
)
gate_lists = st.one_of(
    st.none(),
    st.lists(st.sampled_from([ADMISSION_GATE, "other", "third"]), max_size=3, unique=True),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["team-a", "team-b", "shared", "ops", "free", "quotree-system", ""]),
    label_sets,
    gate_lists,
    st.booleans(),
)
async def test_fast_path_answers_as_kopfs_path(
    namespace: str, labels: dict[str, str] | None, gates: list[str] | None, bound: bool
) -> None:
    """Same pod after the patch (labels set and removed, gate added once), same denials."""
    engine = tree()
    metadata: dict[str, Any] = {"name": "p"}
    if namespace:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = labels
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if gates is not None:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if bound:
        spec["nodeName"] = "node-1"
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    assert fast_result(engine, obj) == await kopf_result(engine, obj)


def test_malformed_objects_are_left_to_kopf() -> None:
    engine = tree()
    for obj in (
        {"metadata": "not a map", "spec": {}},
        {"metadata": {"namespace": "team-a", "labels": ["x"]}, "spec": {}},
        {"metadata": {"namespace": "team-a"}, "spec": "no"},
    ):
        assert fastpath.mutate_pod(engine, SETTINGS.never_gated, review(obj)) is None
    assert fastpath.mutate_pod(engine, SETTINGS.never_gated, {"request": "x"}) is None
