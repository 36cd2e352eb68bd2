"""The eight configuration rules (docs/semantics.md, "Configuration rules"), as the webhook
and the simulator apply them."""

from collections import ChainMap
from collections.abc import Iterable

import pytest
from builders import cohort, quota

from quotree.delete_rules import check_delete
from quotree.models import MemberConfig, parse_member
from quotree.rules import check_apply
from quotree.runtime import QuotaTree
from quotree.structure import Structure


def tree(*configs: MemberConfig) -> dict[str, MemberConfig]:
    return {c.name: c for c in configs}


def cpu(n: int) -> dict[str, int]:
    return {"cpu": n * 1000}


def apply_all(configs: Iterable[MemberConfig]) -> dict[str, MemberConfig]:
    current: dict[str, MemberConfig] = {}
    for config in configs:
        verdict = check_apply(current, config)
        assert verdict.allowed, verdict.message
        current[config.name] = config
    return current


def test_api_example_message_exactly() -> None:
    current = tree(
        cohort("research", min=cpu(40)),
        quota("team-a", "research", min=cpu(20)),
    )
    verdict = check_apply(current, quota("team-b", "research", min=cpu(30)))
    assert not verdict.allowed
    assert verdict.message == (
        "ElasticQuota team-b: min cpu 30 would make the children of Cohort research need 50 "
        "in all, over research's min of 40"
    )


def test_rule_2_min_above_max() -> None:
    verdict = check_apply({}, quota("a", min=cpu(5), max=cpu(4)))
    assert verdict.message == "ElasticQuota a: min cpu 5 is above max 4"


def test_rule_3_parent_must_be_a_cohort_missing_parent_warns() -> None:
    current = tree(quota("leaf", min=cpu(1)))
    denied = check_apply(current, quota("b", "leaf"))
    assert denied.message == (
        "ElasticQuota b: parent leaf is an ElasticQuota; only a Cohort can be a parent"
    )
    warned = check_apply(current, quota("c", "later"))
    assert warned.allowed
    assert warned.warnings == [
        "ElasticQuota c: parent Cohort later does not exist yet; "
        "the node stays inactive until it does"
    ]


def test_rule_4_no_cycles() -> None:
    current = tree(cohort("a"), cohort("b", "a"), cohort("c", "b"))
    verdict = check_apply(current, cohort("a", "c"))
    assert verdict.message == "Cohort a: parent c would make a cycle (a -> c -> b -> a)"
    assert check_apply(current, cohort("a", "a")).message == (
        "Cohort a: parent a is the object itself"
    )


def test_rule_5_cohort_min_cannot_drop_below_its_children() -> None:
    current = tree(
        cohort("research", min=cpu(40)),
        quota("a", "research", min=cpu(20)),
        quota("b", "research", min=cpu(15)),
    )
    verdict = check_apply(current, cohort("research", min=cpu(30)))
    assert verdict.message == (
        "Cohort research: min cpu 30 is below the 35 its children's min add up to"
    )
    assert check_apply(current, cohort("research", min=cpu(35))).allowed


def test_rule_5_only_checked_when_min_or_parent_change() -> None:
    # A tree that is already over (the webhook was bypassed) does not block
    # unrelated edits, such as a new max.
    current = tree(cohort("r", min=cpu(10)), quota("a", "r", min=cpu(20)))
    assert check_apply(current, quota("a", "r", min=cpu(20), max=cpu(30))).allowed
    assert not check_apply(current, quota("a", "r", min=cpu(21))).allowed


def test_rule_5_top_level_nodes_are_not_checked_against_the_cluster() -> None:
    assert check_apply({}, cohort("huge", min=cpu(10**6))).allowed


def test_rule_6_names_are_unique_across_kinds_and_namespaces() -> None:
    current = tree(cohort("shared"))
    verdict = check_apply(current, quota("shared", namespace="ns"))
    assert verdict.message == (
        "ElasticQuota shared: the name shared is already taken by Cohort shared; "
        "Cohort and ElasticQuota names share one namespace"
    )
    current = tree(quota("q", namespace="one"))
    assert (
        "already taken by ElasticQuota one/q"
        in check_apply(current, quota("q", namespace="two")).message
    )


def test_rule_7_deletes() -> None:
    current = tree(cohort("r"), quota("a", "r"), quota("b", "r"))
    assert check_delete(current, current["r"]).message == (
        "Cohort r: cannot delete a Cohort that has children (a, b); move or delete them first"
    )
    assert check_delete(current, current["a"], admitted_pods=3).message == (
        "ElasticQuota a: cannot delete an ElasticQuota with 3 admitted pods still running; "
        "delete them first"
    )
    assert check_delete(current, current["a"], admitted_pods=3, namespace_deleting=True).allowed
    assert check_delete(current, current["a"]).allowed


def test_rule_7_children_leaving_do_not_count() -> None:
    current = tree(cohort("r"), quota("a", "r"), quota("b", "r"))
    assert check_delete(current, current["r"], leaving={"a"}).message == (
        "Cohort r: cannot delete a Cohort that has children (b); move or delete them first"
    )
    assert check_delete(current, current["r"], leaving={"a", "b"}).allowed


def test_rule_7_a_cohort_in_use_is_deleted_with_a_warning_and_stays() -> None:
    """With the in-use finalizer the deletion is accepted: the Cohort stays until its
    children are gone (the finalizer holds it), and the warning names them."""
    current = tree(cohort("r"), quota("a", "r"), quota("b", "r"))
    verdict = check_delete(current, current["r"], in_use_finalizer=True)
    assert verdict.allowed
    assert verdict.warnings == ["Cohort r stays until its children (a, b) are deleted or moved"]
    verdict = check_delete(current, current["r"], leaving={"a"}, in_use_finalizer=True)
    assert verdict.warnings == ["Cohort r stays until its children (b) are deleted or moved"]
    gone = check_delete(current, current["r"], leaving={"a", "b"}, in_use_finalizer=True)
    assert gone.allowed
    assert not gone.warnings


def test_rule_8_moves_are_checked_at_the_new_parent() -> None:
    current = tree(
        cohort("full", min=cpu(10)),
        quota("x", "full", min=cpu(10)),
        cohort("roomy", min=cpu(50)),
        quota("mover", "roomy", min=cpu(5)),
    )
    verdict = check_apply(current, quota("mover", "full", min=cpu(5)))
    assert "children of Cohort full need 15 in all, over full's min of 10" in verdict.message
    assert check_apply(current, quota("mover", None, min=cpu(5))).allowed


@pytest.mark.parametrize("order", ["parents-first", "children-first"])
def test_one_folder_applies_in_any_order(order: str) -> None:
    configs = [
        cohort("company", min=cpu(100)),
        cohort("research", "company", min=cpu(40)),
        quota("a", "research", min=cpu(20)),
        quota("b", "research", min=cpu(20)),
    ]
    if order == "children-first":
        configs.reverse()
    final = apply_all(configs)
    assert set(final) == {"company", "research", "a", "b"}


def test_rule_1_is_parse_node() -> None:
    # Quantities are checked when the object is read; see test_models for the messages.
    config = parse_member(
        {"kind": "Cohort", "metadata": {"name": "c"}, "spec": {"min": {"cpu": "1"}}}
    )
    assert check_apply({}, config).allowed


def test_the_live_tree_and_the_webhook_word_a_rule_the_same() -> None:
    # One function per rule: the Valid condition quotes what `kubectl apply` would say.
    live = QuotaTree()
    for config in (quota("upside", min=cpu(5), max=cpu(4)), quota("b", "leaf"), quota("leaf")):
        live.set_config(config)
    live.refresh()
    assert live.problems["upside"].message == check_apply({}, live.configs()["upside"]).message
    assert live.problems["b"].message == (
        check_apply(tree(quota("leaf")), quota("b", "leaf")).message
    )


def test_recently_allowed_objects_are_seen_over_the_engines_structure() -> None:
    # The webhook passes a ChainMap of objects allowed but not yet seen over the Structure.
    structure = Structure(tree(cohort("a"), cohort("b", "a")))
    on_the_way = {"c": cohort("c", "b")}
    view = ChainMap(on_the_way, structure)  # type: ignore[arg-type]
    verdict = check_apply(view, cohort("a", "c"))
    assert verdict.message == "Cohort a: parent c would make a cycle (a -> c -> b -> a)"
    assert check_apply(structure, cohort("a", "b")).message == (
        "Cohort a: parent b would make a cycle (a -> b -> a)"
    )
    assert check_apply(structure, cohort("a", "c")).allowed  # c is not there yet: a warning
