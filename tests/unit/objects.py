"""Cohort and ElasticQuota objects as the API sends them, for the shells' unit tests."""

from __future__ import annotations

from typing import Any

from quotree import Engine, parse_node


def cohort(name: str, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"parent": parent, **spec} if parent else dict(spec)
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": body,
    }


def quota(name: str, namespace: str, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"parent": parent, **spec} if parent else dict(spec)
    return {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def engine_with(*objects: dict[str, Any]) -> Engine:
    """An engine that has seen these objects (as the operator's watch would feed them)."""
    engine = Engine()
    for obj in objects:
        engine.set_config(parse_node(obj))
    return engine
