"""The webhooks with several trees (docs/reference/objects.md, "Several trees"): one label per
covering tree, the configuration rules per tree, the per-tree labels protected."""

from __future__ import annotations

from quotree import ADMISSION_GATE, QUOTA_LABEL, Engine
from quotree_webhooks import decisions
from tests.unit.objects import cohort, engine_with, quota
from tests.unit.objects import user_pod as pod

OPERATOR = "system:serviceaccount:quotree-system:quotree"
PROJECT_LABEL = "quotree.io/quota-name.projects"


def forest() -> Engine:
    """The organisation (default tree): research with team-a; projects: portfolio with
    proj-x over team-a and proj-y over team-a and lab."""
    return engine_with(
        cohort("research", min={"cpu": "40"}),
        quota("team-a", "team-a", "research", min={"cpu": "20"}),
        cohort("portfolio", min={"cpu": "10"}, tree="projects"),
        quota("proj-x", "team-a", "portfolio", min={"cpu": "6"}, tree="projects"),
        quota(
            "proj-y", "lab", "portfolio", min={"cpu": "4"}, namespaces=["team-a"], tree="projects"
        ),
    )


def test_a_pod_is_labelled_for_every_tree_that_covers_its_namespace() -> None:
    mutation = decisions.review_pod_create(forest(), pod("team-a"), "team-a")
    assert mutation.denied is None
    # two project quotas cover team-a: the one in the pod's own namespace is taken
    assert mutation.labels == {QUOTA_LABEL: "team-a", PROJECT_LABEL: "proj-x"}
    assert mutation.gates == [{"name": ADMISSION_GATE}]
    chosen = decisions.review_pod_create(
        forest(), pod("team-a", labels={PROJECT_LABEL: "proj-y"}), "team-a"
    )
    assert chosen.labels == {QUOTA_LABEL: "team-a"}  # the user's pick stays


def test_a_namespace_covered_only_in_another_tree_is_gated_with_that_label() -> None:
    mutation = decisions.review_pod_create(forest(), pod("lab"), "lab")
    assert mutation.labels == {PROJECT_LABEL: "proj-y"}
    assert mutation.gates == [{"name": ADMISSION_GATE}]


def test_a_project_label_that_does_not_cover_the_namespace_is_denied() -> None:
    mutation = decisions.review_pod_create(
        forest(), pod("lab", labels={PROJECT_LABEL: "proj-x"}), "lab"
    )
    assert mutation.denied == (
        "Pod lab/p: ElasticQuota proj-x does not cover namespace lab in tree projects "
        "(quotas covering it: proj-y)"
    )


def test_a_parent_in_another_tree_is_denied() -> None:
    verdict = decisions.review_member(
        forest(), "CREATE", quota("team-b", "team-b", "portfolio"), None
    )
    assert not verdict.allowed
    assert verdict.message == (
        "ElasticQuota team-b: parent portfolio is in tree projects, not in tree default; "
        "a parent must be in the same tree"
    )


def test_rules_hold_per_tree() -> None:
    engine = forest()
    # min sum under portfolio counts only the project tree's children
    over = decisions.review_member(
        engine, "CREATE", quota("proj-z", "z", "portfolio", min={"cpu": "1"}, tree="projects"), None
    )
    assert over.message == (
        "ElasticQuota proj-z: min cpu 1 would make the children of Cohort portfolio need 11 in "
        "all, over portfolio's min of 10"
    )
    same_name = decisions.review_member(engine, "CREATE", cohort("proj-x"), None)
    assert not same_name.allowed
    assert "the name proj-x is already taken by ElasticQuota team-a/proj-x" in same_name.message
    leaves = decisions.review_member(
        engine, "UPDATE", cohort("portfolio", min={"cpu": "10"}), cohort("portfolio")
    )
    assert leaves.message == (
        "Cohort portfolio: cannot move to tree default while it has children in tree projects "
        "(proj-x, proj-y)"
    )


def test_deleting_a_cohort_with_children_in_its_tree_is_denied() -> None:
    old = cohort("portfolio", min={"cpu": "10"}, tree="projects")
    verdict = decisions.review_member(forest(), "DELETE", None, old)
    assert not verdict.allowed
    assert "proj-x" in verdict.message


def test_objects_applied_back_to_back_are_judged_together_in_their_tree() -> None:
    engine = engine_with(cohort("portfolio", min={"cpu": "10"}, tree="projects"))
    recent = decisions.RecentlyAllowed()
    first = decisions.review_member(
        engine,
        "CREATE",
        quota("p1", "a", "portfolio", min={"cpu": "8"}, tree="projects"),
        None,
        recent=recent,
    )
    assert first.allowed
    second = decisions.review_member(
        engine,
        "CREATE",
        quota("p2", "b", "portfolio", min={"cpu": "4"}, tree="projects"),
        None,
        recent=recent,
    )
    assert "need 12 in all, over portfolio's min of 10" in second.message
    elsewhere = decisions.review_member(engine, "CREATE", quota("p1", "c"), None, recent=recent)
    assert "already taken by ElasticQuota a/p1" in elsewhere.message


def test_the_per_tree_quota_labels_belong_to_quotree() -> None:
    old = pod("team-a", labels={QUOTA_LABEL: "team-a", PROJECT_LABEL: "proj-x"})
    new = pod("team-a", labels={QUOTA_LABEL: "team-a", PROJECT_LABEL: "proj-y"})
    reason = decisions.review_pod_update(old, new, "alice", {OPERATOR})
    assert reason == (
        "Pod team-a/p: label quotree.io/quota-name.projects belongs to quotree once the pod "
        "exists and only the quotree operator may change it (was 'proj-x', now 'proj-y'; you "
        "are alice); to charge the pod to another quota, delete it and create it with the "
        "new label"
    )
    assert decisions.review_pod_update(old, new, OPERATOR, {OPERATOR}) is None
