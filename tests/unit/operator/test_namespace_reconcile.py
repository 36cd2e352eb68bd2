"""NamespaceLabels.reconcile compares namespaces only when something could differ."""

from __future__ import annotations

import asyncio
from typing import Any

from quotree.engine import Engine
from quotree.models import MANAGED_LABEL, parse_node
from quotree_operator.namespaces import NamespaceLabels


class FakeKube:
    """Records label writes (the one call NamespaceLabels makes)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str | None]] = []

    async def label_namespace(self, name: str, label: str, value: str | None) -> None:
        self.writes.append((name, value))


def namespace(name: str, managed: bool = False) -> dict[str, Any]:
    labels = {MANAGED_LABEL: "true"} if managed else {}
    return {"metadata": {"name": name, "labels": labels}}


def quota(name: str, ns: str) -> Any:
    return parse_node(
        {
            "apiVersion": "quotree.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"min": {"cpu": "1"}},
        }
    )


async def test_reconcile_skips_until_a_namespace_or_the_configuration_changes() -> None:
    engine = Engine()
    kube = FakeKube()
    labels = NamespaceLabels(engine, kube)  # type: ignore[arg-type]
    labels.observe(namespace("team-a"), deleted=False)
    labels.reconcile(0)  # nothing covers team-a: nothing to write
    await asyncio.sleep(0)
    assert kube.writes == []
    engine.set_config(quota("a", "team-a"))
    labels.reconcile(0)  # the configuration counter did not move: not compared
    await asyncio.sleep(0)
    assert kube.writes == []
    labels.reconcile(1)  # it moved: team-a is now covered
    await asyncio.sleep(0)
    assert kube.writes == [("team-a", "true")]
    labels.observe(namespace("team-b"), deleted=False)
    engine.set_config(quota("b", "team-b"))
    labels.reconcile(1)  # a new namespace was seen: compared again
    await asyncio.sleep(0)
    assert kube.writes == [("team-a", "true"), ("team-b", "true")]
