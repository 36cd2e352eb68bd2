"""Resource flavors in the engine (docs/reference/objects.md, "ResourceFlavor";
docs/design/flavors.md).

Capacity per flavor from node labels, pods charged to the first allowed flavor
where they fit, the flavor a pod waits on when none fits, the per-flavor
configuration rules, and the derived GPU memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from quotree.capacity import cluster_capacity, flavor_matches
from quotree.engine import Engine, PodState
from quotree.flavor_spec import FlavorConfig, parse_flavor
from quotree.flavors import allows, charge
from quotree.models import FLAVOR_LABEL, ConfigError, MemberConfig, parse_member
from quotree.podfacts import PodFacts
from quotree.rules import check_apply, tree_problems
from quotree.simulate import SimulatedEngine
from quotree.structure import Structure
from tests.unit.builders import pod
from tests.unit.objects import cohort_config as coh
from tests.unit.objects import quota_config as eq

GPU = "nvidia.com/gpu"
A100 = FlavorConfig("a100", {"gpu": "a100"})
H100 = FlavorConfig("h100", {"gpu": "h100"})


def gpu_pod(
    namespace: str,
    name: str,
    gpus: int = 1,
    *,
    selector: Mapping[str, str] | None = None,
    affinity: tuple[Any, ...] = (),
    priority: int = 0,
    gated: bool = True,
    labels: Mapping[str, str] | None = None,
    node: str | None = None,
) -> PodFacts:
    return pod(
        namespace,
        name,
        {GPU: gpus, "cpu": 1000},
        labels=labels,
        priority=priority,
        created=0.0,
        gated=gated,
        node=node,
        selector=selector,
        affinity=affinity,
    )


def cluster(
    *configs: MemberConfig,
    a100: int = 4,
    h100: int = 4,
    flavors: tuple[FlavorConfig, ...] = (A100, H100),
    simulated: bool = True,
    reclaim_delay: float = 0.0,
) -> Engine:
    eng: Engine = SimulatedEngine() if simulated else Engine(reclaim_delay=reclaim_delay)
    for flavor in flavors:
        eng.set_flavor(flavor)
    for config in configs:
        eng.set_config(config)
    eng.set_cluster_node("a", {"cpu": 64000, GPU: a100}, {"gpu": "a100"})
    eng.set_cluster_node("h", {"cpu": 64000, GPU: h100}, {"gpu": "h100"})
    return eng


TWO_FLAVORS = {
    "min": {"cpu": "8"},
    "flavors": [
        {"name": "a100", "min": {GPU: "2"}, "max": {GPU: "2"}},
        {"name": "h100", "min": {GPU: "2"}},
    ],
}


# ---------------------------------------------------------------- model and capacity


def test_flavor_lists_become_resources_named_resource_at_flavor() -> None:
    config = eq("team", **TWO_FLAVORS)
    assert config.flavors == ("a100", "h100")
    assert config.flavored_resources == {GPU}
    assert dict(config.min) == {"cpu": 8000, f"{GPU}@a100": 2, f"{GPU}@h100": 2}
    assert dict(config.max) == {f"{GPU}@a100": 2}


def test_a_flavor_listed_twice_is_one_line_error() -> None:
    with pytest.raises(ConfigError, match=r"^ElasticQuota team: spec.flavors: .*a100 is listed"):
        eq("team", flavors=[{"name": "a100"}, {"name": "a100"}])


def test_resource_flavor_parses_and_bad_memory_is_one_line() -> None:
    flavor = parse_flavor(
        {
            "metadata": {"name": "a100"},
            "spec": {"nodeLabels": {"g": "a"}, "gpuMemoryPerGPU": "80Gi"},
        }
    )
    assert flavor == FlavorConfig("a100", {"g": "a"}, 80 * 2**30, GPU)
    with pytest.raises(ConfigError, match=r"^ResourceFlavor x: spec.gpuMemoryPerGPU: .*negative"):
        parse_flavor({"metadata": {"name": "x"}, "spec": {"gpuMemoryPerGPU": "-1"}})


def test_capacity_per_flavor_is_the_allocatable_of_matching_nodes() -> None:
    nodes = {
        "a1": ({GPU: 4, "cpu": 8000}, {"gpu": "a100", "zone": "z1"}),
        "a2": ({GPU: 2}, {"gpu": "a100"}),
        "h1": ({GPU: 8}, {"gpu": "h100"}),
        "cpu": ({"cpu": 16000}, {}),
    }
    total = cluster_capacity(nodes, {"a100": A100, "h100": H100})
    assert total[GPU] == 14
    assert total[f"{GPU}@a100"] == 6
    assert total[f"{GPU}@h100"] == 8
    assert total["cpu@a100"] == 8000
    assert total["cpu"] == 24000
    assert flavor_matches(A100, {"gpu": "a100", "other": "x"})
    assert not flavor_matches(A100, {"gpu": "h100"})


def test_engine_capacity_follows_nodes_and_flavors() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    assert eng.tree.capacity[f"{GPU}@a100"] == 4
    eng.set_cluster_node("a", None)  # not Ready any more (capacity.node_allocatable)
    assert eng.tree.capacity.get(f"{GPU}@a100", 0) == 0
    eng.remove_flavor("h100")
    assert f"{GPU}@h100" not in eng.tree.capacity


# ---------------------------------------------------------------- which flavor


def test_first_flavor_until_its_quota_is_used_then_the_next() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    flavors = []
    for i in range(5):
        eng.observe_pod(gpu_pod("team", f"p{i}"))
        out = eng.decide()
        flavors.append(out.flavors[f"team/p{i}"][0] if out.flavors else None)
    # a100's max is 2; then h100 (min 2, its capacity 4 lets it borrow up to 4).
    assert flavors == ["a100", "a100", "h100", "h100", "h100"]
    member = eng.tree.member("team")
    assert member is not None
    assert (member.used[f"{GPU}@a100"], member.used[f"{GPU}@h100"]) == (2, 3)


def test_admission_reports_the_flavor_and_its_node_labels() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    eng.observe_pod(gpu_pod("team", "p"))
    out = eng.decide()
    assert out.admitted[0][0] == "team/p"
    assert out.flavors == {"team/p": ("a100", {"gpu": "a100"})}
    record = eng.pods["team/p"]
    assert record.flavor == "a100"
    assert record.request == {f"{GPU}@a100": 1, "cpu": 1000}
    # The engine mirrors the admission patch: label and nodeSelector.
    assert record.facts.labels[FLAVOR_LABEL] == "a100"
    assert record.facts.node_selector == {"gpu": "a100"}


def test_pod_without_a_split_resource_gets_no_flavor() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    eng.observe_pod(PodFacts("team", "cpu-only", {"cpu": 1000}, gated=True))
    out = eng.decide()
    assert out.admitted
    assert not out.flavors
    assert eng.pods["team/cpu-only"].flavor is None


def test_node_selector_rules_out_a_flavor() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    eng.observe_pod(gpu_pod("team", "p", selector={"gpu": "h100"}))
    assert eng.decide().flavors == {"team/p": ("h100", {"gpu": "h100"})}


def test_required_node_affinity_rules_out_a_flavor() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    not_a100 = ((("gpu", "NotIn", ("a100",)),),)
    eng.observe_pod(gpu_pod("team", "p", affinity=not_a100))
    assert eng.decide().flavors["team/p"][0] == "h100"


@pytest.mark.parametrize(
    ("expression", "allowed"),
    [
        (("gpu", "In", ("a100", "h100")), True),
        (("gpu", "In", ("h100",)), False),
        (("gpu", "Exists", ()), True),
        (("gpu", "DoesNotExist", ()), False),
        (("zone", "In", ("z1",)), True),  # a key the flavor does not fix may hold
        (("mem", "Gt", ("40",)), True),
        (("mem", "Lt", ("40",)), False),
    ],
)
def test_affinity_expressions_against_a_flavor(
    expression: tuple[str, str, tuple[str, ...]], allowed: bool
) -> None:
    flavor = FlavorConfig("a100", {"gpu": "a100", "mem": "80"})
    facts = PodFacts("ns", "p", {GPU: 1}, node_affinity=((expression,),))
    assert allows(flavor, facts) is allowed


def test_affinity_terms_are_ored() -> None:
    terms = ((("gpu", "In", ("h100",)),), (("gpu", "In", ("a100",)),))
    assert allows(A100, PodFacts("ns", "p", {GPU: 1}, node_affinity=terms))


def test_no_allowed_flavor_waits_and_says_why() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    eng.observe_pod(gpu_pod("team", "p", selector={"gpu": "v100"}))
    out = eng.decide()
    assert not out.admitted
    assert out.pending["team/p"] == (
        "waiting: none of ElasticQuota team's flavors (a100, h100) is allowed by the pod's "
        "nodeSelector or node affinity"
    )


def test_a_gated_pod_is_placed_by_its_new_node_selector() -> None:
    # The decider keeps a pending pod's allowed flavors between scans: a pod update (here
    # its nodeSelector, which Kubernetes lets a gated pod change) must renew them.
    eng = cluster(eq("team", **TWO_FLAVORS))
    eng.observe_pod(gpu_pod("team", "p", selector={"gpu": "v100"}))
    assert "none of ElasticQuota team's flavors" in eng.decide().pending["team/p"]
    eng.observe_pod(gpu_pod("team", "p", selector={"gpu": "h100"}))
    assert eng.decide().flavors == {"team/p": ("h100", {"gpu": "h100"})}


# ---------------------------------------------------------------- which flavor a pod waits on


LENT = {
    "flavors": [
        {"name": "h100", "max": {GPU: "2"}},
        {"name": "a100", "min": {GPU: "4"}},
    ]
}
BORROWER = {"flavors": [{"name": "a100", "min": {GPU: "0"}}]}


def test_waits_on_the_first_flavor_where_reclaim_makes_room() -> None:
    # h100 is at team-a's max; team-a lent its a100 min to team-b, which uses all of a100.
    eng = cluster(eq("team-a", **LENT), eq("team-b", **BORROWER), simulated=False, reclaim_delay=30)
    for i in range(2):
        eng.observe_pod(gpu_pod("team-a", f"h{i}", selector={"gpu": "h100"}))
    for i in range(4):
        eng.observe_pod(gpu_pod("team-b", f"b{i}"))
    eng.decide(0.0)
    assert {r.flavor for r in eng.pods.values() if r.quota == "team-b"} == {"a100"}
    eng.observe_pod(gpu_pod("team-a", "new"))
    out = eng.decide(1.0)
    record = eng.pods["team-a/new"]
    assert record.state is PodState.PENDING
    # Not h100 (first in order, but team-a's max is reached there): a100, where it fits
    # team-a's runtime and only team-b's lent quota stands in the way.
    assert record.flavor == "a100"
    assert out.pending["team-a/new"].startswith("does not fit in the cluster: nvidia.com/gpu@a100")
    # team-b went above its runtime when the pod's demand came to a100, at 1.0.
    assert "lent to ElasticQuota team-b, reclaimed in 30 s" in out.pending["team-a/new"]
    out = eng.decide(31.0)
    assert [e.quota for e in out.evictions] == ["team-b"]
    eng.forget_pod(out.evictions[0].pod)
    out = eng.decide(32.0)
    assert out.flavors == {"team-a/new": ("a100", {"gpu": "a100"})}


def test_waits_on_the_first_allowed_flavor_when_none_would_fit() -> None:
    spec = {
        "flavors": [
            {"name": "a100", "max": {GPU: "1"}},
            {"name": "h100", "max": {GPU: "1"}},
        ]
    }
    eng = cluster(eq("team", **spec))
    eng.observe_pod(gpu_pod("team", "p", 2))
    out = eng.decide()
    assert eng.pods["team/p"].flavor == "a100"
    assert out.pending["team/p"].startswith(
        "does not fit in ElasticQuota team: nvidia.com/gpu@a100"
    )
    member = eng.tree.member("team")
    assert member is not None
    # Its demand counts on a100 only (capped by a100's max), none on h100.
    assert (member.demand[f"{GPU}@a100"], member.demand[f"{GPU}@h100"]) == (1, 0)


def test_preemption_within_the_flavor_it_waits_on() -> None:
    spec = {"flavors": [{"name": "a100", "max": {GPU: "2"}}, {"name": "h100", "max": {GPU: "0"}}]}
    eng = cluster(eq("team", **spec))
    for i in range(2):
        eng.observe_pod(gpu_pod("team", f"low{i}", priority=0))
        eng.decide()
    eng.observe_pod(gpu_pod("team", "high", priority=10))
    out = eng.decide()
    assert [e.kind for e in out.evictions] == ["Preempted"]
    assert eng.pods["team/high"].state is PodState.ADMITTED
    assert eng.pods["team/high"].flavor == "a100"


# ---------------------------------------------------------------- running pods, changes


def test_a_running_pod_stays_on_its_labelled_or_bound_flavor() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS))
    eng.observe_pod(gpu_pod("team", "lab", gated=False, labels={FLAVOR_LABEL: "h100"}))
    eng.observe_pod(gpu_pod("team", "bound", gated=False, node="h"))
    eng.observe_pod(gpu_pod("team", "free", gated=False))
    assert eng.pods["team/lab"].flavor == "h100"
    assert eng.pods["team/bound"].flavor == "h100"
    assert eng.pods["team/free"].flavor == "a100"


def test_a_flavor_that_appears_later_is_used_then() -> None:
    eng = cluster(eq("team", **TWO_FLAVORS), flavors=(H100,))
    eng.observe_pod(gpu_pod("team", "p"))
    assert eng.decide().flavors["team/p"][0] == "h100"
    eng.observe_pod(gpu_pod("team", "q"))
    eng.set_flavor(A100)
    eng.set_cluster_node("a", {GPU: 4}, {"gpu": "a100"})
    out = eng.decide()
    assert out.flavors["team/q"][0] == "a100"
    assert eng.pods["team/p"].flavor == "h100"  # admitted pods stay where they are


def test_unmanaged_pods_on_a_flavor_node_take_its_capacity() -> None:
    eng = cluster(eq("team", flavors=[{"name": "a100"}, {"name": "h100"}]))
    eng.observe_pod(PodFacts("kube-system", "daemon", {GPU: 3}, node_name="a"))
    assert eng.tree.root_total(f"{GPU}@a100") == 1
    eng.forget_pod("kube-system/daemon")
    assert eng.tree.root_total(f"{GPU}@a100") == 4


# ---------------------------------------------------------------- rules


def test_min_sum_is_checked_per_flavor_and_resource() -> None:
    parent = coh("org", flavors=[{"name": "a100", "min": {GPU: "4"}}])
    structure = Structure({"org": parent})
    child = eq("team", "org", flavors=[{"name": "a100", "min": {GPU: "6"}}])
    verdict = check_apply(structure, child, flavors={"a100"})
    assert verdict.message == (
        "ElasticQuota team: min nvidia.com/gpu@a100 6 would make the children of Cohort org "
        "need 6 in all, over org's min of 4"
    )


def test_min_above_max_per_flavor() -> None:
    config = eq("team", flavors=[{"name": "a100", "min": {GPU: "3"}, "max": {GPU: "2"}}])
    verdict = check_apply(Structure({}), config)
    assert verdict.message == "ElasticQuota team: min nvidia.com/gpu@a100 3 is above max 2"
    assert tree_problems(Structure({"team": config}))["team"].reason == "MinAboveMax"


def test_a_missing_flavor_is_a_warning_until_it_exists() -> None:
    config = eq("team", **TWO_FLAVORS)
    verdict = check_apply(Structure({}), config, flavors={"a100"})
    assert verdict.allowed
    assert verdict.warnings == [
        "ElasticQuota team: ResourceFlavor h100 does not exist yet; no pod is charged to it "
        "until it does"
    ]
    assert check_apply(Structure({}), config, flavors={"a100", "h100"}).warnings == []


# ---------------------------------------------------------------- derived GPU memory


A100_80 = FlavorConfig("a100", {"gpu": "a100"}, 80 * 2**30)
H100_94 = FlavorConfig("h100", {"gpu": "h100"}, 94 * 2**30)


def test_gpu_memory_is_derived_from_the_gpu_count() -> None:
    config = eq("team", flavors=[{"name": "a100"}, {"name": "h100"}])
    assert charge(config, {GPU: 2}, A100_80) == {GPU: 2, "quotree.io/gpu-memory": 160 * 2**30}
    split = eq("team", flavors=[{"name": "a100", "max": {"quotree.io/gpu-memory": "1Ti"}}])
    assert charge(split, {GPU: 1}, A100_80) == {GPU: 1, "quotree.io/gpu-memory@a100": 80 * 2**30}


def test_a_quota_written_in_gpu_memory() -> None:
    # 250Gi of GPU memory over both models: three A100s (240Gi), then no room for an H100.
    spec = {
        "max": {"quotree.io/gpu-memory": "250Gi"},
        "flavors": [{"name": "a100", "max": {GPU: "3"}}, {"name": "h100"}],
    }
    eng = cluster(eq("team", **spec), flavors=(A100_80, H100_94))
    assert eng.tree.capacity["quotree.io/gpu-memory"] == (4 * 80 + 4 * 94) * 2**30
    for i in range(4):
        eng.observe_pod(gpu_pod("team", f"p{i}"))
        eng.decide()
    assert [eng.pods[f"team/p{i}"].state for i in range(4)] == [PodState.ADMITTED] * 3 + [
        PodState.PENDING
    ]
    # It fits no flavor, so it waits on the first (a100), short of a100 and of memory.
    assert eng.pods["team/p3"].flavor == "a100"
    assert (
        "quotree.io/gpu-memory: used 240Gi + request 80Gi > runtime 250Gi"
        in eng.pods["team/p3"].reason
    )
    report = eng.report("team")
    assert report.used["quotree.io/gpu-memory"] == 240 * 2**30


# ---------------------------------------------------------------- maintenance mode


def test_maintenance_mode_admits_and_evicts_nothing_but_accounts() -> None:
    lender = eq("lender", min={GPU: "2"})
    borrower = eq("borrower", min={GPU: "0"})
    eng = cluster(lender, borrower, simulated=False, reclaim_delay=0.0, a100=4, h100=0)
    for i in range(4):
        eng.observe_pod(gpu_pod("borrower", f"b{i}"))
    eng.decide(0.0)
    eng.set_maintenance("QUOTREE_MAINTENANCE is set")
    eng.observe_pod(gpu_pod("lender", "l0"))
    out = eng.decide(100.0)
    assert not out.admitted
    assert not out.evictions  # the borrower holds lent quota, and keeps it
    assert out.pending["lender/l0"] == (
        "waiting: maintenance mode (QUOTREE_MAINTENANCE is set): quotree admits nothing new "
        "and evicts nothing until it ends"
    )
    # Still accounting: the lender's demand raised its runtime.
    assert eng.report("lender").runtime[GPU] == 1
    assert eng.report("lender").pending_pods == 1
    eng.forget_pod("borrower/b3")  # pods still come and go
    assert eng.report("borrower").used[GPU] == 3
    eng.set_maintenance(None)
    out = eng.decide(101.0)
    assert [a[0] for a in out.admitted] == ["lender/l0"]


def test_maintenance_annotation_on_a_top_level_cohort_covers_its_subtree() -> None:
    def org(on: bool) -> MemberConfig:
        annotations = {"quotree.io/maintenance": "true"} if on else {}
        return parse_member(
            {"kind": "Cohort", "metadata": {"name": "org", "annotations": annotations}}
        )

    eng = cluster(org(True), eq("inside", "org"), eq("outside"), a100=4, h100=0)
    eng.observe_pod(gpu_pod("inside", "p"))
    eng.observe_pod(gpu_pod("outside", "q"))
    out = eng.decide()
    assert [a[0] for a in out.admitted] == ["outside/q"]
    assert out.pending["inside/p"].startswith(
        "waiting: maintenance mode (annotation quotree.io/maintenance on Cohort org)"
    )
    eng.set_config(org(False))
    assert [a[0] for a in eng.decide().admitted] == ["inside/p"]
