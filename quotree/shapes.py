"""The shape of the objects the simulator reads, checked before anything reads them.

Why a layer of its own: the engine's readers (`podfacts.pod_facts`,
`capacity.node_allocatable`) trust what the API server has already validated,
and must stay fast for the operator. Hand-written files have had no API server:
a string where a list belongs would reach the engine as an exception. So every
document is checked here first, and each problem is one `path: what is wrong`
(`spec.containers[0].resources: must be an object, not 'x'`).

What is checked: the top-level fields of every kind (an unknown one is a
problem: kubectl would refuse it), all of `metadata`, and every field the
simulator reads, with its type and range. Fields it does not read (a
container's image, volumes, ...) are left to the API server. All problems of a
document are reported, in document order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from quotree.quantity import QuantityError, parse_quantity

__all__ = [
    "INT32",
    "Check",
    "anything",
    "boolean",
    "integer",
    "list_of",
    "obj",
    "problems",
    "quantity_map",
    "show",
    "string",
    "string_map",
    "timestamp",
]

#: One check: yields a `path: problem` line for each problem of `value` at `path`.
Check = Callable[[Any, str], Iterator[str]]

INT32 = (-(2**31), 2**31 - 1)


def show(value: object) -> str:
    """A value as the error line quotes it: short, on one line."""
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return text.replace("\n", "\\n").replace("\r", "\\r")


def _at(path: str, key: object) -> str:
    """The path of field `key` below `path`, on one line whatever the key holds."""
    name = str(key).replace("\n", "\\n").replace("\r", "\\r")
    return f"{path}.{name}" if path else name


def _wrong(path: str, want: str, value: object) -> str:
    return f"{path}: must be {want}, not {show(value)}"


def string(value: Any, path: str) -> Iterator[str]:
    if not isinstance(value, str):
        yield _wrong(path, "a string", value)


def boolean(value: Any, path: str) -> Iterator[str]:
    if not isinstance(value, bool):
        yield _wrong(path, "true or false", value)


def integer(low: int, high: int) -> Check:
    """A whole number (not a bool, not a float) from `low` to `high`."""

    def check(value: Any, path: str) -> Iterator[str]:
        if not isinstance(value, int) or isinstance(value, bool):
            yield _wrong(path, f"a whole number from {low} to {high}", value)
        elif not low <= value <= high:
            yield f"{path}: {value} is out of range ({low} to {high})"

    return check


_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)$")


def timestamp(value: Any, path: str) -> Iterator[str]:
    """An RFC 3339 time as the API serves it (YAML may have read it as a datetime already)."""
    if isinstance(value, datetime) or value is None:
        return
    if isinstance(value, str) and _RFC3339.match(value):
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return
    yield _wrong(path, "a time such as 2024-01-01T00:00:00Z", value)


def anything(value: Any, path: str) -> Iterator[str]:
    del value, path
    return iter(())


def list_of(item: Check) -> Check:
    """A list (or null) whose every item passes `item`."""

    def check(value: Any, path: str) -> Iterator[str]:
        if value is None:
            return
        if not isinstance(value, list):
            yield _wrong(path, "a list", value)
            return
        for index, entry in enumerate(value):
            if entry is None:
                yield f"{path}[{index}]: must not be null"
            else:
                yield from item(entry, f"{path}[{index}]")

    return check


def map_of(item: Check) -> Check:
    """An object (or null) with string keys whose every value passes `item`."""

    def check(value: Any, path: str) -> Iterator[str]:
        if value is None:
            return
        if not isinstance(value, Mapping):
            yield _wrong(path, "an object", value)
            return
        for key, entry in value.items():
            if not isinstance(key, str):
                yield f"{path}: key {show(key)} must be a string"
            else:
                yield from item(entry, _at(path, key))

    return check


string_map = map_of(string)


def _quantity(value: Any, path: str) -> Iterator[str]:
    name = path.rsplit(".", 1)[-1]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        yield _wrong(path, 'a quantity (a string such as "500m" or a number)', value)
        return
    try:
        parse_quantity(value, name)
    except QuantityError as exc:
        yield f"{path}: {exc}"


quantity_map = map_of(_quantity)


def obj(
    fields: Mapping[str, Check], *, strict: bool = False, required: tuple[str, ...] = ()
) -> Check:
    """An object (or null) whose known fields pass their checks.

    `strict`: a field not in `fields` is a problem; `required`: these must be present.
    """

    def check(value: Any, path: str) -> Iterator[str]:
        if value is None:
            if required:
                yield f"{path}: is required"
            return
        if not isinstance(value, Mapping):
            yield _wrong(path, "an object", value)
            return
        for name in required:
            if value.get(name) is None:
                yield f"{_at(path, name)}: is required"
        for key, entry in value.items():
            field_check = fields.get(key) if isinstance(key, str) else None
            if field_check is not None:
                yield from field_check(entry, _at(path, key))
            elif strict:
                yield f"{_at(path, show(key) if not isinstance(key, str) else key)}: unknown field"

    return check


def problems(value: Any, check: Check) -> list[str]:
    """Every problem of a document (`check` at the top level), in document order."""
    return list(check(value, ""))
