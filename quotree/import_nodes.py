"""The quotree objects an import builds, and the notes it writes about what it leaves out.

Each source system's converter (`import_kueue`, `import_elastic`) builds `Node`s, the
Cohorts and ElasticQuotas to be, and `Flavor`s, and tells a `Notes` each field it cannot
carry over and why. A node keeps its resource lists in base units, keyed by resource or,
for a resource split by flavor, by `<resource>@<flavor>` as the engine names them, so that
a Kueue Cohort can add up its children's lists; `Node.to_object` writes the quotree
object, with the flavored keys moved into `spec.flavors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.models import GROUP, VERSION, Kind
from quotree.quantity import QuantityError, add_amounts, format_quantity, parse_quantity

__all__ = ["LISTS", "Flavor", "Node", "Notes", "amounts", "mapping", "mappings"]

API_VERSION = f"{GROUP}/{VERSION}"
#: The resource lists of a Cohort or ElasticQuota, in the order they are written.
LISTS = ("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit")


class Notes:
    """One line each: a field that does not carry over, and why (standard error)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, where: str, what: str, field_name: str, why: str) -> None:
        self.lines.append(f"{where}: {what}: {field_name} not carried over: {why}")


def mapping(value: object) -> Mapping[str, Any]:
    """`value` if it is an object, else an empty one (a malformed field reads as unset)."""
    return value if isinstance(value, Mapping) else {}


def mappings(value: object) -> list[Mapping[str, Any]]:
    """The objects of a list (anything else reads as an empty list)."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def amounts(values: object, notes: Notes, where: str, what: str, field_name: str) -> dict[str, int]:
    """A resource list in base units; an entry that is not a quantity is a note, left out."""
    out: dict[str, int] = {}
    if values is None:
        return out
    if not isinstance(values, Mapping):
        notes.add(where, what, field_name, f"not a resource list: {values!r:.40}")
        return out
    for resource, value in values.items():
        try:
            out[str(resource)] = parse_quantity(value, str(resource))
        except QuantityError as exc:
            notes.add(where, what, f"{field_name}.{resource}", str(exc))
    return out


@dataclass(slots=True)
class Flavor:
    """A ResourceFlavor to be."""

    name: str
    source: str
    node_labels: dict[str, str] = field(default_factory=dict)

    def to_object(self) -> dict[str, Any]:
        spec = {"nodeLabels": dict(self.node_labels)} if self.node_labels else {}
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": self.name},
            "spec": spec,
        }


@dataclass(slots=True)
class Node:
    """A Cohort or ElasticQuota to be, with what it came from (`source`, one line)."""

    kind: Kind
    name: str
    source: str
    namespace: str | None = None
    parent: str | None = None
    #: Each of LISTS: resource (or `<resource>@<flavor>`) -> base units.
    lists: dict[str, dict[str, int]] = field(default_factory=lambda: {k: {} for k in LISTS})
    #: The flavors the node splits resources by, in order of preference.
    flavors: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    #: `preemption.withinQuota` (ElasticQuota only; None: quotree's default).
    within_quota: str | None = None

    def put(self, list_name: str, values: Mapping[str, int], flavor: str | None = None) -> None:
        """Add `values` to one list, on `flavor` when given."""
        if flavor is not None and flavor not in self.flavors:
            self.flavors.append(flavor)
        keyed = {(f"{r}@{flavor}" if flavor else r): a for r, a in values.items()}
        add_amounts(self.lists[list_name], keyed)

    def add_flavors(self, flavors: list[str]) -> None:
        self.flavors.extend(f for f in flavors if f not in self.flavors)

    def to_object(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if self.parent:
            spec["parent"] = self.parent
        entries: dict[str, dict[str, Any]] = {f: {"name": f} for f in self.flavors}
        for list_name in LISTS:
            plain: dict[str, str] = {}
            for key, amount in sorted(self.lists[list_name].items()):
                resource, _, flavor = key.partition("@")
                text = format_quantity(amount, resource)
                if flavor:
                    entries[flavor].setdefault(list_name, {})[resource] = text
                else:
                    plain[resource] = text
            if plain:
                spec[list_name] = plain
        if entries:
            spec["flavors"] = list(entries.values())
        if self.namespaces:
            spec["namespaces"] = list(self.namespaces)
        if self.within_quota is not None:
            spec["preemption"] = {"withinQuota": self.within_quota}
        metadata: dict[str, Any] = {"name": self.name}
        if self.kind == "ElasticQuota":
            metadata["namespace"] = self.namespace
        return {"apiVersion": API_VERSION, "kind": self.kind, "metadata": metadata, "spec": spec}
