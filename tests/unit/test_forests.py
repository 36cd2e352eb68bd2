"""Several trees (docs/reference/objects.md, "Several trees"): a pod is charged to one quota in
every tree that covers its namespace and admitted only when it fits in all of them."""

from __future__ import annotations

import pytest
from builders import arrive, cohort, engine, pod, quota, states

from quotree.engine import PodState
from quotree.models import DEFAULT_TREE, MemberConfig, parse_member, quota_label
from quotree.rules import check_apply_forest
from quotree.runtime import ROOT
from quotree.simulate import SimulationError, simulate_documents

P = "projects"


def org_and_projects(**kwargs: object) -> list[MemberConfig]:
    """team-a and team-b under engineering (default tree); proj-x over both namespaces
    and proj-y over team-b in the tree `projects`."""
    return [
        cohort("engineering", min=20),
        quota("team-a", "engineering", min=10),
        quota("team-b", "engineering", min=10),
        quota("proj-x", namespace="team-a", namespaces=("team-b",), max=6, tree=P),
        quota("proj-y", namespace="team-b", max=8, tree=P),
    ]


def test_a_pod_that_fits_its_team_but_not_its_project_waits_with_the_project_named() -> None:
    eng = engine(*org_and_projects(), capacity=20)
    arrive(eng, pod("team-a", "a-1", 4), pod("team-a", "a-2", 4))
    assert states(eng) == {"team-a/a-1": "admitted", "team-a/a-2": "pending"}
    reason = eng.pods["team-a/a-2"].reason
    assert reason == (
        "does not fit in ElasticQuota proj-x (tree projects): x: used 4 + request 4 > "
        "runtime 6 (min 0, cap 6)"
    )
    # team-a itself had room: its runtime covers both pods
    assert eng.report("team-a").runtime == {"x": 8}
    assert eng.report("team-a").used == {"x": 4}


def test_the_waiting_pod_is_admitted_once_the_project_has_room() -> None:
    eng = engine(*org_and_projects(), capacity=20, instant_evictions=False)
    arrive(eng, pod("team-a", "a-1", 4), pod("team-a", "a-2", 4))
    assert eng.pods["team-a/a-2"].state is PodState.PENDING
    eng.forget_pod("team-a/a-1")  # finished
    decisions = eng.decide()
    assert [key for key, _ in decisions.admitted] == ["team-a/a-2"]
    assert eng.report("proj-x").used == {"x": 4}
    assert eng.report("team-a").used == {"x": 4}


def test_project_room_from_another_namespace_wakes_the_waiting_pod() -> None:
    """The pod waits in team-a's queue; room appears in proj-x because a pod of team-b,
    which proj-x also covers, leaves: the team-a queue is looked at again."""
    eng = engine(*org_and_projects(), capacity=20, instant_evictions=False)
    label = {quota_label(P): "proj-x"}
    arrive(eng, pod("team-b", "b-1", 4, labels=label), pod("team-a", "a-1", 4))
    assert eng.pods["team-a/a-1"].state is PodState.PENDING
    eng.forget_pod("team-b/b-1")
    assert [key for key, _ in eng.decide().admitted] == ["team-a/a-1"]


def test_status_counts_the_pods_charged_to_a_quota_in_every_tree() -> None:
    eng = engine(*org_and_projects(), capacity=20)
    arrive(eng, pod("team-a", "a-1", 4), pod("team-a", "a-2", 4), pod("team-b", "b-1", 1))
    x, y = eng.report("proj-x"), eng.report("proj-y")
    assert (x.admitted_pods, x.pending_pods, x.used) == (1, 1, {"x": 4})
    assert (y.admitted_pods, y.pending_pods, y.used) == (1, 0, {"x": 1})
    team_a = eng.report("team-a")
    assert (team_a.admitted_pods, team_a.pending_pods) == (1, 1)
    assert eng.report("engineering").used == {"x": 5}


def test_resolution_picks_one_quota_per_covering_tree() -> None:
    eng = engine(*org_and_projects())
    both = eng.resolve("team-a", {})
    assert (both.quota, both.charges) == ("team-a", (("default", "team-a"), (P, "proj-x")))
    assert both.labels() == {
        "quotree.io/quota-name": "team-a",
        f"quotree.io/quota-name.{P}": "proj-x",
    }
    # in team-b two project quotas are candidates: the one in the pod's own namespace wins
    assert eng.resolve("team-b", {}).others == ("proj-y",)
    assert eng.resolve("team-b", {quota_label(P): "proj-x"}).others == ("proj-x",)
    wrong = eng.resolve("team-a", {quota_label(P): "proj-y"})
    assert wrong.quota is None
    assert wrong.error == (
        "ElasticQuota proj-y does not cover namespace team-a in tree projects "
        "(quotas covering it: proj-x)"
    )
    assert eng.resolve("kube-system", {}).charges == ()


def test_an_ambiguous_namespace_in_another_tree_names_that_tree_s_label() -> None:
    eng = engine(
        quota("team", min=5),
        quota("p1", namespace="shared", tree=P),
        quota("p2", namespace="elsewhere", namespaces=("shared",), tree=P),
        quota("p3", namespace="other", namespaces=("team",), tree=P),
        quota("p4", namespace="other2", namespaces=("team",), tree=P),
    )
    error = eng.resolve("team", {}).error
    assert error == (
        "namespace team is covered by several ElasticQuotas in tree projects (p3, p4); "
        "label the pod quotree.io/quota-name.projects=<one of them>"
    )
    assert eng.resolve("team", {quota_label(P): "p4"}).charges == (
        (DEFAULT_TREE, "team"),
        (P, "p4"),
    )


def test_a_namespace_only_another_tree_covers_is_charged_there_and_held_in_the_default() -> None:
    eng = engine(quota("team", min=4), quota("proj", namespace="lab", tree=P), capacity=10)
    arrive(eng, pod("lab", "l-1", 7))
    record = eng.pods["lab/l-1"]
    assert (record.quota, record.also, record.state) == ("proj", (), PodState.ADMITTED)
    # The default tree does not charge the pod, but the pod holds 7 of the cluster's 10.
    eng.tree.settle()
    assert eng.tree.root.runtime["x"] == 3
    arrive(eng, pod("team", "t-1", 4))
    assert eng.pods["team/t-1"].state is PodState.PENDING
    assert eng.pods["team/t-1"].reason.startswith("does not fit in ElasticQuota team: x: used 0")


def test_unmanaged_pods_hold_capacity_in_every_tree() -> None:
    eng = engine(quota("team", min=1), quota("proj", namespace="team", min=1, tree=P), capacity=10)
    bound = pod("free", "sys", 3, gated=False)
    bound.node_name = "node-1"
    arrive(eng, bound)
    assert eng.pods["free/sys"].state is PodState.UNMANAGED
    for tree in eng.trees.values():
        tree.settle()
        assert tree.root.runtime["x"] == 7
    eng.forget_pod("free/sys")
    for tree in eng.trees.values():
        tree.settle()
        assert tree.root.runtime["x"] == 10


def test_reclaim_in_one_tree_releases_the_pod_in_all_trees() -> None:
    """p1 borrows p2's idle min in the project tree; when p2's pod comes, p1's pod is
    reclaimed, and its usage leaves the organisation tree too."""
    eng = engine(
        quota("team", namespace="n1", namespaces=("n2",), min=10),
        quota("p1", namespace="n1", min=2, tree=P),
        quota("p2", namespace="n2", min=8, tree=P),
        capacity=10,
    )
    arrive(eng, pod("n1", "borrower", 8))
    assert eng.pods["n1/borrower"].state is PodState.ADMITTED
    arrive(eng, pod("n2", "owner", 8))
    assert states(eng) == {"n1/borrower": "reclaimed", "n2/owner": "admitted"}
    assert eng.report("team").used == {"x": 8}
    assert eng.report("team").admitted_pods == 1
    assert eng.report("p1").used == {"x": 0}
    assert eng.report("p2").used == {"x": 8}


def test_preemption_in_one_tree_releases_the_pod_in_all_trees() -> None:
    eng = engine(
        quota("team", max=4),
        quota("proj", namespace="team", max=10, tree=P),
        capacity=10,
    )
    arrive(eng, pod("team", "low", 4, priority=0), pod("team", "high", 4, priority=5))
    assert states(eng) == {"team/low": "preempted", "team/high": "admitted"}
    assert eng.report("proj").used == {"x": 4}
    assert eng.report("proj").admitted_pods == 1


def test_a_non_preemptible_pod_fits_within_min_in_every_tree() -> None:
    eng = engine(quota("team", min=10), quota("proj", namespace="team", min=2, tree=P))
    arrive(eng, pod("team", "np", 3, preemptible=False))
    assert eng.pods["team/np"].reason == (
        "does not fit in ElasticQuota proj (tree projects): x: non-preemptible used 0 + "
        "request 3 > min 2"
    )


def test_an_ancestor_in_another_tree_holds_the_pod_with_that_tree_named() -> None:
    """In the project tree, p2 still holds p1's lent min (the operator's reclaim delay):
    the pod fits p1 but not the project tree's Cohort above it."""
    eng = engine(
        quota("team", namespace="n1", namespaces=("n2",), min=10),
        cohort("portfolio", min=10, max=10, tree=P),
        quota("p1", "portfolio", namespace="n1", min=5, tree=P),
        quota("p2", "portfolio", namespace="n2", min=5, tree=P),
        capacity=20,
        instant_evictions=False,
        reclaim_delay=30.0,
    )
    arrive(eng, pod("n2", "borrower", 10))
    assert eng.pods["n2/borrower"].state is PodState.ADMITTED
    arrive(eng, pod("n1", "owner", 5))
    reason = eng.pods["n1/owner"].reason
    assert reason.startswith(
        "does not fit in Cohort portfolio (tree projects): x: used 10 + request 5 > runtime 10"
    )
    assert "lent to ElasticQuota p2, reclaimed in 30 s" in reason


def test_a_quota_that_moves_to_another_tree_takes_its_pods_along() -> None:
    eng = engine(quota("team", min=10), quota("proj", namespace="team", max=3, tree=P))
    arrive(eng, pod("team", "t-1", 2), pod("team", "t-2", 2))
    assert states(eng) == {"team/t-1": "admitted", "team/t-2": "pending"}
    eng.set_config(quota("proj", namespace="team", max=3, tree="budgets"))
    eng.decide()
    assert eng.tree_of("proj") is eng.trees["budgets"]
    assert not any(eng.trees[P].quota_used("proj").values())
    assert eng.report("proj").used == {"x": 2}
    eng.set_config(quota("proj", namespace="team", max=10, tree="budgets"))
    eng.decide()
    assert states(eng) == {"team/t-1": "admitted", "team/t-2": "admitted"}


def test_the_engine_keeps_the_first_of_two_objects_sharing_a_name_across_trees() -> None:
    eng = engine(quota("dup", namespace="a"))
    eng.set_config(quota("dup", namespace="b", tree=P))
    assert eng.tree_of("dup") is eng.tree
    assert eng.resolve("b", {}).quota is None
    eng.remove_config("dup", kind="ElasticQuota", namespace="a")
    assert eng.tree_of("dup") is eng.trees[P]
    assert eng.resolve("b", {}).charges == ((P, "dup"),)


def forest_configs(*configs: MemberConfig) -> dict[str, dict[str, MemberConfig]]:
    out: dict[str, dict[str, MemberConfig]] = {}
    for config in configs:
        out.setdefault(config.tree, {})[config.name] = config
    return out


def test_rules_a_parent_must_be_in_the_same_tree() -> None:
    forest = forest_configs(cohort("org", min=10), cohort("portfolio", min=10, tree=P))
    verdict = check_apply_forest(forest, quota("team", "portfolio", min=1))
    assert not verdict.allowed
    assert verdict.message == (
        "ElasticQuota team: parent portfolio is in tree projects, not in tree default; "
        "a parent must be in the same tree"
    )
    assert check_apply_forest(forest, quota("team", "portfolio", min=1, tree=P)).allowed


def test_rules_names_are_unique_across_trees() -> None:
    forest = forest_configs(cohort("org", min=10), quota("proj", namespace="lab", tree=P))
    verdict = check_apply_forest(forest, cohort("proj", tree=DEFAULT_TREE))
    assert not verdict.allowed
    assert "the name proj is already taken by ElasticQuota lab/proj" in verdict.message
    assert verdict.message.endswith("(in tree projects)")
    # the same object moving to another tree is not a clash
    assert check_apply_forest(forest, quota("proj", namespace="lab", tree="budgets")).allowed


def test_rules_a_cohort_does_not_leave_its_children_in_another_tree() -> None:
    forest = forest_configs(cohort("org", min=10), quota("team", "org", min=5))
    verdict = check_apply_forest(forest, cohort("org", min=10, tree=P))
    assert verdict.message == (
        "Cohort org: cannot move to tree projects while it has children in tree default (team)"
    )


def test_rules_min_sum_is_per_tree() -> None:
    forest = forest_configs(
        cohort("org", min=10), quota("team", "org", min=10), cohort("portfolio", min=4, tree=P)
    )
    # the default tree's children of org do not count against portfolio, and vice versa
    assert check_apply_forest(forest, quota("p", "portfolio", min=4, tree=P)).allowed
    verdict = check_apply_forest(forest, quota("p", "portfolio", min=5, tree=P))
    assert verdict.message == (
        "ElasticQuota p: min x 5 would make the children of Cohort portfolio need 5 in all, "
        "over portfolio's min of 4"
    )


def test_tree_names_are_checked() -> None:
    obj = {
        "kind": "Cohort",
        "metadata": {"name": "c"},
        "spec": {"tree": "Not_A_Label"},
    }
    with pytest.raises(ValueError, match=r"^Cohort c: spec\.tree: 'Not_A_Label' is not a valid"):
        parse_member(obj)
    obj["spec"] = {"tree": "projects"}
    assert parse_member(obj).tree == "projects"
    obj["spec"] = {}
    assert parse_member(obj).tree == DEFAULT_TREE


def test_the_simulator_refuses_a_parent_in_another_tree() -> None:
    docs = [
        {
            "apiVersion": "quotree.io/v1alpha1",
            "kind": "Cohort",
            "metadata": {"name": "portfolio"},
            "spec": {"tree": P},
        },
        {
            "apiVersion": "quotree.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "team", "namespace": "team"},
            "spec": {"parent": "portfolio"},
        },
    ]
    with pytest.raises(SimulationError, match="a parent must be in the same tree"):
        simulate_documents(("test", d) for d in docs)


def test_every_tree_has_the_cluster_root_with_the_whole_capacity() -> None:
    eng = engine(*org_and_projects(), capacity=20)
    for tree in eng.trees.values():
        tree.settle()
        assert tree.root.name == ROOT
        assert tree.root.runtime["x"] == 20


def test_a_project_quota_that_is_inactive_holds_the_pod_with_its_problem() -> None:
    eng = engine(quota("team", min=5), quota("proj", "missing", namespace="team", max=5, tree=P))
    arrive(eng, pod("team", "t-1", 1))
    assert eng.pods["team/t-1"].state is PodState.PENDING
    assert eng.pods["team/t-1"].reason == (
        "waiting: ElasticQuota proj: parent Cohort missing does not exist yet; the node stays "
        "inactive until it does"
    )
    eng.set_config(cohort("missing", tree=P))
    eng.decide()
    assert eng.pods["team/t-1"].state is PodState.ADMITTED


def test_a_project_quota_added_later_charges_the_pods_already_there() -> None:
    eng = engine(quota("team", min=10), capacity=10, instant_evictions=False, reclaim_delay=30.0)
    arrive(eng, pod("team", "t-1", 3), pod("team", "t-2", 3))
    eng.set_config(quota("proj", namespace="team", max=4, tree=P))
    arrive(eng, pod("team", "t-3", 1))
    assert eng.pods["team/t-1"].also == ("proj",)
    assert eng.report("proj").used == {"x": 6}  # running pods are charged, over its max
    assert eng.pods["team/t-3"].state is PodState.PENDING
    assert "does not fit in ElasticQuota proj (tree projects)" in eng.pods["team/t-3"].reason
    # proj is above its runtime (its max) with its own pods: its new pod waits on proj
    # itself, not on lent quota, so no reclaim is for it, even after the delay: proj keeps
    # its pods until they finish (docs/semantics.md, "Reclaim (getting lent quota back), and
    # only when it pays")
    assert eng.decide(now=31.0).evictions == []
    assert eng.pods["team/t-2"].state is PodState.ADMITTED
    assert eng.pods["team/t-3"].state is PodState.PENDING


def _doc(kind: str, name: str, spec: dict[str, object], ns: str | None = None) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name}
    if ns is not None:
        metadata["namespace"] = ns
    api = "v1" if kind in ("Node", "Pod") else "quotree.io/v1alpha1"
    return {"apiVersion": api, "kind": kind, "metadata": metadata, "spec": spec}


def test_a_flavored_pod_in_a_forest_fits_its_flavor_and_the_project_names_the_same_resource() -> (
    None
):
    """Flavors and several trees together (docs/design/forests.md, "Flavors and several trees"):
    the team quota places pods on a100 then h100; the project tree counts the same
    `<resource>@<flavor>` names, so its a100 max holds the third pod back on a100: the pod
    goes to the next flavor where it fits in every tree, h100 (its demand moves in both
    trees)."""
    gpu = "nvidia.com/gpu"
    nodes = []
    for name, model in (("n-a", "a100"), ("n-h", "h100")):
        node = _doc("Node", name, {})
        node["metadata"] = {"name": name, "labels": {"gpu.model": model}}
        node["status"] = {"allocatable": {"cpu": "64", gpu: "8"}}
        nodes.append(node)
    flavors = [
        _doc("ResourceFlavor", m, {"nodeLabels": {"gpu.model": m}}) for m in ("a100", "h100")
    ]
    team = _doc(
        "ElasticQuota",
        "team",
        {"flavors": [{"name": "a100", "max": {gpu: "4"}}, {"name": "h100", "max": {gpu: "4"}}]},
        ns="team",
    )
    proj = _doc(
        "ElasticQuota",
        "proj",
        {"tree": P, "namespaces": ["team"], "flavors": [{"name": "a100", "max": {gpu: "2"}}]},
        ns="proj",
    )
    pods = []
    for i in range(4):
        pod_doc = _doc(
            "Pod",
            f"p{i}",
            {"containers": [{"name": "c", "resources": {"requests": {gpu: "1"}}}]},
            ns="team",
        )
        pod_doc["metadata"] = {
            "name": f"p{i}",
            "namespace": "team",
            "creationTimestamp": f"2026-01-01T00:00:0{i}Z",
        }
        pods.append(pod_doc)
    sim = simulate_documents(("test", d) for d in [*nodes, *flavors, team, proj, *pods])
    records = {r.key: r for r in sim.engine.pod_records()}
    placed = {key: (r.state, r.flavor) for key, r in records.items()}
    assert placed == {
        "team/p0": (PodState.ADMITTED, "a100"),
        "team/p1": (PodState.ADMITTED, "a100"),
        "team/p2": (PodState.ADMITTED, "h100"),
        "team/p3": (PodState.ADMITTED, "h100"),
    }
    assert sim.engine.report("proj").used == {f"{gpu}@a100": 2}  # it limits a100 only
    assert sim.engine.report("team").used == {f"{gpu}@a100": 2, f"{gpu}@h100": 2}
    # Incremental equals full recomputation in both trees after the moves.
    for tree in sim.engine.trees.values():
        tree.settle()
        before = {n.name: dict(n.runtime) for n in tree.live_members()}
        tree.recompute()
        assert {n.name: dict(n.runtime) for n in tree.live_members()} == before


def test_a_pod_whose_project_has_room_is_not_sent_where_a_blocked_pod_waits() -> None:
    """Within one look at a queue, a pod like one that found no flavor goes straight to that
    pod's wait flavor; with several trees, "like" includes its quotas in the other trees:
    b-1's project has h100 room where a-1's has none."""
    gpu = "nvidia.com/gpu"
    docs: list[dict[str, object]] = []
    for name, model in (("n-a", "a100"), ("n-h", "h100")):
        node = _doc("Node", name, {})
        node["metadata"] = {"name": name, "labels": {"gpu.model": model}}
        node["status"] = {"allocatable": {"cpu": "64", gpu: "8"}}
        docs.append(node)
    docs += [_doc("ResourceFlavor", m, {"nodeLabels": {"gpu.model": m}}) for m in ("a100", "h100")]
    docs.append(
        _doc(
            "ElasticQuota",
            "team",
            {
                "namespaces": ["ns-a", "ns-b"],
                "flavors": [
                    {"name": "a100", "max": {gpu: "4"}},
                    {"name": "h100", "max": {gpu: "4"}},
                ],
            },
            ns="team",
        )
    )
    for proj, ns, h100 in (("proj-x", "ns-a", "0"), ("proj-y", "ns-b", "4")):
        docs.append(
            _doc(
                "ElasticQuota",
                proj,
                {
                    "tree": P,
                    "namespaces": [ns],
                    "flavors": [
                        {"name": "a100", "max": {gpu: "0"}},
                        {"name": "h100", "max": {gpu: h100}},
                    ],
                },
                ns=proj,
            )
        )
    for i, ns in enumerate(("ns-a", "ns-b")):
        pod_doc = _doc(
            "Pod", f"p{i}", {"containers": [{"name": "c", "resources": {"requests": {gpu: "1"}}}]}
        )
        pod_doc["metadata"] = {
            "name": f"p{i}",
            "namespace": ns,
            "creationTimestamp": f"2026-01-01T00:00:0{i}Z",
        }
        docs.append(pod_doc)
    sim = simulate_documents(("test", d) for d in docs)
    placed = {r.key: (r.state, r.flavor) for r in sim.engine.pod_records()}
    assert placed == {
        "ns-a/p0": (PodState.PENDING, "a100"),
        "ns-b/p1": (PodState.ADMITTED, "h100"),
    }
