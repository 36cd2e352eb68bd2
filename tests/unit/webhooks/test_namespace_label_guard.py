"""The quotree.io/managed namespace label: only the operator sets or removes it."""

from __future__ import annotations

from typing import Any

from quotree.engine import Engine
from quotree.models import MemberConfig
from quotree_operator.namespaces import managed
from quotree_webhooks.decisions import review_namespace
from tests.unit.objects import quota_config

OPERATOR = "system:serviceaccount:quotree-system:quotree"


def _ns(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_a_user_cannot_remove_or_set_the_label() -> None:
    removed = review_namespace(
        _ns("team-a", **{"quotree.io/managed": "true"}), _ns("team-a"), "alice", [OPERATOR]
    )
    assert removed == (
        "Namespace team-a: label quotree.io/managed belongs to quotree and only the quotree "
        "operator may set or remove it (was 'true', now unset; you are alice); it follows "
        "the ElasticQuotas that cover the namespace"
    )
    created = review_namespace(None, _ns("sneaky", **{"quotree.io/managed": "true"}), "bob", [])
    assert created is not None
    assert "(was unset, now 'true'; you are bob)" in created


def test_the_operator_may_and_other_labels_are_free() -> None:
    old, new = _ns("team-a"), _ns("team-a", **{"quotree.io/managed": "true"})
    assert review_namespace(old, new, OPERATOR, [OPERATOR]) is None
    kept = {"quotree.io/managed": "true"}
    assert review_namespace(_ns("a", **kept), _ns("a", team="blue", **kept), "alice", []) is None


def _quota(name: str, namespace: str, *more: str) -> MemberConfig:
    """ElasticQuota `name` (cpu 1) covering `namespace` and `more`."""
    return quota_config(
        name, namespace=namespace, min={"cpu": "1"}, max={"cpu": "1"}, namespaces=list(more)
    )


def test_managed_means_covered_by_a_quota_or_the_default_quota() -> None:
    engine = Engine()
    engine.set_config(_quota("q", "team-a", "team-a-dev"))
    assert managed(engine, "team-a")
    assert managed(engine, "team-a-dev")
    assert not managed(engine, "elsewhere")
    assert not managed(engine, "kube-system")
    with_default = Engine(default_quota="q")
    assert managed(with_default, "elsewhere")
    assert not managed(with_default, "kube-system")
