"""Which cluster nodes count toward the capacity, and which namespaces are never gated."""

import functools

from quotree.capacity import node_allocatable
from quotree.resolution import DEFAULT_SYSTEM_NAMESPACES, never_gated
from tests.unit import objects

#: Node n1 (cpu 4, memory 8Gi), Ready and schedulable unless told otherwise.
node = functools.partial(objects.node, ready="True", unschedulable=False)


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
    counted = node_allocatable(node(allocatable={"cpu": "4", "memory": "lots"}))
    assert counted.allocatable == {"cpu": 4000}
    assert len(counted.warnings) == 1
    assert counted.warnings[0].startswith("Node n1: allocatable memory 'lots' left out")


def test_never_gated_namespaces() -> None:
    assert never_gated() == DEFAULT_SYSTEM_NAMESPACES
    assert never_gated("quotree-system", ["batch-infra"]) == DEFAULT_SYSTEM_NAMESPACES | {
        "quotree-system",
        "batch-infra",
    }
