"""NamespaceLabels.reconcile compares namespaces only when something could differ."""

from __future__ import annotations

import asyncio
from typing import Any

from quotree.engine import Engine
from quotree.models import MANAGED_LABEL
from quotree_operator.namespaces import NamespaceLabels
from tests.unit.objects import quota_config
from tests.unit.operator.fake_kube import FakeKube


def namespace(name: str, managed: bool = False) -> dict[str, Any]:
    labels = {MANAGED_LABEL: "true"} if managed else {}
    return {"metadata": {"name": name, "labels": labels}}


def writes(kube: FakeKube) -> list[tuple[str, str | None]]:
    """The label writes (namespace, value) NamespaceLabels made."""
    return [(name, value) for name, _, value in kube.namespace_labels]


async def test_reconcile_skips_until_a_namespace_or_the_configuration_changes() -> None:
    engine = Engine()
    kube = FakeKube()
    labels = NamespaceLabels(engine, kube)
    labels.observe(namespace("team-a"), deleted=False)
    labels.reconcile(0)  # nothing covers team-a: nothing to write
    await asyncio.sleep(0)
    assert writes(kube) == []
    engine.set_config(quota_config("a", namespace="team-a", min={"cpu": "1"}))
    labels.reconcile(0)  # the configuration counter did not move: not compared
    await asyncio.sleep(0)
    assert writes(kube) == []
    labels.reconcile(1)  # it moved: team-a is now covered
    await asyncio.sleep(0)
    assert writes(kube) == [("team-a", "true")]
    labels.observe(namespace("team-b"), deleted=False)
    engine.set_config(quota_config("b", namespace="team-b", min={"cpu": "1"}))
    labels.reconcile(1)  # a new namespace was seen: compared again
    await asyncio.sleep(0)
    assert writes(kube) == [("team-a", "true"), ("team-b", "true")]
