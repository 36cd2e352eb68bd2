"""One line, in our words, for everything wrong with a Cohort's, ElasticQuota's or
ResourceFlavor's spec.

pydantic checks the specs (`quotree.models`, `quotree.flavor_spec`); its messages
name its own types ("Input should be a valid dictionary or instance of
PreemptionSpec", "Extra inputs are not permitted") and list a value that is none
of a union's types once per type.
Here each problem becomes `spec.<path>: <what is wrong>`, a union's tries one
problem, and every problem of the spec is listed, joined by `; `, so fixing one
never reveals another that was hidden. The webhook and the simulator print these.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["one_line", "validation_message"]

# pydantic names each member of the Quantity union it tried in the error's location.
_QUANTITY_UNION_TAGS = frozenset({"str", "int", "float"})
_QUANTITY = 'must be a quantity (a string such as "500m" or a number)'

#: pydantic's error types, in our words (the value follows: ", not 5").
_WORDS = {
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
}


def one_line(text: object) -> str:
    """`text` with line breaks escaped: error messages are one line, whatever users send."""
    return str(text).replace("\r", "\\r").replace("\n", "\\n")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _problem(error: Any) -> tuple[tuple[Any, ...], str]:
    loc = tuple(error["loc"])
    kind = error["type"]
    if loc and loc[-1] in _QUANTITY_UNION_TAGS:
        # A value that is none of the quantity types: one problem, not one per type tried.
        return loc[:-1], f"{_QUANTITY}, not {_show(error['input'])}"
    if loc and loc[-1] == "[key]":
        return loc[:-2], f"key {_show(loc[-2])} must be a string"
    if kind == "extra_forbidden":
        return loc, "unknown field"
    if kind == "missing":
        return loc, "is required"
    if kind == "literal_error":
        return loc, f"must be {error['ctx']['expected']}, not {_show(error['input'])}"
    if kind in _WORDS:
        return loc, f"{_WORDS[kind]}, not {_show(error['input'])}"
    return loc, str(error["msg"]).removeprefix("Value error, ")


def validation_message(exc: ValidationError) -> str:
    """`spec.<field>: <problem>` for each problem of a spec, joined by `; `."""
    lines: list[str] = []
    seen: set[tuple[Any, ...]] = set()
    for error in exc.errors():
        loc, message = _problem(error)
        if (loc, message) in seen:
            continue
        seen.add((loc, message))
        where = "spec" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
        lines.append(one_line(f"{where}: {message}"))
    return "; ".join(lines)
