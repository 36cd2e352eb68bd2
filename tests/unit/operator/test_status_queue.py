"""An ElasticQuota's status lists its first waiting units in the engine's order
(`status.queue`, desired_status.queue), and a merge patch replaces the list whole."""

from __future__ import annotations

from quotree.groups import GroupSpec
from quotree_operator.desired_status import QUEUE_LENGTH, desired, status_patch
from tests.unit.builders import arrive, cohort, engine, pod, quota


def test_the_status_lists_the_first_waiting_units_in_the_engines_order() -> None:
    eng = engine(cohort("org", max=1), quota("team", "org", max=50, preempt=False))
    mpi = [pod("team", f"mpi-{i}", 1, priority=3, created=50.0 + i) for i in range(2)]
    for member in mpi:
        member.group = GroupSpec("mpi", 2, 2)
    arrive(
        eng,
        pod("team", "runs", 1, created=1.0),
        *(pod("team", f"p-{i}", 1, created=10.0 + i) for i in range(8)),
        pod("team", "urgent", 1, priority=5, created=99.0),
        *mpi,
    )
    eng.refresh()
    status = desired(eng, "team", True).status
    assert status["queue"] == [
        {"position": 1, "kind": "Pod", "namespace": "team", "name": "urgent", "priority": 5,
         "pods": 1},
        {"position": 2, "kind": "PodGroup", "namespace": "team", "name": "mpi", "priority": 3,
         "pods": 2},
        {"position": 3, "kind": "Pod", "namespace": "team", "name": "p-0", "priority": 0,
         "pods": 1},
        {"position": 4, "kind": "Pod", "namespace": "team", "name": "p-1", "priority": 0,
         "pods": 1},
        {"position": 5, "kind": "Pod", "namespace": "team", "name": "p-2", "priority": 0,
         "pods": 1},
    ]  # fmt: skip
    assert len(status["queue"]) == QUEUE_LENGTH
    assert [u.key for u in eng.waiting()][:QUEUE_LENGTH] == [
        f"team/{entry['name']}" for entry in status["queue"]
    ]
    assert "queue" not in desired(eng, "org", False).status  # a Cohort has no queue


def test_an_empty_queue_is_written_as_an_empty_list() -> None:
    eng = engine(cohort("org", max=1), quota("team", "org", max=50))
    arrive(eng, pod("team", "a", 1), pod("team", "b", 1))
    eng.refresh()
    before = desired(eng, "team", True)
    assert [entry["name"] for entry in before.status["queue"]] == ["b"]
    eng.set_config(cohort("org", max=2))
    eng.decide()
    after = desired(eng, "team", True)
    assert after.status["queue"] == []
    patch = status_patch(after, before, {}, "2026-11-22T07:00:00Z")
    assert patch is not None
    assert patch["queue"] == []  # a merge patch replaces a list whole
