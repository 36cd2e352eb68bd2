"""Which unit family a resource is printed in, and how an amount prints in a family."""

from __future__ import annotations

from typing import Any

import pytest

from quotree.quantity import UNLIMITED, UnitFamily, format_in_family, quantity_family
from quotree.units import Units

B, D, P = UnitFamily.BINARY, UnitFamily.DECIMAL, UnitFamily.PLAIN


@pytest.mark.parametrize(
    ("written", "family"),
    [
        ("1Gi", B),
        ("512Ki", B),
        ("1G", D),
        ("10k", D),
        ("1500M", D),
        ("500m", P),
        ("4", P),
        ("1e9", P),
        (4, P),
        (2.5, P),
        ("lots", None),
        (True, None),
        (None, None),
        (["1G"], None),
    ],
)
def test_the_family_of_a_written_quantity(written: object, family: UnitFamily | None) -> None:
    assert quantity_family(written) is family


@pytest.mark.parametrize(
    ("amount", "resource", "family", "shown"),
    [
        (10**9, "memory", D, "1G"),
        (1500 * 10**6, "memory", D, "1500M"),
        (2**30, "memory", B, "1Gi"),
        (3 * 2**20, "memory", B, "3Mi"),
        (2**30, "memory", P, "1073741824"),
        (10**9, "memory", None, "1000000000"),  # as the operator's status prints it
        (1536, "memory", D, "1536"),  # no decimal unit is exact: the operator's way
        (2048, "memory", D, "2Ki"),
        (10**12, "example.com/bytes", D, "1T"),
        (2**30, "quotree.io/gpu-memory@a100", B, "1Gi"),
        (500, "cpu", D, "500m"),  # cpu: cores or millicores whatever the family
        (4000, "cpu", B, "4"),
        (0, "memory", D, "0"),
        (UNLIMITED, "memory", D, "unlimited"),
    ],
)
def test_format_in_family(
    amount: int, resource: str, family: UnitFamily | None, shown: str
) -> None:
    assert format_in_family(amount, resource, family) == shown


def quota_doc(**min_: object) -> dict[str, Any]:
    return {"kind": "ElasticQuota", "spec": {"min": min_}}


def test_the_family_written_more_often_wins_and_the_first_on_a_tie() -> None:
    units = Units()
    for doc in (quota_doc(memory="1Gi"), quota_doc(memory="1G"), quota_doc(memory="2G")):
        units.note_object(doc)
    assert units.family("memory") is D
    for first, second, family in (("1G", "1Gi", D), ("1Gi", "1G", B)):
        tie = Units()
        tie.note_object(quota_doc(memory=first))
        tie.note_object(quota_doc(memory=second))
        assert tie.family("memory") is family


def test_nodes_count_only_for_resources_nothing_else_names() -> None:
    units = Units()
    node = {"kind": "Node", "status": {"allocatable": {"memory": "64Gi", "pods": "110"}}}
    for doc in (node, node, quota_doc(memory="1G")):
        units.note_object(doc)
    assert units.family("memory") is D
    assert units.family("pods") is P
    assert units.family("cpu") is None


def test_quantities_are_found_wherever_a_resource_list_is() -> None:
    units = Units()
    units.note_object(
        {
            "kind": "Deployment",
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"resources": {"requests": {"memory": "100M"}}}],
                        "initContainers": [{"resources": {"limits": {"example.com/x": "1Ki"}}}],
                    }
                }
            },
        }
    )
    units.note_object(
        {"kind": "ElasticQuota", "spec": {"flavors": [{"name": "a", "max": {"y": "2k"}}]}}
    )
    units.note_object({"kind": "ResourceFlavor", "spec": {"gpuMemoryPerGPU": "80Gi"}})
    assert units.family("memory") is D
    assert units.family("example.com/x") is B
    assert units.family("y@a") is D
    assert units.family("quotree.io/gpu-memory@a") is B


def test_malformed_objects_are_no_error() -> None:
    loop: dict[str, Any] = {"kind": "Pod"}
    loop["spec"] = {"again": loop, "requests": ["1G"], "limits": {1: "1G", "memory": {}}}
    units = Units()
    for doc in (loop, "text", 5, None, [None, {"min": "1G"}]):
        units.note_object(doc)
    assert units.family("memory") is None


def test_restyle_keeps_what_is_not_a_quantity() -> None:
    units = Units()
    units.note_object(quota_doc(memory="1G"))
    assert units.restyle({"memory": "1000000000", "cpu": "unlimited"}) == {
        "memory": "1G",
        "cpu": "unlimited",
    }
