"""Invariants of several trees (docs/reference/objects.md, "Several trees"), over random forests
(hypothesis).

Two random trees over the same namespaces: the default tree of `test_properties.scenarios`
(quota qN covers namespace qN) and a project tree whose quotas each cover some of those
namespaces. Pods arrive, some leave, the cluster changes size.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from builders import pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import RESOURCES, Scenario, scenarios

from quotree import admission
from quotree.engine import Engine
from quotree.models import MemberConfig
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.runtime import QuotaTree
from quotree.simulate import SimulatedEngine

P = "projects"
FOREST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Forest:
    org: Scenario  # the default tree and the pods
    projects: list[MemberConfig]  # the project tree: names start with "p"


@st.composite
def forests(draw: st.DrawFn) -> Forest:
    org = draw(scenarios())
    other = draw(scenarios())
    namespaces = [c.name for c in org.configs if c.is_leaf]
    project_quotas = [c.name for c in other.configs if c.is_leaf]
    covers: dict[str, list[str]] = {q: [] for q in project_quotas}
    for namespace in namespaces:  # each namespace: one project quota, or none
        owner = draw(st.sampled_from([None, *project_quotas]))
        if owner is not None:
            covers[owner].append(namespace)
    projects = []
    for config in other.configs:
        renamed = dataclasses.replace(
            config,
            name="p" + config.name,
            parent="p" + config.parent if config.parent else None,
            tree=P,
        )
        if config.is_leaf:
            renamed = dataclasses.replace(
                renamed, namespace="pns-" + config.name, namespaces=tuple(covers[config.name])
            )
        projects.append(renamed)
    return Forest(org, projects)


def forest_engine(forest: Forest, engine: Engine | None = None, *, trees: str = "both") -> Engine:
    eng = engine or SimulatedEngine()
    configs = {
        "both": [*forest.org.configs, *forest.projects],
        "org": forest.org.configs,
        "projects": forest.projects,
    }[trees]
    for config in configs:
        eng.set_config(config)
    eng.set_cluster_node("node-1", forest.org.capacity)
    return eng


def facts(i: int, namespace: str, request: dict[str, int], priority: int, np: bool) -> PodFacts:
    return pod(namespace, f"p{i}", request, priority=priority, created=i, preemptible=not np)


def fits(tree: QuotaTree, quota: str, request: dict[str, int]) -> bool:
    """used + request <= runtime at the quota and every ancestor up to the root."""
    member = tree.member(quota)
    if member is None:
        return False
    for walk in (member, *tree.path_up(member)):
        for r in member.resources:
            if request.get(r, 0) and walk.used[r] + request[r] > walk.runtime[r]:
                return False
    return True


class AdmissionWatch(SimulatedEngine):
    """The simulator's engine, checking each admission the moment it is made."""

    def __init__(self, forest: Forest) -> None:
        super().__init__()
        self.scenario = forest
        self.checked = 0

    def _admit(self, record: PodRecord, message: str) -> None:
        if record.facts.gated and record.state is PodState.PENDING:
            charged = [q for q in (record.quota, *record.also) if q]
            # it fits in every tree that charges it, the ancestors' checks included
            for name in charged:
                assert fits(self.tree_of(name), name, record.request), (record.key, name)
            # and each tree alone, holding the same pods, would let it in too
            for alone in ("org", "projects"):
                assert admitted_alone(self, self.scenario, alone, record), (record.key, alone)
            self.checked += 1
        super()._admit(record, message)


def admitted_alone(eng: Engine, forest: Forest, trees: str, candidate: PodRecord) -> bool:
    """Would one of the trees alone, holding the same pods (the running ones running, the
    pending ones pending; pods its tree does not charge hold capacity as unmanaged ones),
    let `candidate` in: its quota, the non-preemptible rule and every ancestor?"""
    alone = forest_engine(forest, Engine(reclaim_delay=1e9), trees=trees)
    for record in eng.pods.values():
        if record.state is PodState.ADMITTED:
            alone.observe_pod(dataclasses.replace(record.facts, gated=False, node_name="node-1"))
        elif record.state is PodState.PENDING:
            alone.observe_pod(dataclasses.replace(record.facts, gated=True))
    mine = alone.pods[candidate.key]
    if mine.quota is None:
        return True  # that tree does not charge it at all
    tree = alone.tree_of(mine.quota)
    member = tree.member(mine.quota)
    assert member is not None
    pods = alone.ledger.quota_pods[mine.quota]
    return not (
        admission.shortfall(member, mine)
        or admission.non_preemptible_shortfall(member, pods, mine)
        or admission.ancestor_shortfall(tree.path_up(member), member, mine)
    )


@FOREST
@given(forests())
def test_a_pod_admitted_in_a_forest_fits_in_every_tree_and_in_each_tree_alone(
    forest: Forest,
) -> None:
    """At each admission: the pod fits its quota and every ancestor in every tree that
    charges it; and removing a tree from the picture never admits more: each tree alone,
    from the same state, admits the pod too (a tree added only ever holds pods back).
    Whole runs are compared by `test_a_tree_that_limits_nothing_changes_nothing` only:
    over a whole run, a pod held back by one tree may let a smaller one in behind it
    (a pod that does not fit never blocks the next), so admitted sets are not nested."""
    eng = AdmissionWatch(forest)
    forest_engine(forest, eng)
    for i, (q, request, priority, preemptible) in enumerate(forest.org.pods):
        eng.observe_pod(facts(i, q, request, priority, not preemptible))
        eng.decide(float(i))
        # each quota's used, in every tree, is what the admitted pods charged to it request
        for tree in eng.trees.values():
            tree.settle()
            for member in tree.live_members():
                if member.is_quota:
                    charged = [
                        r
                        for r in eng.pods.values()
                        if r.state is PodState.ADMITTED and member.name in (r.quota, *r.also)
                    ]
                    for res in member.resources:
                        assert member.used[res] == sum(r.request.get(res, 0) for r in charged)


@FOREST
@given(forests())
def test_a_tree_that_limits_nothing_changes_nothing(forest: Forest) -> None:
    """A project tree of one quota over every namespace that names no resource (so it
    limits none): every pod is charged there too, and the forest takes the same
    decisions, with the same words, as the organisation tree alone."""
    namespaces = tuple(c.name for c in forest.org.configs if c.is_leaf)
    wide = MemberConfig(
        kind="ElasticQuota",
        name="pall",
        namespace="pns-all",
        namespaces=namespaces,
        tree=P,
    )
    both = forest_engine(Forest(forest.org, [wide]))
    org = forest_engine(forest, trees="org")
    for i, (q, request, priority, preemptible) in enumerate(forest.org.pods):
        for eng in (both, org):
            eng.observe_pod(facts(i, q, request, priority, not preemptible))
            eng.decide(float(i))
    assert all(r.also == ("pall",) for r in both.pods.values() if r.quota)
    for eng in (both, org):
        eng.refresh_reasons()  # reasons with the final numbers, as `quotree simulate` shows
    assert {r.key: (r.state, r.reason, r.standing) for r in both.pod_records()} == {
        r.key: (r.state, r.reason, r.standing) for r in org.pod_records()
    }


@FOREST
@given(forests(), st.randoms(use_true_random=False))
def test_incremental_equals_full_recomputation_in_every_tree(
    forest: Forest, rnd: random.Random
) -> None:
    eng = forest_engine(forest, Engine(reclaim_delay=0.0))
    live: list[str] = []
    for i, (q, request, priority, preemptible) in enumerate(forest.org.pods):
        eng.observe_pod(facts(i, q, request, priority, not preemptible))
        live.append(f"{q}/p{i}")
        if rnd.random() < 0.3 and live:
            eng.forget_pod(live.pop(rnd.randrange(len(live))))
        if rnd.random() < 0.2:
            eng.set_cluster_node("node-1", {r: rnd.randrange(0, 150) for r in RESOURCES})
        if rnd.random() < 0.5:
            eng.decide(float(i))
    for tree in eng.trees.values():
        tree.settle()
        members = [tree.root, *tree.live_members()]
        before = {(n.name, r): (n.runtime[r], n.used[r]) for n in members for r in n.resources}
        tree.recompute()
        members = [tree.root, *tree.live_members()]
        after = {(n.name, r): (n.runtime[r], n.used[r]) for n in members for r in n.resources}
        assert after == before
