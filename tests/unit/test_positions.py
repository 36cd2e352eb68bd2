"""`Engine.waiting`: the waiting units in the order the engine takes them, with their
positions in their quota and under each ancestor (`quotree/positions.py`).

The order is checked against the engine itself: room grows under a Cohort one unit at a
time (its max, or the cluster's capacity), each step admits one unit, and the units come
in in the order `waiting()` gave before the room grew.
"""

from __future__ import annotations

import pytest

from quotree.engine import Engine
from quotree.groups import GroupSpec
from quotree.models import MemberConfig
from tests.unit.builders import R, arrive, cohort, engine, pod, quota


def _keys(eng: Engine) -> list[str]:
    return [unit.key for unit in eng.waiting()]


def _admitted(eng: Engine) -> set[str]:
    return {r.key for r in eng.pod_records() if str(r.state) == "admitted"}


def _admission_order(eng: Engine, grow: list[MemberConfig | int]) -> list[str]:
    """Grow the room step by step (a configuration, or a capacity); the units each step
    admits (one per step, else the order between them is not observed)."""
    order: list[str] = []
    before = _admitted(eng)
    for step in grow:
        if isinstance(step, int):
            eng.set_cluster_node("node-1", {R: step})
        else:
            eng.set_config(step)
        eng.decide()
        now = _admitted(eng)
        new = now - before
        assert len(new) <= 1, f"one step admitted {sorted(new)}"
        order.extend(new)
        before = now
    return order


def test_in_a_quota_priority_then_time_then_name() -> None:
    eng = engine(quota("team-a", max=1))
    arrive(
        eng,
        pod("team-a", "runs", 1, priority=10),
        pod("team-a", "old", 1, created=10.0),
        pod("team-a", "high", 1, priority=5, created=30.0),
        pod("team-a", "b-new", 1, created=20.0),
        pod("team-a", "a-new", 1, created=20.0),
    )
    eng.refresh()
    units = eng.waiting()
    assert [u.key for u in units] == ["team-a/high", "team-a/old", "team-a/a-new", "team-a/b-new"]
    assert [u.positions for u in units] == [[("team-a", i)] for i in range(1, 5)]
    assert [u.order for u in units] == [1, 2, 3, 4]
    assert units[0].priority == 5
    assert units[1].since == 10.0
    assert units[0].request == {R: 1}
    assert units[0].reason.startswith("does not fit in ElasticQuota team-a")


def _two_quotas(weight_a: int, weight_b: int, min_a: int = 0) -> tuple[Engine, list[str]]:
    """Cohort research (max = team-a's min: no room to share) over team-a and team-b of the
    given weights; six 1-unit pods wait in each, of mixed priorities and ages."""
    eng = engine(
        cohort("research", min=min_a, max=min_a),
        # No in-quota preemption: the pods admitted within team-a's min stay.
        quota("team-a", "research", min=min_a, max=50, weight=weight_a, preempt=False),
        quota("team-b", "research", max=50, weight=weight_b, preempt=False),
    )
    pods = []
    for i in range(6 + min_a):
        pods.append(pod("team-a", f"a-{i}", 1, priority=i % 3, created=100.0 + i))
    for i in range(6):
        pods.append(pod("team-b", f"b-{i}", 1, priority=i % 2, created=100.5 + i))
    arrive(eng, *pods)
    eng.refresh()
    return eng, _keys(eng)


@pytest.mark.parametrize(
    ("weight_a", "weight_b", "min_a"),
    [(1, 1, 0), (1, 2, 0), (2, 1, 0), (3, 5, 0), (7, 2, 0), (1, 1, 2), (2, 3, 3)],
)
def test_room_growing_under_a_cohort_admits_in_the_listed_order(
    weight_a: int, weight_b: int, min_a: int
) -> None:
    eng, listed = _two_quotas(weight_a, weight_b, min_a)
    assert len(listed) == 12
    grow: list[MemberConfig | int] = [
        cohort("research", min=min_a, max=min_a + step) for step in range(1, 13)
    ]
    assert _admission_order(eng, grow) == listed


def test_positions_under_the_cohort_and_in_each_quota() -> None:
    eng, listed = _two_quotas(1, 2)
    units = eng.waiting()
    for unit in units:
        (quota_name, in_quota), (parent, under) = unit.positions
        assert parent == "research"
        assert under == listed.index(unit.key) + 1
        mine = [u.key for u in units if u.quota == quota_name]
        assert in_quota == mine.index(unit.key) + 1
    # team-a's queue: priority 2 first (a-2, a-5), then 1, then 0, each oldest first.
    assert [u.key for u in units if u.quota == "team-a"] == [
        "team-a/a-2",
        "team-a/a-5",
        "team-a/a-1",
        "team-a/a-4",
        "team-a/a-0",
        "team-a/a-3",
    ]


def test_room_from_the_cluster_across_two_cohorts() -> None:
    """Two Cohorts of two quotas each under the cluster (capacity grows one unit a step)."""
    eng = engine(
        cohort("left", max=50, weight=3),
        cohort("right", max=50, weight=2),
        quota("l-1", "left", max=50, weight=1),
        quota("l-2", "left", max=50, weight=2),
        quota("r-1", "right", max=50),
        quota("r-2", "right", max=50),
        capacity=0,
    )
    arrive(eng, *(pod(q, f"{q}-{i}", 1) for i in range(4) for q in ("l-1", "l-2", "r-1", "r-2")))
    eng.refresh()
    units = eng.waiting()
    assert {(u.positions[0][0], u.positions[1][0]) for u in units} == {
        ("l-1", "left"),
        ("l-2", "left"),
        ("r-1", "right"),
        ("r-2", "right"),
    }
    listed = [u.key for u in units]
    assert len(listed) == 16
    assert _admission_order(eng, list(range(1, 17))) == listed


def test_a_pod_group_is_one_unit_at_its_place() -> None:
    eng = engine(cohort("research", max=0), quota("team-a", "research", max=50))
    mpi = [pod("team-a", f"mpi-{i}", 2, created=2.0 + i) for i in range(2)]
    for member in mpi:
        member.group = GroupSpec("mpi", 2, 2)
    arrive(eng, pod("team-a", "solo", 1, created=1.0), *mpi, pod("team-a", "late", 1, created=4.0))
    eng.refresh()
    units = eng.waiting()
    keys = [(u.key, u.group, u.pods) for u in units]
    assert keys == [
        ("team-a/solo", False, ("team-a/solo",)),
        ("team-a/mpi", True, ("team-a/mpi-0", "team-a/mpi-1")),
        ("team-a/late", False, ("team-a/late",)),
    ]
    assert units[1].request == {R: 4}


def test_a_unit_over_a_cap_comes_last_under_the_parent() -> None:
    eng = engine(
        cohort("research", max=0),
        quota("team-a", "research", max=1, weight=1),
        quota("team-b", "research", max=50, weight=1),
    )
    arrive(
        eng,
        pod("team-a", "a-0", 1, created=1.0),
        pod("team-a", "a-1", 1, created=2.0),  # team-a's max is 1: after every other
        pod("team-b", "b-0", 1, created=3.0),
        pod("team-b", "b-1", 1, created=4.0),
    )
    eng.refresh()
    assert _keys(eng) == ["team-a/a-0", "team-b/b-0", "team-b/b-1", "team-a/a-1"]
    grow: list[MemberConfig | int] = [cohort("research", max=step) for step in range(1, 5)]
    assert _admission_order(eng, grow) == ["team-a/a-0", "team-b/b-0", "team-b/b-1"]


def test_waiting_in_gives_a_quotas_first_units_and_their_place_in_it() -> None:
    eng, _ = _two_quotas(1, 2)
    first = eng.waiting_in("team-b", 2)
    everything = [u for u in eng.waiting() if u.quota == "team-b"]
    assert [u.key for u in first] == [u.key for u in everything[:2]]
    assert [u.positions for u in first] == [[("team-b", 1)], [("team-b", 2)]]
    assert eng.waiting_in("research", 2) == []  # a Cohort has no queue of its own


def test_a_limit_keeps_the_first_units_with_their_exact_positions() -> None:
    eng = engine(
        cohort("left", max=50, weight=3),
        cohort("right", max=50, weight=2),
        quota("l-1", "left", max=50, weight=1),
        quota("l-2", "left", max=50, weight=2),
        quota("r-1", "right", max=50),
        capacity=0,
    )
    arrive(eng, *(pod(q, f"{q}-{i}", 1) for i in range(5) for q in ("l-1", "l-2", "r-1")))
    eng.refresh()
    everything = [(u.key, u.positions, u.order) for u in eng.waiting()]
    assert [(u.key, u.positions, u.order) for u in eng.waiting(4)] == everything[:4]
