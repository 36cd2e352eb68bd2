"""The units a person wrote quantities in, so that the tree is printed back in them.

The engine counts base units (`quantity.py`), and the operator's status prints them one
canonical way. A table that says `1000000000` where its input said `1G` reads badly, so
the table (`quotree simulate -o table`, `kubectl quotree tree`) prints each resource in
the family its quantities were written in: binary suffixes (Ki, Mi, Gi...), decimal ones
(k, M, G...) or plain numbers, the one written more often for that resource, the first
one written on a tie. People write Cohorts, ElasticQuotas, ResourceFlavors and pods; the
kubelet writes a Node's quantities (memory always in Ki), so they count only for a
resource nothing else names. The rule is in docs/design/choices.md ("Quantities in the table").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from quotree.models import GPU_MEMORY
from quotree.quantity import (
    QuantityError,
    UnitFamily,
    base_resource,
    format_in_family,
    parse_quantity,
    quantity_family,
)

__all__ = ["RESOURCE_LISTS", "Units"]

#: The fields that hold a resource list (resource -> quantity) in the objects quotree reads.
RESOURCE_LISTS = frozenset(
    {
        "min",
        "max",
        "borrowingLimit",
        "lendingLimit",
        "requests",
        "limits",
        "overhead",
        "allocatable",
        "capacity",
    }
)

#: The report fields (`quotree simulate -o json`'s shape, and the table's additions)
#: that hold a resource list of quantity strings.
_REPORT_LISTS = ("min", "max", "request", "runtime", "used", "scaledMin")

_T = TypeVar("_T")


class Units:
    """The unit family of each resource, from the quantities written for it."""

    def __init__(self) -> None:
        # base resource -> family -> how many quantities were written in it (in the
        # order first seen, for the tie); people's objects, then Nodes'
        self._written: dict[str, dict[UnitFamily, int]] = {}
        self._nodes: dict[str, dict[UnitFamily, int]] = {}

    def note(self, resource: str, value: object, *, node: bool = False) -> None:
        """One quantity written for `resource` (anything that is not a quantity is ignored);
        `node`: a Node's, counted only for resources nothing else names."""
        family = quantity_family(value)
        if family is not None:
            written = self._nodes if node else self._written
            counts = written.setdefault(base_resource(resource), {})
            counts[family] = counts.get(family, 0) + 1

    def note_object(self, obj: object) -> None:
        """Every quantity in the resource lists of a Kubernetes object, however deep (a
        Pod's containers, a Deployment's pod template, a quota's flavors). Never raises:
        malformed objects are for the input's own checks to report."""
        node = isinstance(obj, Mapping) and obj.get("kind") == "Node"
        stack: list[object] = [obj]
        seen: set[int] = set()  # YAML anchors may make an object contain itself
        while stack:
            item = stack.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, Mapping):
                children = []
                for key, value in item.items():
                    if key in RESOURCE_LISTS and isinstance(value, Mapping):
                        for resource, quantity in value.items():
                            if isinstance(resource, str):
                                self.note(resource, quantity, node=node)
                    elif key == "gpuMemoryPerGPU":
                        self.note(GPU_MEMORY, value)
                    if isinstance(value, Mapping | list):
                        children.append(value)
                stack.extend(reversed(children))  # document order, for the tie
            elif isinstance(item, list):
                stack.extend(reversed(item))

    def noting(self, documents: Iterable[tuple[str, _T]]) -> Iterator[tuple[str, _T]]:
        """The documents, unchanged, each noted on its way through."""
        for origin, doc in documents:
            self.note_object(doc)
            yield origin, doc

    def family(self, resource: str) -> UnitFamily | None:
        """The family `resource` is printed in: the one written more often, the first on
        a tie (Nodes' only when nothing else names it); None when nothing names it."""
        base = base_resource(resource)
        counts = self._written.get(base) or self._nodes.get(base)
        if not counts:
            return None
        return max(counts, key=lambda f: counts[f])  # max keeps the first of equals

    def format(self, amount: int, resource: str) -> str:
        """Base units as a quantity in the resource's family (`quantity.format_in_family`)."""
        return format_in_family(amount, resource, self.family(resource))

    def restyle(self, amounts: Mapping[str, str]) -> dict[str, str]:
        """A resource list of quantity strings, each printed again in its family
        (strings that are not quantities, such as `unlimited`, are kept)."""
        out = {}
        for resource, text in amounts.items():
            try:
                out[resource] = self.format(parse_quantity(text, resource), resource)
            except QuantityError:
                out[resource] = text
        return out

    def restyle_report(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """A tree report (the shape `report.render_tree` draws) with every quantity
        printed in its family; the input is left as it is."""
        out = dict(data)
        for key in ("capacity", "unmanaged"):
            if key in data:
                out[key] = self.restyle(data[key])
        out["nodes"] = {
            name: {k: self.restyle(v) if k in _REPORT_LISTS else v for k, v in entry.items()}
            for name, entry in data["nodes"].items()
        }
        return out
