"""Kubernetes quantities as exact integers in base units.

The engine never uses floats: `cpu` is counted in millicores, every other
resource in whole base units (bytes for memory), a fractional value rounded
up, as the semantics says. `UNLIMITED` stands for "no limit" and stays an int
so that arithmetic and comparisons need no special cases: it is far above any
value a quantity may hold (Kubernetes itself stores quantities in int64).
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Mapping
from fractions import Fraction

__all__ = [
    "MAX_VALUE",
    "UNLIMITED",
    "QuantityError",
    "UnitFamily",
    "add_amounts",
    "base_resource",
    "format_in_family",
    "format_quantity",
    "is_unlimited",
    "parse_quantity",
    "quantity_family",
]

#: Largest amount a quantity may hold, in base units: Kubernetes' int64 limit.
MAX_VALUE = (1 << 63) - 1
#: "No limit": larger than any sum of valid amounts, and still an int.
UNLIMITED = 1 << 200


class QuantityError(ValueError):
    """A quantity that is not a valid, non-negative Kubernetes quantity."""


_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


def base_resource(resource: str) -> str:
    """The Kubernetes resource behind a tree resource: `cpu@a100` (a flavor's share) is cpu."""
    return resource.partition("@")[0]


def _scale(resource: str) -> int:
    """How many base units make one unit of the quantity: cpu counts millicores."""
    return 1000 if base_resource(resource) == "cpu" else 1


def parse_quantity(value: object, resource: str) -> int:
    """Parse a Kubernetes quantity for `resource` into base units, rounding up.

    Accepts strings and plain numbers (YAML turns `cpu: 4` into an int).
    Raises QuantityError for anything else, negatives and values beyond
    Kubernetes' int64 range.
    """
    if type(value) is str:
        # Pods repeat a handful of quantities ("100m", "1Gi"): each is parsed once (the
        # operator's start-up parses every pod's requests).
        return _parse_string(value, resource)
    return _parse_quantity(value, resource)


@functools.lru_cache(maxsize=4096)
def _parse_string(value: str, resource: str) -> int:
    return _parse_quantity(value, resource)


def _parse_quantity(value: object, resource: str) -> int:
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise QuantityError(f'{value!r} is not a quantity (want a string such as "500m" or "4Gi")')
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f'{text!r} is not a quantity (want e.g. "500m", "4", "40Gi")')
    exp = match["exp"]
    if exp is not None and abs(int(exp[1:])) > 40:
        raise QuantityError(f"{text!r} is out of range (at most {MAX_VALUE} base units)")
    number = Fraction(match["num"])
    if match["bin"]:
        number *= _BINARY[match["bin"]]
    elif exp is not None:
        number *= Fraction(10) ** int(exp[1:])
    else:
        number *= _DECIMAL[match["dec"] or ""]
    if match["sign"] == "-" and number != 0:
        raise QuantityError(f"{text!r} is negative")
    amount = math.ceil(number * _scale(resource))
    if amount > MAX_VALUE:
        raise QuantityError(f"{text!r} is out of range (at most {MAX_VALUE} base units)")
    return amount


def add_amounts(totals: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    """Add (sign 1) or take away (sign -1) a resource list into running totals, in place."""
    for resource, amount in amounts.items():
        totals[resource] = totals.get(resource, 0) + sign * amount


def is_unlimited(amount: int) -> bool:
    """True for the UNLIMITED sentinel and anything derived from it."""
    return amount >= UNLIMITED


_MEMORY_LIKE = ("memory", "storage")


@functools.lru_cache(maxsize=4096)  # reasons and admission messages print the same few
def format_quantity(amount: int, resource: str) -> str:
    """Print base units as a Kubernetes quantity string for `resource`.

    cpu: whole cores when exact ("4"), else millicores ("1500m"); memory and
    storage: the largest binary suffix that divides exactly ("40Gi"); all
    other resources: the plain integer.
    """
    if is_unlimited(amount):
        return "unlimited"
    resource = base_resource(resource)
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and resource.endswith(_MEMORY_LIKE):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if amount % unit == 0:
                return f"{amount // unit}{suffix}"
    return str(amount)


class UnitFamily(enum.Enum):
    """How a quantity was written: with a binary suffix (Ki, Mi, Gi...), a decimal one
    (k, M, G...), or as a plain number (also with an exponent or a milli suffix)."""

    BINARY = "binary"
    DECIMAL = "decimal"
    PLAIN = "plain"


_DECIMAL_UP = ("E", "P", "T", "G", "M", "k")


def quantity_family(value: object) -> UnitFamily | None:
    """The family of a written quantity (a YAML number is plain); None for anything that
    is not a quantity."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return UnitFamily.PLAIN
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    if match["bin"]:
        return UnitFamily.BINARY
    if match["dec"] and match["dec"] in _DECIMAL_UP:
        return UnitFamily.DECIMAL
    return UnitFamily.PLAIN


def format_in_family(amount: int, resource: str, family: UnitFamily | None) -> str:
    """Print base units in `family`: the largest unit of the family that represents them
    exactly ("1G", "1500M", "1Gi"), a plain number for PLAIN. cpu (cores or millicores),
    no family, and no exact unit: as `format_quantity`."""
    if family is None or amount <= 0 or is_unlimited(amount) or base_resource(resource) == "cpu":
        return format_quantity(amount, resource)
    if family is UnitFamily.PLAIN:
        return str(amount)
    if family is UnitFamily.BINARY:
        units = [(s, _BINARY[s]) for s in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")]
    else:
        units = [(s, int(_DECIMAL[s])) for s in _DECIMAL_UP]
    for suffix, unit in units:
        if amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return format_quantity(amount, resource)
