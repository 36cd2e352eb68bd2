"""Pending pods hold their quota's guarantee on the other flavors they may use (`hold.py`).

docs/design/flavors.md, "Pending pods hold their quota's guarantee on their other flavors". The
cases the rule was weighed on: (a) a quota frees a GPU on the flavor its pending pod
does not wait on (old rule: lent to a hungry sibling, taken back, the sibling
reclaimed 30 s later); (b) an idle quota whose guarantee is lent on both flavors gets
one pending pod (the whole hold, the default, reclaims on both flavors: one pod evicted
for nothing; the narrower rules reclaim on the wait flavor only); (c) a pod its own
quota holds back (by cpu) while a sibling wants the GPUs of its other flavor.
"""

from __future__ import annotations

from quotree.engine import Engine, PodState
from quotree.flavor_spec import FlavorConfig
from quotree.models import MemberConfig
from quotree.options import EngineOptions
from quotree.podfacts import PodFacts
from tests.unit.builders import pod
from tests.unit.objects import quota_config as eq

GPU = "nvidia.com/gpu"
A100 = FlavorConfig("a100", {"gpu": "a100"})
H100 = FlavorConfig("h100", {"gpu": "h100"})
TWO_EACH = {"flavors": [{"name": "a100", "min": {GPU: "2"}}, {"name": "h100", "min": {GPU: "2"}}]}


def gpu_pod(
    namespace: str, name: str, *, flavor: str | None = None, gated: bool = True
) -> PodFacts:
    """A pod asking for one GPU, on `flavor` if named."""
    selector = {"gpu": flavor} if flavor else {}
    return pod(namespace, name, {GPU: 1}, created=0.0, gated=gated, selector=selector)


def engine(holds: bool, *configs: MemberConfig) -> Engine:
    eng = Engine(reclaim_delay=30.0, options=EngineOptions(holds=holds))
    for flavor in (A100, H100):
        eng.set_flavor(flavor)
    for config in configs:
        eng.set_config(config)
    eng.set_cluster_node("a", {GPU: 4}, {"gpu": "a100"})
    eng.set_cluster_node("h", {GPU: 4}, {"gpu": "h100"})
    return eng


def admitted_on(eng: Engine, quota: str, flavor: str) -> list[str]:
    return sorted(
        r.key
        for r in eng.pods.values()
        if r.quota == quota and r.state is PodState.ADMITTED and r.flavor == flavor
    )


def run(eng: Engine, start: float, end: float) -> list[str]:
    """decide() every second from `start` to `end`, evictions carried out; the evicted."""
    evicted = []
    now = start
    while now <= end:
        for eviction in eng.decide(now).evictions:
            evicted.append(eviction.pod)
            eng.forget_pod(eviction.pod)
        now += 1.0
    return evicted


def full_cluster(holds: bool) -> Engine:
    """team-a and team-b each run 2 GPUs on each flavor (their mins: the cluster is full)
    and each has a pod waiting (on a100, the first flavor)."""
    eng = engine(holds, eq("team-a", **TWO_EACH), eq("team-b", **TWO_EACH))
    for team in ("team-a", "team-b"):
        for flavor in ("a100", "h100"):
            for i in range(2):
                eng.observe_pod(gpu_pod(team, f"{flavor}-{i}", flavor=flavor, gated=False))
        eng.observe_pod(gpu_pod(team, "waiting"))
    assert run(eng, 0.0, 0.0) == []
    assert eng.pods["team-a/waiting"].state is PodState.PENDING
    assert eng.pods["team-b/waiting"].flavor == "a100"
    return eng


# ---------------------------------------------------------------- (a) no lend, no reclaim


def more_pods(eng: Engine) -> None:
    """Each team gets one more pod: both queues are looked at again (in the benchmark,
    room growing in another resource does the same)."""
    for team in ("team-a", "team-b"):
        eng.observe_pod(gpu_pod(team, "x-later"))  # after "waiting" in the queue (by name)


def test_a_gpu_the_quota_frees_on_another_flavor_goes_to_its_own_waiting_pod() -> None:
    eng = full_cluster(True)
    eng.forget_pod("team-b/h100-0")  # team-b frees an h100 GPU; its pod waits on a100
    more_pods(eng)
    # team-b keeps it: its demand on h100 stays at its min, team-a's runtime there does
    # not grow, so team-a's waiting pod (looked at first, by name) is not let in on it.
    member = eng.tree.member("team-b")
    assert member is not None
    assert eng.holds.held("team-b") == {f"{GPU}@h100": 1}
    assert member.demand[f"{GPU}@h100"] == 2
    evicted = run(eng, 1.0, 40.0)
    assert evicted == []
    assert eng.pods["team-b/waiting"].state is PodState.ADMITTED
    assert eng.pods["team-b/waiting"].flavor == "h100"
    assert eng.pods["team-a/waiting"].state is PodState.PENDING
    # Admitted, it is charged on h100 only; h100 is at team-b's min: nothing more to hold
    # for x-later, which waits on a100.
    assert eng.holds.held("team-b") == {}
    assert member.demand[f"{GPU}@h100"] == 2
    assert member.demand[f"{GPU}@a100"] == 3


def test_the_old_rule_lends_the_freed_gpu_and_reclaims_it_30s_later() -> None:
    # What the hold removes (no holds: pending pods count on their wait flavor only).
    eng = full_cluster(False)
    eng.forget_pod("team-b/h100-0")
    more_pods(eng)
    assert run(eng, 1.0, 1.0) == []
    assert eng.pods["team-a/waiting"].flavor == "h100"
    assert eng.pods["team-a/waiting"].state is PodState.ADMITTED  # lent team-b's GPU
    assert eng.pods["team-b/waiting"].flavor == "h100"  # and team-b waits to get it back
    evicted = run(eng, 2.0, 40.0)
    assert len(evicted) == 1
    assert evicted[0].startswith("team-a/")
    assert eng.pods["team-b/waiting"].state is PodState.ADMITTED


def test_nothing_is_held_when_the_freed_flavor_is_not_allowed_to_the_waiting_pod() -> None:
    eng = engine(True, eq("team-a", **TWO_EACH), eq("team-b", **TWO_EACH))
    for team in ("team-a", "team-b"):
        for flavor in ("a100", "h100"):
            for i in range(2):
                eng.observe_pod(gpu_pod(team, f"{flavor}-{i}", flavor=flavor, gated=False))
    eng.observe_pod(gpu_pod("team-b", "a100-only", flavor="a100"))
    eng.observe_pod(gpu_pod("team-a", "waiting"))
    run(eng, 0.0, 0.0)
    eng.forget_pod("team-b/h100-0")
    assert eng.holds.held("team-b") == {}
    eng.observe_pod(gpu_pod("team-a", "x-later"))  # team-a's queue is looked at again
    run(eng, 1.0, 1.0)
    # team-b's pod may not use h100: the GPU is lent to team-a as before.
    assert eng.pods["team-a/waiting"].state is PodState.ADMITTED
    assert eng.pods["team-a/waiting"].flavor == "h100"


# ---------------------------------------------------------------- (b) one eviction per pod


def lent_on_both(holds: bool) -> Engine:
    """team-a is idle; team-b (min 0) borrows team-a's whole guarantee on both flavors."""
    borrower = {"flavors": [{"name": "a100"}, {"name": "h100"}]}
    borrower["flavors"][0]["min"] = {GPU: "0"}
    borrower["flavors"][1]["min"] = {GPU: "0"}
    eng = engine(holds, eq("team-a", **TWO_EACH), eq("team-b", **borrower))
    for flavor in ("a100", "h100"):
        for i in range(4):
            eng.observe_pod(gpu_pod("team-b", f"{flavor}-{i}", flavor=flavor))
    assert run(eng, 0.0, 0.0) == []
    assert len(admitted_on(eng, "team-b", "a100")) == len(admitted_on(eng, "team-b", "h100")) == 4
    return eng


def test_the_default_rule_reclaims_only_on_the_flavor_the_pod_waits_on() -> None:
    # The hold puts team-b over its runtime on both flavors, but reclaim is for the waiting
    # pod only: it waits on a100, so one a100 pod goes and team-b keeps its h100 pods
    # (docs/semantics.md, "Reclaim (getting lent quota back), and only when it pays").
    assert EngineOptions().holds
    eng = lent_on_both(True)
    eng.observe_pod(gpu_pod("team-a", "new"))
    evicted = run(eng, 1.0, 40.0)
    assert len(evicted) == 1
    assert eng.pods["team-a/new"].state is PodState.ADMITTED
    assert len(admitted_on(eng, "team-b", "h100")) == 4


# ---------------------------------------------------------------- (c) held back by cpu


def cpu_bound(holds: bool) -> Engine:
    """team-a's pod waits for cpu (its own quota's max); team-b wants every h100 GPU."""
    team_a = {
        "min": {"cpu": "1"},
        "max": {"cpu": "1"},
        "flavors": [
            {"name": "a100", "min": {GPU: "0"}, "max": {GPU: "0"}},
            {"name": "h100", "min": {GPU: "2"}},
        ],
    }
    team_b = {"flavors": [{"name": "h100", "min": {GPU: "0"}}]}
    eng = engine(holds, eq("team-a", **team_a), eq("team-b", **team_b))
    eng.set_cluster_node("c", {"cpu": 8000})
    eng.observe_pod(PodFacts("team-a", "cpu-only", {"cpu": 1000}, gated=False))
    eng.observe_pod(PodFacts("team-a", "gpu", {"cpu": 1000, GPU: 1}, gated=True))
    run(eng, 0.0, 0.0)
    for i in range(4):
        eng.observe_pod(gpu_pod("team-b", f"h100-{i}", flavor="h100"))
    run(eng, 1.0, 1.0)
    return eng


def test_a_pod_its_quota_holds_back_keeps_the_guarantee_on_its_other_flavors() -> None:
    # What the benchmark's contended GPU pods do (held back by cpu at their own quota):
    # the pod waits on a100 (its first flavor), and team-a lends none of the h100
    # guarantee the pod would take, so when the cpu comes back it runs at once.
    eng = cpu_bound(True)
    assert eng.holds.held("team-a") == {f"{GPU}@h100": 1}
    assert len(admitted_on(eng, "team-b", "h100")) == 3
    eng.forget_pod("team-a/cpu-only")
    assert run(eng, 2.0, 40.0) == []
    assert eng.pods["team-a/gpu"].state is PodState.ADMITTED
    assert eng.pods["team-a/gpu"].flavor == "h100"


def test_without_it_the_guarantee_is_lent_and_reclaimed_when_the_cpu_comes() -> None:
    eng = cpu_bound(False)
    assert len(admitted_on(eng, "team-b", "h100")) == 4
    eng.forget_pod("team-a/cpu-only")
    evicted = run(eng, 2.0, 40.0)
    assert len(evicted) == 1
    assert evicted[0].startswith("team-b/")
    assert eng.pods["team-a/gpu"].state is PodState.ADMITTED


# ---------------------------------------------------------------- keeping the hold current


def test_the_hold_is_part_of_demand_and_a_full_recomputation_keeps_it() -> None:
    eng = full_cluster(True)
    eng.forget_pod("team-b/h100-0")
    member = eng.tree.member("team-b")
    assert member is not None
    before = dict(member.demand), dict(member.runtime)
    eng.tree.recompute()
    member = eng.tree.member("team-b")
    assert member is not None
    assert (dict(member.demand), dict(member.runtime)) == before
    assert eng.report("team-b").request[f"{GPU}@h100"] == 2


def test_a_pod_that_narrows_its_node_selector_stops_holding_the_flavor_it_left() -> None:
    # 3 GPUs fit neither flavor (max 2 on each): the pod waits on a100, the first, and
    # holds team-a's idle h100 guarantee. Told to run on a100 only (a gated pod may gain
    # scheduling constraints), it holds nothing on h100 any more.
    capped = {
        "flavors": [
            {"name": "a100", "min": {GPU: "2"}, "max": {GPU: "2"}},
            {"name": "h100", "min": {GPU: "2"}, "max": {GPU: "2"}},
        ]
    }
    eng = engine(True, eq("team-a", **capped))
    eng.observe_pod(PodFacts("team-a", "big", {GPU: 3}, gated=True))
    eng.decide(0.0)
    assert eng.pods["team-a/big"].flavor == "a100"
    assert eng.holds.held("team-a") == {f"{GPU}@h100": 2}
    eng.observe_pod(PodFacts("team-a", "big", {GPU: 3}, gated=True, node_selector={"gpu": "a100"}))
    eng.decide(1.0)
    assert eng.pods["team-a/big"].state is PodState.PENDING
    assert eng.holds.held("team-a") == {}
