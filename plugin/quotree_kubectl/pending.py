"""`kubectl quotree pending`: the waiting units (pods and pod groups) in the order the
engine takes them, with their position in their quota and under each ancestor.

The engine is rebuilt from the live objects as `why` builds it (`why.live_engine`: gated
pods wait, the others are admitted, one decision without reclaim), and the order is the
engine's own (`Engine.waiting`). Pure: the caller reads the cluster and the clock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quotree.engine import Waiting
from quotree_kubectl.cluster import ClusterState, PluginError
from quotree_kubectl.let_in import q
from quotree_kubectl.why import live_engine

__all__ = ["Selection", "age", "pending", "render_pending", "waiting_json"]


@dataclass(frozen=True)
class Selection:
    """Which units to list: of one namespace (None: every one), under one quota or Cohort."""

    namespace: str | None = None
    quota: str | None = None
    cohort: str | None = None


def pending(state: ClusterState, selection: Selection) -> list[Waiting]:
    """The selected waiting units, in the engine's order."""
    engine, _ = live_engine(state)
    configs = engine.all_configs()
    for name, kind in ((selection.quota, "ElasticQuota"), (selection.cohort, "Cohort")):
        if name is not None and (name not in configs or configs[name].kind != kind):
            raise PluginError(f"{kind} {name} not found")
    out = []
    for unit in engine.waiting():
        under = {member for member, _ in unit.positions}
        if selection.namespace is not None and unit.key.split("/")[0] != selection.namespace:
            continue
        if selection.quota is not None and unit.quota != selection.quota:
            continue
        if selection.cohort is not None and selection.cohort not in under:
            continue
        out.append(unit)
    return out


def age(seconds: float) -> str:
    """An age as kubectl writes it: 45s, 12m, 5h, 3d."""
    seconds = max(int(seconds), 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _request(unit: Waiting) -> str:
    return ",".join(f"{r}={q(a, r)}" for r, a in sorted(unit.request.items())) or "-"


def render_pending(units: Sequence[Waiting], now: float) -> str:
    """The table: one row per unit, in the engine's order."""
    if not units:
        return "No waiting pods or pod groups."
    header = ("#", "NAMESPACE", "NAME", "KIND", "QUOTA", "IN QUOTA", "UNDER")
    tail = ("PRIORITY", "AGE", "REQUEST", "REASON")
    rows = []
    for unit in units:
        namespace, name = unit.key.split("/", 1)
        ancestors = ", ".join(f"{member} {at}" for member, at in unit.positions[1:]) or "-"
        rows.append(
            (
                str(unit.order),
                namespace,
                name,
                "PodGroup" if unit.group else "Pod",
                unit.quota,
                str(unit.positions[0][1]),
                ancestors,
                str(unit.priority),
                age(now - unit.since),
                _request(unit),
                unit.reason,
            )
        )
    table = [(*header, *tail), *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) + len(tail) - 1)]
    lines = []
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def waiting_json(units: Sequence[Waiting], now: float) -> str:
    """The same for programs: positions as {member: position}, request in quantities."""
    items: list[dict[str, Any]] = []
    for unit in units:
        namespace, name = unit.key.split("/", 1)
        items.append(
            {
                "order": unit.order,
                "kind": "PodGroup" if unit.group else "Pod",
                "namespace": namespace,
                "name": name,
                "quota": unit.quota,
                "positions": dict(unit.positions),
                "pods": list(unit.pods),
                "priority": unit.priority,
                "ageSeconds": max(int(now - unit.since), 0),
                "request": {r: q(a, r) for r, a in sorted(unit.request.items())},
                "reason": unit.reason,
            }
        )
    return json.dumps({"items": items}, indent=2)
