"""Which cluster nodes count toward the capacity, and which namespaces are never gated."""

from typing import Any

from quotree.capacity import node_allocatable
from quotree.resolution import DEFAULT_SYSTEM_NAMESPACES, never_gated


def node(
    *,
    ready: str | None = "True",
    unschedulable: bool = False,
    deleting: bool = False,
    **amounts: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "n1"},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": amounts or {"cpu": "4", "memory": "8Gi"}},
    }
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-11-22T08:00:00Z"
    if ready is not None:
        body["status"]["conditions"] = [{"type": "Ready", "status": ready}]
    return body


def test_a_ready_schedulable_node_counts_for_its_allocatable() -> None:
    counted = node_allocatable(node())
    assert counted.allocatable == {"cpu": 4000, "memory": 8 << 30}
    assert counted.warnings == []


def test_not_ready_cordoned_or_deleting_nodes_do_not_count() -> None:
    assert node_allocatable(node(ready="False")).allocatable is None
    assert node_allocatable(node(ready="Unknown")).allocatable is None
    assert node_allocatable(node(unschedulable=True)).allocatable is None
    assert node_allocatable(node(deleting=True)).allocatable is None


def test_a_node_without_a_ready_condition_counts() -> None:
    assert node_allocatable(node(ready=None)).allocatable == {"cpu": 4000, "memory": 8 << 30}


def test_a_bad_quantity_is_left_out_with_one_line() -> None:
    counted = node_allocatable(node(cpu="4", memory="lots"))
    assert counted.allocatable == {"cpu": 4000}
    assert len(counted.warnings) == 1
    assert counted.warnings[0].startswith("Node n1: allocatable memory 'lots' left out")


def test_never_gated_namespaces() -> None:
    assert never_gated() == DEFAULT_SYSTEM_NAMESPACES
    assert never_gated("quotree-system", ["batch-infra"]) == DEFAULT_SYSTEM_NAMESPACES | {
        "quotree-system",
        "batch-infra",
    }
