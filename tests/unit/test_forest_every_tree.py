"""Several trees, each on its own terms (docs/reference/objects.md, "Several trees";
docs/design/forests.md, "Several trees (forests)"): each counts a pod in its own resource
names (a team tree that splits GPUs by flavor and a project tree written in plain
`nvidia.com/gpu`), and in-quota preemption is tried in every tree that holds a pod back."""

from __future__ import annotations

from quotree.engine import Engine, PodState
from quotree.flavor_spec import FlavorConfig
from quotree_kubectl.let_in import let_in
from tests.unit.builders import cohort, engine, pod, quota, states
from tests.unit.objects import quota_config

GPU = "nvidia.com/gpu"


def team_and_project(project_max: int) -> Engine:
    """team-a takes A100s and H100s by flavor (2 each); proj-x, in the tree `projects`,
    caps team-a's namespace at `project_max` GPUs of any model."""
    eng = Engine(reclaim_delay=30.0)
    eng.set_flavor(FlavorConfig("a100", {"gpu": "a100"}))
    eng.set_flavor(FlavorConfig("h100", {"gpu": "h100"}))
    eng.set_config(
        quota_config(
            "team-a",
            flavors=[
                {"name": "a100", "min": {GPU: "2"}, "max": {GPU: "2"}},
                {"name": "h100", "min": {GPU: "2"}, "max": {GPU: "2"}},
            ],
        )
    )
    eng.set_config(
        quota_config("proj-x", namespace="team-a", tree="projects", max={GPU: str(project_max)})
    )
    eng.set_cluster_node("a", {GPU: 4}, {"gpu": "a100"})
    eng.set_cluster_node("h", {GPU: 4}, {"gpu": "h100"})
    return eng


def test_a_project_in_plain_gpus_counts_the_gpus_a_team_splits_by_flavor() -> None:
    eng = team_and_project(project_max=3)
    for i in range(4):
        eng.observe_pod(pod("team-a", f"p{i}", {GPU: 1}, created=float(i)))
        eng.decide(float(i))
    states = {key: record.state for key, record in eng.pods.items()}
    assert states == {
        "team-a/p0": PodState.ADMITTED,
        "team-a/p1": PodState.ADMITTED,
        "team-a/p2": PodState.ADMITTED,
        "team-a/p3": PodState.PENDING,
    }
    # The project holds the 3 GPUs in its own name for them, whatever their model.
    assert eng.report("proj-x").used == {GPU: 3}
    assert eng.report("team-a").used == {f"{GPU}@a100": 2, f"{GPU}@h100": 1}


def test_a_pod_leaving_gives_its_gpu_back_to_the_project_in_its_names() -> None:
    eng = team_and_project(project_max=3)
    for i in range(4):
        eng.observe_pod(pod("team-a", f"p{i}", {GPU: 1}, created=float(i)))
        eng.decide(float(i))
    eng.forget_pod("team-a/p0")
    admitted = [key for key, _ in eng.decide(10.0).admitted]
    assert admitted == ["team-a/p3"]
    assert eng.report("proj-x").used == {GPU: 3}
    assert eng.report("proj-x").request == {GPU: 3}


def test_in_quota_preemption_is_tried_in_the_tree_that_holds_the_pod_back() -> None:
    # team-a and team-b have room; proj-x (tree projects, over both namespaces) is full
    # with team-b's low-priority pod. team-a's urgent pod fits team-a but not proj-x: a
    # lower-priority pod of proj-x makes room, as it would within one tree.
    eng = engine(
        cohort("org", min=20),
        quota("team-a", "org", min=10),
        quota("team-b", "org", min=10),
        quota("proj-x", namespace="team-a", namespaces=("team-b",), max=4, tree="projects"),
        capacity=20,
    )
    eng.observe_pod(pod("team-b", "low", 4, priority=1))
    eng.decide(0.0)
    eng.observe_pod(pod("team-a", "urgent", 4, priority=5))
    eng.decide(1.0)
    assert states(eng) == {"team-b/low": "preempted", "team-a/urgent": "admitted"}
    assert eng.report("proj-x").used == {"x": 4}


def test_kubectl_quotree_why_explains_the_tree_that_holds_the_pod_back() -> None:
    # team-a has room; proj-x (tree projects) does not: `why` explains proj-x's numbers,
    # from the engine's own admission check (it explained team-a's, where nothing is short).
    eng = engine(
        cohort("org", min=20),
        quota("team-a", "org", min=10),
        quota("proj-x", namespace="team-a", max=6, tree="projects"),
        capacity=20,
    )
    eng.observe_pod(pod("team-a", "a-1", 4))
    eng.observe_pod(pod("team-a", "a-2", 4))
    eng.decide(0.0)
    lines = let_in(eng, eng.pods["team-a/a-2"], "(after the delay)")
    assert lines[0] == "x: proj-x uses 4 + request 4 against a runtime of 6: short by 2"
