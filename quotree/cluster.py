"""The cluster under the trees: its Nodes that count, the capacity they make, and what pods
outside every tree hold.

Why a module of its own: docs/semantics.md's "Capacity" (the allocatable of Ready, schedulable
Nodes, less what unmanaged pods hold) is one rule every tree shares out; with resource
flavors, a Node's labels also say which flavors' capacity it adds to. Here "node" is a
Kubernetes Node, never a member of a tree.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotree.capacity import cluster_capacity, flavor_matches
from quotree.flavor_spec import FlavorConfig
from quotree.models import flavored
from quotree.podfacts import PodFacts
from quotree.quantity import add_amounts
from quotree.trees import Forest

__all__ = ["Cluster"]


class Cluster:
    """The Nodes that count, by name, with the capacity they make for every tree."""

    def __init__(self, forest: Forest, flavors: Mapping[str, FlavorConfig]) -> None:
        self._forest = forest
        self._flavors = flavors
        # Node -> (allocatable, labels), for the Nodes that count
        self._nodes: dict[str, tuple[dict[str, int], dict[str, str]]] = {}
        self.capacity: dict[str, int] = {}
        self.unmanaged: dict[str, int] = {}  # requests of bound pods no tree charges

    def set_node(
        self, name: str, allocatable: Mapping[str, int] | None, labels: Mapping[str, str] | None
    ) -> None:
        """A Node's allocatable (None: gone or not counted) and its labels."""
        if allocatable is None:
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = (dict(allocatable), dict(labels or {}))
        self.recompute()

    def recompute(self) -> None:
        """Every tree shares out the whole cluster (flavors' capacities included)."""
        self.capacity = cluster_capacity(self._nodes, self._flavors)
        self._forest.set_capacity(self.capacity)

    def labels(self, node: str | None) -> Mapping[str, str] | None:
        """The labels of Node `node`, None when it does not count (or no Node is named)."""
        found = self._nodes.get(node or "")
        return None if found is None else found[1]

    def unmanaged_charge(self, facts: PodFacts) -> dict[str, int]:
        """What a bound pod outside the trees holds: its request, also on its Node's flavors."""
        labels = self.labels(facts.node_name)
        held = dict(facts.request)
        if labels is not None:
            for flavor in self._flavors.values():
                if flavor_matches(flavor, labels):
                    for resource, amount in facts.request.items():
                        held[flavored(resource, flavor.name)] = amount
        return held

    def add_unmanaged(self, request: Mapping[str, int], sign: int = 1) -> None:
        """A bound pod outside the trees came (sign 1) or went (-1): every tree has less."""
        add_amounts(self.unmanaged, request, sign)
        self._forest.add_unmanaged(request, sign)
