"""The operator's status, pure: what a quota object should show, the merge patch that gets
it there, and when a condition's lastTransitionTime moves (quotree_operator/status.py)."""

from __future__ import annotations

from quotree import Engine, PodFacts
from quotree_operator.desired_status import Desired, StatusMemory, conditions, desired, status_patch
from tests.unit.objects import cohort, engine_with, quota

T0, T1 = "2026-11-22T07:00:00Z", "2026-11-22T08:00:00Z"


def by_type(items: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in items}


def test_valid_and_active_when_the_node_is_in_the_live_tree() -> None:
    engine = engine_with(
        cohort("org", min={"cpu": "4"}), quota("team", "team", "org", min={"cpu": "2"})
    )
    got = by_type(conditions(engine, "team", None))
    assert got["Valid"] == {
        "type": "Valid",
        "status": "True",
        "reason": "Valid",
        "message": "the configuration is valid",
    }
    assert got["Active"]["status"] == "True"
    assert got["Active"]["reason"] == "Active"


def test_an_unreadable_spec_makes_both_conditions_false() -> None:
    got = by_type(conditions(Engine(), "team", "ElasticQuota team: spec.min: cpu: 'x' is bad"))
    for kind in ("Valid", "Active"):
        assert got[kind]["status"] == "False"
        assert got[kind]["reason"] == "InvalidSpec"
        assert got[kind]["message"] == "ElasticQuota team: spec.min: cpu: 'x' is bad"


def test_own_problem_is_invalid_an_ancestors_problem_only_inactive() -> None:
    # `org` names a parent that does not exist (its own problem); `team` is fine itself,
    # but hangs below `org`, so it is valid and not active.
    engine = engine_with(cohort("org", "nowhere"), quota("team", "team", "org"))
    own = engine.tree.problems["org"]
    assert own.own
    org = by_type(conditions(engine, "org", None))
    assert org["Valid"] == {
        "type": "Valid",
        "status": "False",
        "reason": own.reason,
        "message": own.message,
    }
    assert org["Active"]["status"] == "False"
    inherited = engine.tree.problems["team"]
    assert not inherited.own
    team = by_type(conditions(engine, "team", None))
    assert team["Valid"]["status"] == "True"
    assert team["Active"] == {
        "type": "Active",
        "status": "False",
        "reason": inherited.reason,
        "message": inherited.message,
    }


def test_desired_pod_counts_only_on_elastic_quotas_and_annotations_are_json() -> None:
    engine = engine_with(
        cohort("org", min={"cpu": "4"}), quota("team", "team", "org", min={"cpu": "2"})
    )
    engine.observe_pod(
        PodFacts(namespace="team", name="p", request={"cpu": 1000}, node_name="n1", phase="Running")
    )
    team = desired(engine, "team", is_quota=True)
    assert team.status["admittedPods"] == 1
    assert team.status["pendingPods"] == 0
    assert team.status["used"] == {"cpu": "1"}
    assert team.annotations["quotree.io/used"] == '{"cpu":"1"}'
    org = desired(engine, "org", is_quota=False)
    assert "admittedPods" not in org.status
    assert org.status["used"] == {"cpu": "1"}
    assert set(org.annotations) == {"quotree.io/request", "quotree.io/runtime", "quotree.io/used"}


def _desired(valid: str, used: dict[str, str]) -> Desired:
    status = {
        "request": used,
        "runtime": used,
        "used": used,
        "summary": "",
        "conditions": [
            {"type": "Valid", "status": valid, "reason": "r", "message": "m"},
            {"type": "Active", "status": "True", "reason": "Active", "message": "m"},
        ],
    }
    return Desired(status, {"quotree.io/used": str(used)})


def test_nothing_to_write_when_the_status_is_unchanged() -> None:
    same = _desired("True", {"cpu": "1"})
    assert status_patch(same, _desired("True", {"cpu": "1"}), {"Valid": T0}, T1) is None


def test_first_write_stamps_every_condition_now() -> None:
    patch = status_patch(_desired("True", {"cpu": "1"}), None, {}, T1)
    assert patch is not None
    assert [c["lastTransitionTime"] for c in patch["conditions"]] == [T1, T1]


def test_only_a_condition_whose_status_changed_gets_a_new_transition_time() -> None:
    old = _desired("True", {"cpu": "1"})
    patch = status_patch(_desired("False", {"cpu": "1"}), old, {"Valid": T0, "Active": T0}, T1)
    assert patch is not None
    times = {c["type"]: c["lastTransitionTime"] for c in patch["conditions"]}
    assert times == {"Valid": T1, "Active": T0}


def test_a_vanished_resource_is_removed_by_the_merge_patch() -> None:
    old = _desired("True", {"cpu": "1", "memory": "1Gi"})
    patch = status_patch(_desired("True", {"cpu": "2"}), old, {"Valid": T0, "Active": T0}, T1)
    assert patch is not None
    for key in ("request", "runtime", "used"):
        assert patch[key] == {"cpu": "2", "memory": None}


def test_memory_seeded_from_the_object_rewrites_nothing_after_a_restart() -> None:
    new = _desired("True", {"cpu": "1"})
    on_object = {
        "status": {
            **new.status,
            "conditions": [{**c, "lastTransitionTime": T0} for c in new.status["conditions"]],
        },
        "metadata": {"annotations": {**new.annotations, "other.io/keep": "x"}},
    }
    memory = StatusMemory()
    memory.remember_object("team", on_object)
    assert memory.changes("team", new, T1) == (None, None)
    # a status change keeps the unchanged condition's time from the object
    patch, annotations = memory.changes("team", _desired("False", {"cpu": "1"}), T1)
    assert annotations is None
    assert patch is not None
    assert {c["type"]: c["lastTransitionTime"] for c in patch["conditions"]} == {
        "Valid": T1,
        "Active": T0,
    }


def test_memory_records_writes_and_forgets_deleted_objects() -> None:
    memory = StatusMemory()
    new = _desired("True", {"cpu": "1"})
    patch, annotations = memory.changes("team", new, T0)
    assert patch is not None
    assert annotations == new.annotations
    memory.wrote("team", new, patch)
    assert memory.changes("team", new, T1) == (None, None)
    memory.remember_object("team", {"status": {"used": {"cpu": "9"}}})  # already known: ignored
    assert memory.changes("team", new, T1) == (None, None)
    memory.forget("team")
    assert memory.changes("team", new, T1)[0] is not None
