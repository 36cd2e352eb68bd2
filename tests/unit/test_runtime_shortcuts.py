"""The runtime pass's kept state against a tree built afresh (hypothesis).

`QuotaTree.recompute()` redoes the runtimes on the same nodes, so it shares what those
nodes keep between events (a parent's scaled guarantees, its children's lists). These
properties compare instead with a new engine given only the end state: the same
configuration, capacity and pods.
"""

from __future__ import annotations

import random

from builders import engine, pod
from hypothesis import given
from hypothesis import strategies as st
from test_properties import PROPERTY, RESOURCES, Scenario, scenarios

from quotree.engine import Engine


def numbers(eng: Engine) -> dict[tuple[str, str], tuple[int, int]]:
    """(runtime, guarantee) of every live node, per resource."""
    eng.tree.settle()
    return {
        (n.name, r): (n.runtime[r], n.guarantee[r])
        for n in eng.tree.live_nodes()
        for r in n.resources
    }


@PROPERTY
@given(scenarios(), st.randoms(use_true_random=False))
def test_kept_guarantees_and_runtimes_equal_a_fresh_tree(
    scenario: Scenario, rnd: random.Random
) -> None:
    eng = engine(*scenario.configs, capacity=scenario.capacity)
    numbers(eng)  # settle once, then only incremental updates
    capacity = dict(scenario.capacity)
    live: dict[str, tuple[str, dict[str, int], int]] = {}
    for i, (q, request, priority, _) in enumerate(scenario.pods):
        eng.observe_pod(pod(q, f"p{i}", request, priority=priority))
        live[f"{q}/p{i}"] = (q, request, priority)
        if rnd.random() < 0.3:
            gone = rnd.choice(sorted(live))
            eng.forget_pod(gone)
            del live[gone]
        if rnd.random() < 0.3:
            capacity = {r: rnd.randrange(0, 150) for r in RESOURCES}
            eng.set_cluster_node("node-1", capacity)
        if rnd.random() < 0.5:
            eng.decide(float(i))
    fresh = engine(*scenario.configs, capacity=capacity)
    for key in sorted(eng.pods):  # the engine's: some were evicted
        q, request, priority = live[key]
        fresh.observe_pod(pod(q, key.split("/")[1], request, priority=priority))
    assert numbers(eng) == numbers(fresh)
