"""Runtime: demand bottom-up and weighted water-filling top-down (docs/semantics.md,
"Runtime: how a parent's total is shared")."""

from builders import R, arrive, cohort, engine, pod, quota, runtimes

from quotree.quantity import UNLIMITED


def test_example_one_exactly() -> None:
    eng = engine(
        quota("a", min=10, max=100, weight=40),
        quota("b", min=15, max=100, weight=60),
        quota("c", min=20, max=100, weight=50),
        quota("d", min=15, max=100, weight=80),
        capacity=100,
    )
    for name, amount in (("a", 5), ("b", 20), ("c", 40), ("d", 70)):
        eng.observe_pod(pod(name, "p", amount))
    assert runtimes(eng) == {"a": 5, "b": 20, "c": 35, "d": 40}


def test_demand_within_min_gets_all_of_it() -> None:
    eng = engine(quota("a", min=30), quota("b", min=30), capacity=60)
    eng.observe_pod(pod("a", "p", 20))
    eng.observe_pod(pod("b", "p", 90))
    assert runtimes(eng) == {"a": 20, "b": 40}


def test_max_caps_runtime_even_with_idle_capacity() -> None:
    eng = engine(quota("a", min=10, max=15), capacity=100)
    eng.observe_pod(pod("a", "p", 50))
    assert runtimes(eng) == {"a": 15}


def test_borrowing_limit_caps_above_min() -> None:
    eng = engine(quota("a", min=10, borrowing=5), capacity=100)
    eng.observe_pod(pod("a", "p", 50))
    assert runtimes(eng) == {"a": 15}


def test_lending_limit_keeps_part_of_an_idle_min() -> None:
    # a lends at most 4 of its idle min 10, so 6 stay reserved for it.
    eng = engine(quota("a", min=10, lending=4), quota("b", min=10), capacity=30)
    eng.observe_pod(pod("b", "p", 100))
    assert runtimes(eng) == {"a": 6, "b": 24}
    assert eng.report("a").request == {R: 6}  # status.request shows the demand


def test_lending_limit_zero_lends_nothing() -> None:
    eng = engine(quota("a", min=10, lending=0), quota("b", min=10), capacity=30)
    eng.observe_pod(pod("b", "p", 100))
    assert runtimes(eng) == {"a": 10, "b": 20}


def test_weight_zero_never_borrows() -> None:
    eng = engine(quota("a", min=10, weight=0), quota("b", min=10), capacity=100)
    eng.observe_pod(pod("a", "p", 50))
    eng.observe_pod(pod("b", "p", 30))
    assert runtimes(eng) == {"a": 10, "b": 30}


def test_default_weight_is_max_then_min_then_one() -> None:
    # c names nothing itself; it takes part in x through its cohort.
    eng = engine(
        cohort("t", min=10),
        quota("a", "t", max=30),
        quota("b", "t", min=10),
        quota("c", "t"),
        capacity=41,
    )
    tree_members = {n.name: n for n in eng.tree.live_members()}
    assert tree_members["a"].weight[R] == 30
    assert tree_members["b"].weight[R] == 10
    assert tree_members["c"].weight[R] == 1


def test_min_scaling_when_the_cluster_shrinks() -> None:
    eng = engine(quota("a", min=60), quota("b", min=40), capacity=100)
    eng.observe_pod(pod("a", "p", 60))
    eng.observe_pod(pod("b", "p", 40))
    assert runtimes(eng) == {"a": 60, "b": 40}
    eng.set_cluster_node("node-1", {R: 50})
    assert runtimes(eng) == {"a": 30, "b": 20}
    assert eng.tree.member("a").guarantee[R] == 30  # type: ignore[union-attr]


def test_idle_cohort_does_not_scale_its_childrens_mins() -> None:
    # research holds only what its children ask; a non-borrowing child still
    # gets its whole min, and a non-preemptible pod within min is admitted.
    eng = engine(
        cohort("research", min=10),
        quota("a", "research", min=5, weight=0),
        quota("b", "research", min=5),
        capacity=100,
    )
    arrive(eng, pod("a", "p", 5, preemptible=False))
    assert runtimes(eng)["a"] == 5
    assert eng.pods["a/p"].state == "admitted"


def test_cohorts_share_their_runtime_among_children() -> None:
    eng = engine(
        cohort("research", min=40, max=60),
        cohort("prod", min=60),
        quota("r1", "research", min=20),
        quota("r2", "research", min=20),
        quota("p1", "prod", min=60),
        capacity=100,
    )
    eng.observe_pod(pod("r1", "p", 50))
    eng.observe_pod(pod("r2", "p", 10))
    rt = runtimes(eng)
    # research is capped by max 60; inside it r2 needs 10, r1 gets the other 50.
    assert rt["research"] == 60
    assert rt["r1"] == 50
    assert rt["r2"] == 10
    assert rt["prod"] == 0


def test_participation_comes_from_ancestors_and_descendants() -> None:
    # Only the cohort names gpu: the leaves take part in gpu with min 0.
    eng = engine(
        cohort("ml", min={"gpu": 8}),
        quota("a", "ml", max={"cpu": 1000}),
        quota("b", "ml"),
        capacity={"gpu": 8, "cpu": 4000},
    )
    members = {n.name: n for n in eng.tree.live_members()}
    assert members["a"].resources == {"gpu", "cpu"}
    assert members["b"].resources == {"gpu"}
    assert members["ml"].resources == {"gpu", "cpu"}
    # b's pods are not limited (nor counted) in cpu, which b does not take part in.
    arrive(eng, pod("b", "p", {"cpu": 100000, "gpu": 2}))
    assert eng.pods["b/p"].state == "admitted"
    assert eng.report("b").used == {"gpu": 2}


def test_kueue_story_one_research_cannot_borrow() -> None:
    # research's top cohort has borrowingLimit 0: it never gets above its min,
    # while production may borrow research's idle quota.
    eng = engine(
        cohort("research", min=50, borrowing=0),
        cohort("production", min=50),
        quota("r", "research", min=50),
        quota("p", "production", min=50),
        capacity=100,
    )
    eng.observe_pod(pod("r", "p", 80))
    assert runtimes(eng)["r"] == 50
    eng.observe_pod(pod("p", "p", 20))
    eng.remove_config("r")  # research idle now... make it truly idle instead:
    eng.set_config(quota("r", "research", min=50))
    eng.forget_pod("r/p")
    eng.observe_pod(pod("p", "q", 60))
    assert runtimes(eng)["p"] == 80  # production borrows 30 of research's idle min


def test_kueue_story_two_special_queue_borrows_from_everyone() -> None:
    eng = engine(
        cohort("org", min=100),
        cohort("a", "org", min=50, borrowing=0),
        cohort("b", "org", min=50, borrowing=0),
        quota("qa", "a", min=50),
        quota("qb", "b", min=50),
        quota("special", "org", min=0),
        capacity=100,
    )
    eng.observe_pod(pod("qa", "p", 70))
    eng.observe_pod(pod("special", "p", 100))
    rt = runtimes(eng)
    assert rt["qa"] == 50  # org a does not borrow from b
    assert rt["special"] == 50  # special borrows b's idle quota
    assert eng.tree.member("special").cap[R] == UNLIMITED  # type: ignore[union-attr]


def test_unmanaged_pods_reduce_capacity() -> None:
    eng = engine(quota("a", min=10), capacity=100)
    eng.observe_pod(
        pod("kube-system", "dns", 30, gated=False).__class__(
            namespace="kube-system", name="dns", request={R: 30}, node_name="node-1"
        )
    )
    eng.observe_pod(pod("a", "p", 100))
    assert runtimes(eng) == {"a": 70}


def test_inactive_subtree_gets_no_runtime_and_reports_why() -> None:
    eng = engine(
        cohort("dept", "missing", min=10),
        quota("a", "dept", min=10),
        quota("b", min=10),
        capacity=100,
    )
    assert runtimes(eng) == {"b": 0}
    assert eng.tree.problems["dept"].reason == "ParentNotFound"
    assert eng.tree.problems["a"].reason == "InactiveAncestor"
    assert "missing does not exist" in eng.tree.problems["a"].message
    arrive(eng, pod("a", "p", 1))
    assert eng.pods["a/p"].state == "pending"
    assert "missing does not exist" in eng.pods["a/p"].reason
    # The parent appears: the subtree comes alive and the pod is admitted.
    eng.set_config(cohort("missing", min=10))
    eng.decide()
    assert eng.pods["a/p"].state == "admitted"


def test_broken_configurations_are_reported() -> None:
    eng = engine(
        cohort("x", "y"),
        cohort("y", "x"),
        quota("q", "x"),
        cohort("small", min=5),
        quota("big", "small", min=10),
        quota("leafy", "big"),
        quota("upside", min=5, max=2),
        capacity=100,
    )
    problems = eng.tree.problems
    assert problems["x"].reason == problems["y"].reason == "CycleDetected"
    assert "x -> y -> x" in problems["x"].message or "y -> x -> y" in problems["x"].message
    assert problems["q"].reason == "InactiveAncestor"
    assert problems["small"].reason == "MinSumExceeded"
    assert "add up to 10, over its own min of 5" in problems["small"].message
    assert problems["big"].reason == "InactiveAncestor"
    assert problems["leafy"].reason == "ParentNotCohort"
    assert problems["upside"].reason == "MinAboveMax"
    assert list(runtimes(eng)) == []


def test_a_quota_that_comes_back_explains_its_pending_pods_again() -> None:
    eng = engine(cohort("dept", min=10), quota("a", "dept", min=10, max=10), capacity=100)
    arrive(eng, pod("a", "fits", 10), pod("a", "waits", 5))
    assert "used 10 + request 5 > runtime 10" in eng.pods["a/waits"].reason
    eng.remove_config("dept")
    eng.decide()
    assert "dept does not exist" in eng.pods["a/waits"].reason
    eng.set_config(cohort("dept", min=10))  # same numbers as before
    eng.decide()
    assert "used 10 + request 5 > runtime 10" in eng.pods["a/waits"].reason


def test_two_objects_with_one_name_are_both_invalid_and_deleting_one_keeps_the_other() -> None:
    # A Cohort and an ElasticQuota called "x" slipped past the webhook (rule 6).
    eng = engine(cohort("x", min=10), quota("q", "x", min=5), capacity=100)
    eng.set_config(quota("x", namespace="team", min=3))
    eng.refresh()
    problem = eng.tree.problems["x"]
    assert problem.reason == "DuplicateName"
    assert problem.message.startswith(
        "Cohort x and ElasticQuota team/x share the name x; Cohort and ElasticQuota names"
    )
    assert eng.tree.problems["q"].reason == "InactiveAncestor"
    arrive(eng, pod("team", "p", 1))
    assert eng.pods["team/p"].state == "pending"
    assert "share the name x" in eng.pods["team/p"].reason
    eng.remove_config("x", kind="ElasticQuota", namespace="team")
    eng.refresh()
    assert "x" not in eng.tree.problems
    assert runtimes(eng) == {"x": 0, "q": 0}  # the Cohort is back, with its child
    assert eng.tree.config("x") == cohort("x", min=10)


def test_elastic_quotas_of_one_name_in_two_namespaces() -> None:
    eng = engine(quota("x", namespace="one", min=2), capacity=10)
    eng.set_config(quota("x", namespace="two", min=2))
    eng.refresh()
    assert eng.tree.problems["x"].reason == "DuplicateName"
    eng.remove_config("x", kind="ElasticQuota", namespace="one")
    eng.refresh()
    assert "x" not in eng.tree.problems
    arrive(eng, pod("two", "p", 1))
    assert eng.pods["two/p"].state == "admitted"
    assert eng.resolve("one", {}).quota is None  # "one" is no longer covered


def test_a_cohort_that_is_its_own_parent_can_be_deleted() -> None:
    # Found by the property test: removing it dropped its graph node twice.
    eng = engine(cohort("c", "c"), capacity=10)
    assert eng.tree.problems["c"].reason == "CycleDetected"
    eng.remove_config("c", kind="Cohort")
    eng.refresh()
    assert eng.tree.problems == {}
    assert list(eng.tree.structure.graph.nodes) == ["quotree.io/cluster"]
