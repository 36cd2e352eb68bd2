"""Changing a pod is an operation of its own (`intake.PodIntake.move`): when a configuration
moves pods (another quota covers their namespace, another flavor list, another tree) or a
gated pod's constraints change, its charge moves from the old quotas to the new ones and
its record stays, an admitted pod on the flavor it runs on."""

from __future__ import annotations

from quotree.engine import Engine, PodState
from quotree.flavor_spec import FlavorConfig
from tests.unit.builders import pod
from tests.unit.objects import quota_config as eq

GPU = "nvidia.com/gpu"
A100 = FlavorConfig("a100", {"gpu": "a100"})
H100 = FlavorConfig("h100", {"gpu": "h100"})
BOTH = {"flavors": [{"name": "a100", "min": {GPU: "2"}}, {"name": "h100", "min": {GPU: "2"}}]}


def gpu_engine(*, tree: str | None = None) -> Engine:
    """Quota `team` split over a100 and h100 (4 GPUs of each), a100 filled by one pod."""
    eng = Engine(reclaim_delay=30.0)
    for flavor in (A100, H100):
        eng.set_flavor(flavor)
    eng.set_config(eq("team", **BOTH, **({"tree": tree} if tree else {})))
    eng.set_cluster_node("a", {GPU: 4}, {"gpu": "a100"})
    eng.set_cluster_node("h", {GPU: 4}, {"gpu": "h100"})
    eng.observe_pod(pod("team", "fill", {GPU: 4}, created=0.0, selector={"gpu": "a100"}))
    eng.decide(0.0)
    return eng


def test_an_admitted_pod_keeps_its_flavor_when_its_quota_moves_to_another_tree() -> None:
    """The gap of the old replay (`release` observed the pod again without its flavor
    label): an admitted pod whose last seen facts carry no `quotree.io/flavor` label was
    charged on the first flavor its quota allows in the new tree, not the one it runs on."""
    eng = gpu_engine()
    eng.observe_pod(pod("team", "p", {GPU: 1}, created=1.0))
    eng.decide(1.0)
    record = eng.pods["team/p"]
    assert (record.state, record.flavor) == (PodState.ADMITTED, "h100")  # a100 is full
    seq = record.admitted_seq
    # The gate's removal seen, as the test's pod builder writes it: no flavor label.
    eng.observe_pod(pod("team", "p", {GPU: 1}, created=1.0, gated=False))
    eng.set_config(eq("team", tree="budgets", **BOTH))
    eng.decide(2.0)
    assert eng.tree_of("team") is eng.trees["budgets"]
    assert eng.pods["team/p"] is record  # the record stays
    assert (record.state, record.flavor, record.admitted_seq) == (PodState.ADMITTED, "h100", seq)
    eng.refresh()
    assert eng.report("team").used == {f"{GPU}@a100": 4, f"{GPU}@h100": 1}


def test_pods_a_new_tree_covers_keep_their_records_and_admission_order() -> None:
    eng = Engine()
    eng.set_config(eq("team", namespace="shared", min={"cpu": "10"}))
    eng.set_cluster_node("n", {"cpu": 20_000})
    for i in range(3):
        eng.observe_pod(pod("shared", f"p{i}", {"cpu": 1000}, created=float(i)))
        eng.decide(float(i))
    records = dict(eng.pods)
    order = [r.admitted_seq for r in records.values()]
    # Another tree's quota covers the namespace: every pod is charged there too.
    eng.set_config(
        eq("proj", namespace="lab", namespaces=["shared"], max={"cpu": "100"}, tree="projects")
    )
    eng.decide(5.0)
    assert dict(eng.pods) == records
    assert all(r.also == ("proj",) and r.state is PodState.ADMITTED for r in records.values())
    assert [r.admitted_seq for r in records.values()] == order
    eng.refresh()
    assert eng.report("proj").used == {"cpu": 3000}
    assert eng.report("team").used == {"cpu": 3000}


def test_a_gated_pod_whose_selector_changes_is_placed_again_keeping_its_record() -> None:
    eng = gpu_engine()
    eng.observe_pod(pod("team", "w", {GPU: 8}, created=1.0, selector={"gpu": "a100"}))
    eng.decide(1.0)
    record = eng.pods["team/w"]
    assert (record.state, record.flavor) == (PodState.PENDING, "a100")
    eng.observe_pod(pod("team", "w", {GPU: 8}, created=1.0, selector={"gpu": "h100"}))
    assert eng.pods["team/w"] is record
    assert record.flavor == "h100"  # it allows h100 only now, and is charged there
    eng.refresh()
    assert eng.tree.pod_request("team").get(f"{GPU}@a100") == 4  # the filler's only
    assert eng.tree.pod_request("team").get(f"{GPU}@h100") == 8
