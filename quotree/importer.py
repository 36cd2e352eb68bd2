"""Other quota systems' objects as quotree objects: `kubectl quotree import` and the
simulator share this conversion.

Kueue's Cohorts, ClusterQueues, LocalQueues and ResourceFlavors (`import_kueue`), and the
ElasticQuotas of capacity scheduling and Koordinator (`import_elastic`), become quotree
ResourceFlavors, Cohorts and ElasticQuotas. Each converted object says what it came from;
each field that does not carry over is one note line saying why. A converted tree is
never changed to fit quotree's rules: `Conversion.problems` checks it as the webhook
would (parse, then the tree's rules, e.g. min sums) and says what is broken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from quotree.import_elastic import ELASTIC_GROUPS, convert_elastic
from quotree.import_kueue import KUEUE_GROUP, KUEUE_KINDS, convert_kueue
from quotree.import_nodes import Notes
from quotree.models import DEFAULT_TREE, ConfigError, MemberConfig, parse_member
from quotree.rules import tree_problems
from quotree.structure import Structure

__all__ = ["Conversion", "Converted", "convert", "importable"]


def _group(doc: Mapping[str, Any]) -> str:
    return str(doc.get("apiVersion") or "").rpartition("/")[0]


def importable(doc: Mapping[str, Any]) -> bool:
    """True for an object of another quota system that the conversion reads."""
    group, kind = _group(doc), doc.get("kind")
    if group == KUEUE_GROUP:
        return kind in KUEUE_KINDS
    return group in ELASTIC_GROUPS and kind == "ElasticQuota"


@dataclass(frozen=True, slots=True)
class Converted:
    """One quotree object, and what it came from (one line)."""

    doc: dict[str, Any]
    source: str

    def describe(self) -> str:
        metadata = self.doc["metadata"]
        where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
        return f"{self.doc['kind']} {where}{metadata['name']}"


@dataclass(slots=True)
class Conversion:
    """The quotree objects (flavors, then Cohorts, then ElasticQuotas) and the notes."""

    objects: list[Converted] = field(default_factory=list)
    #: One line per field that does not carry over, and why.
    notes: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """The quotree rules the converted tree breaks, one line each (none: it applies)."""
        lines: list[str] = []
        trees: dict[str, list[MemberConfig]] = {}
        for converted in self.objects:
            if converted.doc["kind"] == "ResourceFlavor":
                continue
            try:
                config = parse_member(converted.doc)
            except ConfigError as exc:
                lines.append(f"{exc} (converted from {converted.source})")
                continue
            trees.setdefault(config.tree or DEFAULT_TREE, []).append(config)
        for configs in trees.values():
            structure = Structure()
            for config in configs:
                structure.set(config)
            for _, problem in sorted(tree_problems(structure).items()):
                if problem.reason != "ParentNotFound":
                    lines.append(f"{problem.message} (rule broken: {problem.reason})")
        return lines

    def documents(self) -> list[tuple[str, dict[str, Any]]]:
        """The objects as the simulator's input, each with what it came from."""
        return [(f"converted from {c.source}", c.doc) for c in self.objects]

    def summary(self) -> list[str]:
        """One line per object: what it came from, what it is now (the simulator's note)."""
        return [f"converted {c.source} to {c.describe()}" for c in self.objects]

    def render(self) -> str:
        """The objects as YAML documents, each after a comment naming its source."""
        parts = [
            f"# From {c.source}\n" + yaml.safe_dump(c.doc, sort_keys=False, width=100)
            for c in self.objects
        ]
        return "---\n".join(parts)


def convert(documents: Iterable[tuple[str, Mapping[str, Any]]]) -> Conversion:
    """Convert every `importable` document (each with where it came from); others are
    left out (the caller says so)."""
    kueue: list[tuple[str, Mapping[str, Any]]] = []
    elastic: list[tuple[str, Mapping[str, Any]]] = []
    for origin, doc in documents:
        if importable(doc):
            (kueue if _group(doc) == KUEUE_GROUP else elastic).append((origin, doc))
    notes = Notes()
    flavors, kueue_nodes = convert_kueue(kueue, notes)
    elastic_nodes = convert_elastic(elastic, notes)
    objects = [Converted(f.to_object(), f.source) for f in flavors]
    nodes = [*kueue_nodes, *elastic_nodes]
    objects += [Converted(n.to_object(), n.source) for n in nodes if n.kind == "Cohort"]
    objects += [Converted(n.to_object(), n.source) for n in nodes if n.kind != "Cohort"]
    return Conversion(objects, notes.lines)
