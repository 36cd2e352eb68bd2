"""Kubernetes quantities: exact parsing into base units and printing back."""

import pytest

from quotree.quantity import MAX_VALUE, QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "resource", "expected"),
    [
        ("1", "cpu", 1000),
        ("500m", "cpu", 500),
        ("0.5", "cpu", 500),
        ("1.0001", "cpu", 1001),  # rounded up to the next millicore
        ("100u", "cpu", 1),
        (2, "cpu", 2000),
        ("40Gi", "memory", 40 * 2**30),
        ("1k", "memory", 1000),
        ("1M", "memory", 10**6),
        ("1e3", "memory", 1000),
        ("1.5", "nvidia.com/gpu", 2),  # other resources: whole units, rounded up
        ("0", "memory", 0),
        ("-0", "memory", 0),
        ("+3", "pods", 3),
        (".5Ki", "memory", 512),
    ],
)
def test_parse(text: object, resource: str, expected: int) -> None:
    assert parse_quantity(text, resource) == expected


@pytest.mark.parametrize(
    "text", ["", "abc", "1.2.3", "10Gb", "1e", "-1", "-500m", "1e30", "1e400", True, None, [1]]
)
def test_parse_rejects(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text, "memory")


def test_parse_rejects_above_int64() -> None:
    assert parse_quantity(str(MAX_VALUE), "memory") == MAX_VALUE
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity(str(MAX_VALUE + 1), "memory")


@pytest.mark.parametrize(
    ("amount", "resource", "expected"),
    [
        (4000, "cpu", "4"),
        (1500, "cpu", "1500m"),
        (40 * 2**30, "memory", "40Gi"),
        (1000, "memory", "1000"),
        (1024, "nvidia.com/gpu", "1024"),
        (0, "memory", "0"),
    ],
)
def test_format(amount: int, resource: str, expected: str) -> None:
    assert format_quantity(amount, resource) == expected


@pytest.mark.parametrize("text", ["250m", "3", "12Gi", "7", "1536Mi"])
@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_round_trip(text: str, resource: str) -> None:
    amount = parse_quantity(text, resource)
    assert parse_quantity(format_quantity(amount, resource), resource) == amount
