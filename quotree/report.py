"""The tree as a person reads it: one renderer for `quotree simulate -o table` and
`kubectl quotree tree` (pure: a report dict in, text out).

The input is the shape of `quotree simulate -o json` (docs/reference/commands.md,
"`quotree simulate`"): `capacity`, `nodes` (name -> kind, parent, min, max, request,
runtime, used, valid) and `pods` (key -> state, reason), optionally with `unmanaged` (what
pods outside the tree hold) and per member `scaledMin` (guarantees scaled below min).
Column widths follow the content, so long names and numbers never run together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from quotree.models import DEFAULT_TREE
from quotree.quantity import QuantityError, format_in_family, parse_quantity, quantity_family

__all__ = ["BAR_COLUMNS", "COLUMNS", "legend", "render_tree", "tree_width", "usage_bar"]

#: Extra columns a usage bar takes (a space, the brackets and `width` cells).
BAR_COLUMNS = 3


def _amount(quantity: str | None, resource: str) -> int:
    if not quantity:
        return 0
    try:
        return parse_quantity(quantity, resource)
    except QuantityError:
        return 0


def usage_bar(entry: Mapping[str, Any], resource: str, width: int) -> str:
    """`[####==  ]`: used (#) within runtime (=), scaled to the larger of runtime and used."""
    used = _amount(entry["used"].get(resource), resource)
    runtime = _amount(entry["runtime"].get(resource), resource)
    scale = max(used, runtime)
    if scale <= 0:
        return "[" + " " * width + "]"
    used_cells = round(width * min(used, runtime) / scale)
    runtime_cells = round(width * runtime / scale)
    over_cells = round(width * used / scale) - used_cells if used > runtime else 0
    cells = "#" * used_cells + "!" * over_cells + "=" * max(0, runtime_cells - used_cells)
    return "[" + cells[:width].ljust(width) + "]"


#: The table's columns after the tree: (title, minimum width); numbers are right-aligned.
COLUMNS = (("MIN", 8), ("MAX", 10), ("REQUEST", 10), ("RUNTIME", 10), ("USED", 10))
#: Minimum widths of the tree column and of the resource column.
TREE_WIDTH = 34
RESOURCE_WIDTH = 16


def legend(*, scaled: bool = True) -> str:
    """What the table shows, column by column (docs/semantics.md's words, in short), for the
    commands' `--help`; `scaled`: the MIN column may show scaled guarantees."""
    scaled_text = (
        '\n            "4, scaled 3500m": the cluster holds less than the mins add up to,'
        "\n            and the guarantee was scaled down to fit"
        if scaled
        else ""
    )
    return f"""\
the table:
  The first line is the capacity the tree shares out: the allocatable of the Ready
  nodes, less what pods outside the tree (unmanaged pods) hold. Then one row per
  Cohort (coh) or ElasticQuota (eq) and resource:

  RESOURCE  a resource the node takes part in; name@flavor is a flavor's share
  MIN       the guarantee (spec.min){scaled_text}
  MAX       the ceiling (spec.max); - for none
  REQUEST   demand: what its pods ask for, pending and admitted, at least what it
            keeps back from lending (min - lendingLimit) and at most its cap
  RUNTIME   what it may use now: its demand up to its guarantee, plus its
            weighted share of what others leave idle
  USED      what its admitted pods hold

  Quantities are printed in the units the input wrote them in (1G, 1Gi, 500m).
  Then the pods that wait or were evicted, each with its reason, and warnings.
"""


@dataclass(frozen=True, slots=True)
class _Row:
    """One line of the table: the member's title on its first resource, the cells, a bar."""

    title: str
    resource: str = ""
    cells: tuple[str, ...] = ()
    bar: str = ""


def _header(data: Mapping[str, Any]) -> str:
    """`cluster (capacity: ...)`: what the tree shares; with what unmanaged pods hold
    (the `unmanaged` key) taken out of the allocatable, and said so."""
    capacity = data["capacity"]
    held = data.get("unmanaged") or {}
    shares = []
    for resource, total in capacity.items():
        amount = total
        if resource in held:
            left = max(0, _amount(total, resource) - _amount(held[resource], resource))
            family = quantity_family(total) or quantity_family(held[resource])
            amount = format_in_family(left, resource, family)
        shares.append(f"{resource} {amount}")
    text = ", ".join(shares) or "none"
    if held:
        parts = ", ".join(f"{r} {held[r]} of {capacity[r]}" for r in capacity if r in held)
        text += f"; unmanaged pods hold {parts} allocatable"
    return f"cluster (capacity: {text})"


def _min_cell(entry: Mapping[str, Any], resource: str) -> str:
    low = entry["min"].get(resource, "0")
    scaled = (entry.get("scaledMin") or {}).get(resource)
    return f"{low}, scaled {scaled}" if scaled else low


def _rows(data: Mapping[str, Any], bar_width: int) -> list[_Row]:
    members = data["nodes"]
    children: dict[str | None, list[str]] = {}
    for name, entry in members.items():
        parent = entry["parent"] if entry["parent"] in members else None
        children.setdefault(parent, []).append(name)
    rows: list[_Row] = []

    def walk(name: str, prefix: str, last: bool) -> None:
        entry = members[name]
        branch = "└─ " if last else "├─ "
        tag = "coh" if entry["kind"] == "Cohort" else "eq"
        flag = "" if entry["valid"] else "  [inactive]"
        title = f"{prefix}{branch}{name} ({tag}){flag}"
        resources = sorted(set(entry["min"]) | set(entry["max"]) | set(entry["runtime"]))
        for i, resource in enumerate(resources or [""]):
            cells = ("",) * len(COLUMNS)
            if resource:
                cells = (
                    _min_cell(entry, resource),
                    entry["max"].get(resource, "-"),
                    *(entry[k].get(resource, "") for k in ("request", "runtime", "used")),
                )
            bar = usage_bar(entry, resource, bar_width) if bar_width and resource else ""
            rows.append(_Row(title if i == 0 else "", resource, cells, bar))
        kids = sorted(children.get(name, []))
        for j, kid in enumerate(kids):
            walk(kid, prefix + ("   " if last else "│  "), j == len(kids) - 1)

    tops = sorted(children.get(None, []))
    trees = sorted({members[t].get("tree", DEFAULT_TREE) for t in tops})
    if trees in ([], [DEFAULT_TREE]):
        for j, top in enumerate(tops):
            walk(top, "", j == len(tops) - 1)
    else:
        # Several trees (docs/reference/objects.md, "Several trees"): each shares out the
        # whole cluster.
        trees.sort(key=lambda t: (t != DEFAULT_TREE, t))
        for tree in trees:
            rows.append(_Row(f"tree {tree}"))
            mine = [t for t in tops if members[t].get("tree", DEFAULT_TREE) == tree]
            for j, top in enumerate(mine):
                walk(top, "", j == len(mine) - 1)
    return rows


def _table(rows: list[_Row], bar_width: int) -> list[str]:
    """The rows in columns as wide as their content needs: never run together, at least
    two spaces between the tree and the resources and between numbers."""
    grid = [r for r in rows if r.cells]
    tree_width = max([TREE_WIDTH] + [len(r.title) + 2 for r in grid])
    resource_width = max([RESOURCE_WIDTH] + [len(r.resource) + 1 for r in grid])
    widths = [
        max([least, len(title) + 2] + [len(r.cells[i]) + 2 for r in grid])
        for i, (title, least) in enumerate(COLUMNS)
    ]

    def line(title: str, resource: str, cells: Iterable[str], bar: str) -> str:
        text = f"{title:<{tree_width}}{resource:<{resource_width}}"
        text += "".join(f"{cell:>{width}}" for cell, width in zip(cells, widths, strict=True))
        return (text + (f" {bar}" if bar else "")).rstrip()

    lines = [line("", "RESOURCE", (t for t, _ in COLUMNS), "USED/RUNTIME" if bar_width else "")]
    for row in rows:
        lines.append(line(row.title, row.resource, row.cells, row.bar) if row.cells else row.title)
    return lines


def tree_width(data: Mapping[str, Any]) -> int:
    """How many columns the table takes without usage bars (the plugin adds bars when
    the terminal has room for them)."""
    return max(len(line) for line in _table(_rows(data, 0), 0))


def render_tree(
    data: Mapping[str, Any], warnings: Iterable[str] = (), *, bar_width: int = 0
) -> str:
    """The tree, then the pods that are not simply admitted; bars when `bar_width` > 0.

    `data` may add to the JSON report `unmanaged` (what unmanaged pods hold: the header
    takes it out of the capacity) and per member `scaledMin` (guarantees scaled below min).
    """
    lines = [_header(data), *_table(_rows(data, bar_width), bar_width)]
    pods = data["pods"]
    counts: dict[str, int] = {}
    for entry in pods.values():
        counts[entry["state"]] = counts.get(entry["state"], 0) + 1
    lines.append("")
    lines.append("pods: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"))
    listed = [(k, e) for k, e in pods.items() if e["state"] not in ("admitted", "unmanaged")]
    key_width = max([30] + [len(k) for k, _ in listed])
    for key, entry in listed:
        lines.append(f"  {key:<{key_width}} {entry['state']:<10} {entry['reason']}")
    groups = data.get("groups") or {}
    if groups:
        states: dict[str, int] = {}
        for entry in groups.values():
            states[entry["state"]] = states.get(entry["state"], 0) + 1
        lines.append("")
        lines.append("pod groups: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
        for key, entry in groups.items():
            if entry["state"] != "admitted":
                lines.append(f"  {key:<{key_width}} {entry['state']:<10} {entry['reason']}")
    for warning in dict.fromkeys(warnings):  # each once, in order
        lines.append(f"warning: {warning}")
    return "\n".join(lines)
