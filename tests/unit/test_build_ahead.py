"""A live tree read off the configuration ahead of its pods (`QuotaTree.build_ahead`, the
operator's start-up) decides and reports as one built when the first decision comes."""

from __future__ import annotations

import random

from quotree.decisions import Decisions
from quotree.engine import Engine
from quotree.models import MemberConfig
from tests.unit.builders import cohort, pod, quota


def _configs() -> list[MemberConfig]:
    return [
        cohort("org", min=60),
        cohort("research", "org", min=40, max=70),
        quota("a", "research", namespace="a", min=25, max=50),
        quota("b", "research", namespace="b", min=15),
        quota("c", "org", namespace="c", min=20, weight=3),
        quota("d", None, namespace="d", min=10, max=30),
    ]


def _summary(engine: Engine, decisions: Decisions) -> tuple[object, ...]:
    engine.refresh()
    reports = {name: engine.report(name) for name in sorted(engine.all_configs())}
    return (
        sorted(decisions.admitted),
        sorted(decisions.labels.items()),
        sorted(decisions.pending.items()),
        sorted(repr(e) for e in decisions.evictions),
        reports,
    )


def _run(seed: int, *, ahead: bool, change: MemberConfig | None = None) -> tuple[object, ...]:
    rnd = random.Random(seed)
    engine = Engine(reclaim_delay=0.0)
    for config in _configs():
        engine.set_config(config)
    engine.set_cluster_node("node-1", {"x": 90})
    if ahead:
        for tree in engine.trees.values():
            tree.build_ahead()
    if change is not None:
        engine.set_config(change)
    for i in range(rnd.randrange(10, 40)):
        namespace = rnd.choice("abcd")
        running = rnd.random() < 0.5
        engine.observe_pod(
            pod(
                namespace,
                f"p{i}",
                rnd.randrange(1, 12),
                priority=rnd.choice((0, 10)),
                created=float(i),
                gated=not running,
                node="node-1" if running else None,
            )
        )
    return _summary(engine, engine.decide(100.0))


def test_a_tree_built_ahead_decides_and_reports_as_one_built_at_the_first_decision() -> None:
    for seed in range(40):
        assert _run(seed, ahead=True) == _run(seed, ahead=False), seed


def test_a_configuration_change_after_building_ahead_is_taken() -> None:
    change = quota("b", "research", namespace="b", min=35, max=40)
    for seed in range(20):
        ahead = _run(seed, ahead=True, change=change)
        assert ahead == _run(seed, ahead=False, change=change), seed
    engine = Engine(reclaim_delay=0.0)
    for config in _configs():
        engine.set_config(config)
    engine.set_cluster_node("node-1", {"x": 90})
    for tree in engine.trees.values():
        tree.build_ahead()
    engine.set_config(quota("e", "org", namespace="e", max=5))  # after: must be live
    engine.observe_pod(pod("e", "first", 3, created=1.0))
    assert [key for key, _ in engine.decide(100.0).admitted] == ["e/first"]
    assert engine.report("e").problem is None
