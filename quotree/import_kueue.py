"""Kueue's Cohorts, ClusterQueues, LocalQueues and ResourceFlavors as quotree objects.

The mapping (docs/import.md has the whole table):

- a ClusterQueue is an ElasticQuota: each flavor's `nominalQuota` is `min`, its
  `borrowingLimit` and `lendingLimit` the same lists; a resource group with one flavor
  whose ResourceFlavor has no node labels gives plain resources, any other splits its
  resources by flavor (`spec.flavors`, in Kueue's order);
- the LocalQueues that point to a ClusterQueue name the namespaces its ElasticQuota
  covers: the first is its namespace, the others `spec.namespaces`;
- a Kueue Cohort (and a cohort a ClusterQueue or Cohort only names) is a Cohort. Kueue's
  Cohort quota is on top of its members', while a quotree Cohort's `min` is the guarantee
  of its whole subtree, so its `min` is its own `nominalQuota` plus its children's `min`;
- `preemption.withinClusterQueue` is `preemption.withinQuota` (Kueue's default, Never,
  is written out); `fairSharing.weight` is `sharedWeight` when any object sets one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.import_nodes import Flavor, Node, Notes, amounts, mapping, mappings
from quotree.quantity import parse_quantity

__all__ = ["KUEUE_GROUP", "KUEUE_KINDS", "convert_kueue"]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_KINDS = ("Cohort", "ClusterQueue", "LocalQueue", "ResourceFlavor")
#: Kueue's quota fields and the quotree list each becomes.
_QUOTA_FIELDS = {
    "nominalQuota": "min",
    "borrowingLimit": "borrowingLimit",
    "lendingLimit": "lendingLimit",
}
#: Fields read elsewhere, or that say nothing quota needs.
_CQ_READ = {
    "cohort",
    "cohortName",
    "resourceGroups",
    "namespaceSelector",
    "preemption",
    "fairSharing",
}
_COHORT_READ = {"parent", "parentName", "resourceGroups", "fairSharing"}
_WHY = {
    "queueingStrategy": "quotree admits each quota's pods by priority, then arrival",
    "flavorFungibility": "quotree tries a quota's flavors in order and takes the first that fits",
    "admissionChecks": "quotree has no admission checks",
    "admissionChecksStrategy": "quotree has no admission checks",
    "admissionScope": "quotree has no admission scopes",
    "stopPolicy": "quotree has no stopped queues",
    "nodeTaints": "quotree places pods by node labels only",
    "tolerations": "quotree places pods by node labels only",
    "topologyName": "quotree has no topology-aware placement",
}
_WITHIN = {
    "Never": "Never",
    "LowerPriority": "LowerPriority",
    "LowerOrNewerEqualPriority": "LowerPriority",
}
#: Sharing weights are written in thousandths: only their ratio between siblings counts.
_WEIGHT_SCALE = 1000


@dataclass(slots=True)
class _Input:
    cohorts: dict[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)
    queues: dict[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)
    locals: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    flavors: dict[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)


def _name(doc: Mapping[str, Any]) -> str:
    return str(mapping(doc.get("metadata")).get("name") or "")


def _spec(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(doc.get("spec"))


def _source(doc: Mapping[str, Any], extra: str = "") -> str:
    what = f"Kueue {doc.get('kind')} {_name(doc)} ({doc.get('apiVersion')})"
    return what + extra


def _unread(origin: str, doc: Mapping[str, Any], read: set[str], notes: Notes) -> None:
    for key in sorted(set(_spec(doc)) - read):
        why = _WHY.get(key, "quotree has no such setting")
        notes.add(origin, _source(doc), f"spec.{key}", why)


def _plain(flavor: str, given: _Input) -> bool:
    """A flavor that stands for every node (a ResourceFlavor with no node labels)."""
    entry = given.flavors.get(flavor)
    return entry is not None and not mapping(_spec(entry[1]).get("nodeLabels"))


def _quotas(origin: str, doc: Mapping[str, Any], node: Node, given: _Input, notes: Notes) -> None:
    """A ClusterQueue's or Cohort's resource groups into the node's lists."""
    what = _source(doc)
    for g, group in enumerate(mappings(_spec(doc).get("resourceGroups"))):
        flavors = mappings(group.get("flavors"))
        plain = len(flavors) == 1 and _plain(str(flavors[0].get("name")), given)
        for f, entry in enumerate(flavors):
            flavor = None if plain else str(entry.get("name"))
            if flavor is not None and flavor not in node.flavors:
                node.flavors.append(flavor)
            for r, resource in enumerate(mappings(entry.get("resources"))):
                name = str(resource.get("name"))
                where = f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}]"
                for kueue_field, list_name in _QUOTA_FIELDS.items():
                    if kueue_field in resource:
                        values = {name: resource[kueue_field]}
                        found = amounts(values, notes, origin, what, f"{where}.{kueue_field}")
                        node.put(list_name, found, flavor)


def _preemption(origin: str, doc: Mapping[str, Any], node: Node, notes: Notes) -> None:
    preemption = mapping(_spec(doc).get("preemption"))
    within = str(preemption.get("withinClusterQueue") or "Never")
    node.within_quota = _WITHIN.get(within, "Never")
    what = _source(doc)
    if within == "LowerOrNewerEqualPriority":
        notes.add(
            origin,
            what,
            "preemption.withinClusterQueue LowerOrNewerEqualPriority",
            "quotree preempts lower priorities only (LowerPriority)",
        )
    reclaim = preemption.get("reclaimWithinCohort")
    if reclaim not in (None, "Any"):
        notes.add(
            origin,
            what,
            f"preemption.reclaimWithinCohort {reclaim}",
            "quotree always takes lent quota back from borrowers, whatever their priority",
        )
    if preemption.get("borrowWithinCohort"):
        notes.add(
            origin,
            what,
            "preemption.borrowWithinCohort",
            "quotree never preempts to borrow; it reclaims only for a quota's own min",
        )
    selector = _spec(doc).get("namespaceSelector")
    if selector:
        notes.add(
            origin,
            what,
            "spec.namespaceSelector",
            "quotree charges the namespaces of the LocalQueues that point to it",
        )


def _weight(doc: Mapping[str, Any], node: Node, weighted: bool) -> None:
    """Kueue's fair-sharing weight (default 1) on every resource of the node."""
    if not weighted:
        return
    weight = mapping(_spec(doc).get("fairSharing")).get("weight", 1)
    try:
        scaled = str(round(float(str(weight)) * _WEIGHT_SCALE))
    except ValueError:
        return
    for key in node.lists["min"]:
        node.lists["sharedWeight"][key] = parse_quantity(scaled, key.partition("@")[0])


def convert_kueue(
    documents: list[tuple[str, Mapping[str, Any]]], notes: Notes
) -> tuple[list[Flavor], list[Node]]:
    """The quotree ResourceFlavors, Cohorts (parents first) and ElasticQuotas."""
    given = _Input()
    for origin, doc in documents:
        table = {
            "Cohort": given.cohorts,
            "ClusterQueue": given.queues,
            "ResourceFlavor": given.flavors,
        }.get(str(doc.get("kind")))
        if table is None:
            given.locals.append((origin, doc))
        else:
            table[_name(doc)] = (origin, doc)
    weighted = any(
        mapping(_spec(d).get("fairSharing")).get("weight") is not None
        for group in (given.cohorts, given.queues)
        for _, d in group.values()
    )
    flavors = []
    for name, (origin, doc) in given.flavors.items():
        _unread(origin, doc, {"nodeLabels"}, notes)
        if not _plain(name, given):
            labels = {str(k): str(v) for k, v in mapping(_spec(doc).get("nodeLabels")).items()}
            flavors.append(Flavor(name, _source(doc), labels))
    quotas = _queues(given, notes, weighted)
    cohorts = _cohorts(given, quotas, notes, weighted)
    return flavors, [*cohorts, *quotas]


def _queues(given: _Input, notes: Notes, weighted: bool) -> list[Node]:
    covering: dict[str, list[str]] = {}
    where: dict[str, list[str]] = {}
    for origin, doc in given.locals:
        namespace = str(mapping(doc.get("metadata")).get("namespace") or "default")
        queue = str(_spec(doc).get("clusterQueue") or "")
        _unread(origin, doc, {"clusterQueue"}, notes)
        if queue not in given.queues:
            notes.add(
                origin,
                _source(doc),
                "spec.clusterQueue",
                f"ClusterQueue {queue!r} is not in the input",
            )
            continue
        covering.setdefault(queue, [])
        if namespace not in covering[queue]:
            covering[queue].append(namespace)
        where.setdefault(namespace, []).append(queue)
    quotas = []
    for name, (origin, doc) in given.queues.items():
        namespaces = covering.get(name) or []
        extra = f", its LocalQueues in {', '.join(namespaces)}" if namespaces else ""
        node = Node("ElasticQuota", name, _source(doc, extra))
        node.namespace = namespaces[0] if namespaces else name
        node.namespaces = namespaces[1:]
        if not namespaces:
            notes.lines.append(
                f"{origin}: {_source(doc)}: no LocalQueue points to it: its ElasticQuota is put "
                f"in namespace {name}, whose pods it takes"
            )
        spec = _spec(doc)
        node.parent = str(spec.get("cohort") or spec.get("cohortName") or "") or None
        _quotas(origin, doc, node, given, notes)
        _preemption(origin, doc, node, notes)
        _weight(doc, node, weighted)
        _unread(origin, doc, _CQ_READ, notes)
        quotas.append(node)
    for namespace, targets in where.items():
        if len(set(targets)) > 1:
            names = ", ".join(sorted(set(targets)))
            notes.lines.append(
                f"namespace {namespace}: LocalQueues of several ClusterQueues ({names}): "
                "its pods must name their quota with label quotree.io/quota-name"
            )
    return quotas


def _cohorts(given: _Input, quotas: list[Node], notes: Notes, weighted: bool) -> list[Node]:
    """Every Cohort, given or only named, with its min the sum of its subtree's."""
    nodes: dict[str, Node] = {}
    for name, (origin, doc) in given.cohorts.items():
        spec = _spec(doc)
        node = Node("Cohort", name, _source(doc))
        node.parent = str(spec.get("parent") or spec.get("parentName") or "") or None
        _quotas(origin, doc, node, given, notes)
        _unread(origin, doc, _COHORT_READ, notes)
        nodes[name] = node
    named = [q.parent for q in quotas] + [c.parent for c in list(nodes.values())]
    for parent in named:
        if parent and parent not in nodes:
            users = sorted(n.name for n in [*quotas, *nodes.values()] if n.parent == parent)
            source = f"Kueue cohort {parent}, named by {', '.join(users)} (no Cohort object)"
            nodes[parent] = Node("Cohort", parent, source)
    order = _parents_first(nodes)
    for name in reversed(order):  # children before parents: each adds its subtree up
        cohort = nodes[name]
        for child in [*quotas, *nodes.values()]:
            if child.parent == name and child is not cohort:
                cohort.put("min", child.lists["min"])
                cohort.add_flavors(child.flavors)
        _weight(given.cohorts[name][1] if name in given.cohorts else {}, cohort, weighted)
    return [nodes[n] for n in order]


def _parents_first(nodes: Mapping[str, Node]) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in seen or name in path:
            return  # a cycle is the rules' to report
        parent = nodes[name].parent
        if parent is not None and parent in nodes:
            visit(parent, (*path, name))
        seen.add(name)
        order.append(name)

    for name in nodes:
        visit(name, ())
    return order
