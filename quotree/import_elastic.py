"""Capacity scheduling's and Koordinator's ElasticQuotas as quotree objects.

Both use the ElasticQuota of `scheduling.sigs.k8s.io/v1alpha1` (`scheduling.x-k8s.io` in
the capacity scheduling KEP): `spec.min` and `spec.max` carry over as they are, in the
same namespace. Koordinator links them into a tree with labels (docs/import.md):

- `quota.scheduling.koordinator.sh/is-parent: "true"`: a Cohort (cluster-scoped: the
  namespace is dropped);
- `.../parent` (`.../parent-quota-name` in Koordinator's proposal): the parent; empty,
  `root` or `koordinator-root-quota` is the top (the root quota itself is the cluster);
- annotation `.../shared-weight` (a JSON resource list): `sharedWeight`;
- `.../allow-lent-resource: "false"`: `lendingLimit` 0 on every resource of `min`.

What the scheduler writes (`runtime`, `request` and the like) is quotree's own to work
out; any other key of Koordinator's prefix is a note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from quotree.import_nodes import Node, Notes, amounts, mapping

__all__ = ["ELASTIC_GROUPS", "convert_elastic"]

ELASTIC_GROUPS = ("scheduling.sigs.k8s.io", "scheduling.x-k8s.io")
PREFIX = "quota.scheduling.koordinator.sh/"
ROOT_NAMES = ("", "root", "koordinator-root-quota")
#: Written by koord-scheduler, not by users: nothing to carry over.
_WRITTEN = {"runtime", "request", "total-resource", "guaranteed", "allocated",
            "non-preemptible-request", "non-preemptible-used", "child-request"}  # fmt: skip
_READ = {"is-parent", "parent", "parent-quota-name", "shared-weight", "allow-lent-resource"}
_WHY = {
    "tree-id": "Koordinator's trees divide the nodes; each quotree tree shares the whole cluster",
    "is-root": "the root quota is the cluster itself in quotree",
}


def _koordinator(doc: Mapping[str, Any]) -> dict[str, str]:
    """The object's Koordinator labels and annotations, by key without the prefix."""
    metadata = mapping(doc.get("metadata"))
    keys: dict[str, str] = {}
    for part in ("annotations", "labels"):
        for key, value in mapping(metadata.get(part)).items():
            if str(key).startswith(PREFIX):
                keys[str(key)[len(PREFIX) :]] = str(value)
    return keys


def _source(doc: Mapping[str, Any], koordinator: bool) -> str:
    metadata = mapping(doc.get("metadata"))
    system = "Koordinator" if koordinator else "capacity scheduling"
    where = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
    return f"{system} ElasticQuota {where} ({doc.get('apiVersion')})"


def _convert_one(origin: str, doc: Mapping[str, Any], notes: Notes) -> Node | None:
    metadata = mapping(doc.get("metadata"))
    name = str(metadata.get("name"))
    keys = _koordinator(doc)
    what = _source(doc, bool(keys))
    if name == "koordinator-root-quota" or keys.get("is-root") == "true":
        notes.lines.append(
            f"{origin}: {what}: not converted: the root quota is the cluster itself in "
            "quotree; its children are top-level"
        )
        return None
    parent_quota = keys.get("is-parent") == "true"
    node = Node("Cohort" if parent_quota else "ElasticQuota", name, what)
    if not parent_quota:
        node.namespace = str(metadata.get("namespace") or "default")
    parent = keys.get("parent", keys.get("parent-quota-name", ""))
    node.parent = None if parent in ROOT_NAMES else parent
    spec = mapping(doc.get("spec"))
    for list_name in ("min", "max"):
        node.put(list_name, amounts(spec.get(list_name), notes, origin, what, f"spec.{list_name}"))
    if "shared-weight" in keys:
        field_name = f"annotation {PREFIX}shared-weight"
        try:
            weights = json.loads(keys["shared-weight"])
        except ValueError:
            notes.add(origin, what, field_name, "not a JSON resource list")
        else:
            node.put("sharedWeight", amounts(weights, notes, origin, what, field_name))
    if keys.get("allow-lent-resource") == "false":
        node.put("lendingLimit", dict.fromkeys(node.lists["min"], 0))
    for key in sorted(set(keys) - _READ - _WRITTEN):
        why = _WHY.get(key, "quotree has no such setting")
        notes.add(origin, what, f"{PREFIX}{key}", why)
    if name == "koordinator-system-quota":
        notes.lines.append(
            f"{origin}: {what}: quotree never gates the system namespaces; the quota is "
            "converted as any other"
        )
    if name == "koordinator-default-quota":
        notes.lines.append(
            f"{origin}: {what}: to charge pods no quota covers to it, set the operator's "
            "QUOTREE_DEFAULT_QUOTA"
        )
    return node


def convert_elastic(documents: list[tuple[str, Mapping[str, Any]]], notes: Notes) -> list[Node]:
    """The Cohorts (Koordinator's parent quotas) and ElasticQuotas, in input order."""
    nodes = [_convert_one(origin, doc, notes) for origin, doc in documents]
    kept = [node for node in nodes if node is not None]
    return [*(n for n in kept if n.kind == "Cohort"), *(n for n in kept if n.kind != "Cohort")]
