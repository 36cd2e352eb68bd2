"""The tree as a person reads it: one renderer for `quotree simulate -o table` and
`kubectl quotree tree` (pure: a report dict in, text out).

The input is the shape of `quotree simulate -o json` (api.md): `capacity`, `nodes` (name ->
kind, parent, min, max, request, runtime, used, valid) and `pods` (key -> state, reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from quotree.models import DEFAULT_TREE
from quotree.quantity import QuantityError, parse_quantity

__all__ = ["BAR_COLUMNS", "render_tree", "usage_bar"]

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


def render_tree(
    data: Mapping[str, Any], warnings: Iterable[str] = (), *, bar_width: int = 0
) -> str:
    """The tree, then the pods that are not simply admitted; bars when `bar_width` > 0."""
    nodes = data["nodes"]
    children: dict[str | None, list[str]] = {}
    for name, entry in nodes.items():
        parent = entry["parent"] if entry["parent"] in nodes else None
        children.setdefault(parent, []).append(name)
    capacity = ", ".join(f"{r} {a}" for r, a in data["capacity"].items()) or "none"
    lines = [f"cluster (capacity: {capacity})"]
    # Flavored resources (`nvidia.com/gpu@a100`) are long: the column grows to fit them.
    width = max(
        [16]
        + [
            len(r) + 1
            for entry in nodes.values()
            for r in (*entry["min"], *entry["max"], *entry["runtime"])
        ]
    )
    header = (
        f"{'':<34}{'RESOURCE':<{width}}"
        f"{'MIN':>8}{'MAX':>10}{'REQUEST':>10}{'RUNTIME':>10}{'USED':>10}"
    )
    if bar_width:
        header += f" {'USED/RUNTIME':<{bar_width + 2}}"
    lines.append(header.rstrip())

    def walk(name: str, prefix: str, last: bool) -> None:
        entry = nodes[name]
        branch = "└─ " if last else "├─ "
        tag = "coh" if entry["kind"] == "Cohort" else "eq"
        flag = "" if entry["valid"] else "  [inactive]"
        title = f"{prefix}{branch}{name} ({tag}){flag}"
        resources = sorted(set(entry["min"]) | set(entry["max"]) | set(entry["runtime"]))
        for i, resource in enumerate(resources or [""]):
            first = title if i == 0 else ""
            line = (
                f"{first:<34}{resource:<{width}}"
                f"{entry['min'].get(resource, '0') if resource else '':>8}"
                f"{entry['max'].get(resource, '-') if resource else '':>10}"
                f"{entry['request'].get(resource, ''):>10}"
                f"{entry['runtime'].get(resource, ''):>10}"
                f"{entry['used'].get(resource, ''):>10}"
            )
            if bar_width and resource:
                line += " " + usage_bar(entry, resource, bar_width)
            lines.append(line)
        kids = sorted(children.get(name, []))
        for j, kid in enumerate(kids):
            walk(kid, prefix + ("   " if last else "│  "), j == len(kids) - 1)

    tops = sorted(children.get(None, []))
    trees = sorted({nodes[t].get("tree", DEFAULT_TREE) for t in tops})
    if trees in ([], [DEFAULT_TREE]):
        for j, top in enumerate(tops):
            walk(top, "", j == len(tops) - 1)
    else:
        # Several trees (api.md, "Several trees"): each shares out the whole cluster.
        trees.sort(key=lambda t: (t != DEFAULT_TREE, t))
        for tree in trees:
            lines.append(f"tree {tree}")
            mine = [t for t in tops if nodes[t].get("tree", DEFAULT_TREE) == tree]
            for j, top in enumerate(mine):
                walk(top, "", j == len(mine) - 1)
    pods = data["pods"]
    counts: dict[str, int] = {}
    for entry in pods.values():
        counts[entry["state"]] = counts.get(entry["state"], 0) + 1
    lines.append("")
    lines.append("pods: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"))
    for key, entry in pods.items():
        if entry["state"] in ("admitted", "unmanaged"):
            continue
        lines.append(f"  {key:<30} {entry['state']:<10} {entry['reason']}")
    for warning in warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)
