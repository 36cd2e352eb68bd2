"""The tree's structure: one networkx DiGraph of every Cohort and ElasticQuota.

Why a module of its own: structure (who is whose parent, where the cycles
are, which members are live and in what order) changes only when a Cohort or
ElasticQuota changes, while accounting (demand, runtime, used) changes with
every pod. Keeping the graph here, and nothing but the graph, means every
question about structure has one answer, asked of networkx.

Edges run parent -> child, with the cluster root `ROOT` above the top-level
members. A `parent` that names no object is still a graph node (without a
config), so a child waiting for its parent is wired the moment it appears.
`Structure` is also the read-only mapping of configs by name that the
configuration rules take.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

import networkx as nx

from quotree.models import MemberConfig

__all__ = ["ROOT", "PendingView", "Structure"]

#: Name of the cluster root in the graph; the slash keeps it apart from object names.
ROOT = "quotree.io/cluster"

#: What tells two objects of the same name apart: (kind, namespace).
Identity = tuple[str, str | None]


def identity(config: MemberConfig) -> Identity:
    return (config.kind, config.namespace)


class Structure(Mapping[str, MemberConfig]):
    """Cohorts and ElasticQuotas by name, and the DiGraph of their parent links."""

    def __init__(self, configs: Mapping[str, MemberConfig] | None = None) -> None:
        self.graph: nx.DiGraph = nx.DiGraph()
        self.graph.add_node(ROOT)
        self._configs: dict[str, MemberConfig] = {}  # by name: the one in the graph
        # Every object by name and (kind, namespace): two objects may share a name when they
        # slipped past the webhook (rule 6); the graph holds the first, both stay known.
        self._objects: dict[str, dict[Identity, MemberConfig]] = {}
        #: Changes so far (`set`, `remove`), and a live tree read off the structure ahead of
        #: need with the count it was read at (`live_tree.build_ahead`; None: none).
        self.changes = 0
        self.built_ahead: tuple[int, Any] | None = None
        for config in (configs or {}).values():
            self.set(config)

    # ------------------------------------------------------------ the mapping

    def __getitem__(self, name: str) -> MemberConfig:
        return self._configs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._configs)

    def __len__(self) -> int:
        return len(self._configs)

    def __contains__(self, name: object) -> bool:
        return name in self._configs

    def get(self, name: str, default: MemberConfig | None = None) -> MemberConfig | None:  # type: ignore[override]
        """`Mapping.get` without its exception round trip (the engine asks this per pod)."""
        return self._configs.get(name, default)

    # ------------------------------------------------------------ changes

    def set(self, config: MemberConfig) -> None:
        """Add or replace the object `config` names (by name, kind and namespace)."""
        self.changes += 1
        name = config.name
        objects = self._objects.setdefault(name, {})
        objects[identity(config)] = config
        primary = self._configs.get(name)
        if primary is not None and identity(primary) != identity(config):
            return  # a second object of that name: known, but the graph keeps the first
        self._link(config)

    def _link(self, config: MemberConfig) -> None:
        name = config.name
        if name in self.graph:
            for parent in list(self.graph.predecessors(name)):
                self.graph.remove_edge(parent, name)
                self._drop_if_unused(parent)
        self._configs[name] = config
        self.graph.add_node(name)
        self.graph.add_edge(ROOT if config.parent is None else config.parent, name)

    def remove(self, name: str, kind: str | None = None, namespace: str | None = None) -> None:
        """Forget the object `name` of `kind` in `namespace` (kind None: every object of
        that name). Its children stay, waiting for it; another object of the same name
        takes its place in the graph."""
        self.changes += 1
        objects = self._objects.get(name, {})
        for key in list(objects):
            if kind is None or key == (kind, namespace):
                del objects[key]
        if objects:
            self._link(next(iter(objects.values())))
            return
        self._objects.pop(name, None)
        if self._configs.pop(name, None) is None:
            return
        for parent in list(self.graph.predecessors(name)):
            self.graph.remove_edge(parent, name)
            self._drop_if_unused(parent)
        self._drop_if_unused(name)

    def _drop_if_unused(self, name: str) -> None:
        # A name without an object stays in the graph only while a child points at it.
        if (
            name != ROOT
            and name not in self._configs
            and name in self.graph  # gone already when it was its own parent
            and not self.graph.out_degree(name)
        ):
            self.graph.remove_node(name)

    # ------------------------------------------------------------ questions

    def object(self, name: str, kind: str, namespace: str | None) -> MemberConfig | None:
        """The object `name` of `kind` in `namespace`, if it is known."""
        return self._objects.get(name, {}).get((kind, namespace))

    def objects(self, name: str) -> list[MemberConfig]:
        """Every object called `name` (more than one only when rule 6 was bypassed)."""
        return list(self._objects.get(name, {}).values())

    def parent(self, name: str) -> str | None:
        """The parent `name` points at (ROOT for a top-level member; None when unknown)."""
        for parent in self.graph.pred.get(name, ()):
            return str(parent)
        return None

    def children(self, name: str) -> list[str]:
        """The existing objects whose parent is `name`, sorted."""
        return sorted(c for c in self.graph.succ.get(name, ()) if c in self._configs)

    def chain_up(self, name: str) -> list[str]:
        """`name`'s ancestors, nearest first, up to the root, a missing parent or a repeat."""
        chain: list[str] = []
        seen = {name}
        walk = self.parent(name)
        while walk is not None and walk != ROOT and walk not in seen:
            chain.append(walk)
            seen.add(walk)
            walk = self.parent(walk) if walk in self else None
        return chain

    def cycles(self) -> list[list[str]]:
        """Every cycle in the parent links, each as a chain child -> parent (networkx)."""
        # Each member has one parent, so the cycles are disjoint and networkx's simple
        # cycles (which follow edges parent -> child) are all of them, once each.
        loops = []
        for cycle in nx.simple_cycles(self.graph):
            loops.append(list(reversed([str(n) for n in cycle])))
        return loops

    def loop_if_parent(self, name: str, parent: str) -> list[str] | None:
        """The cycle `name` would close by taking `parent` as its parent, or None."""
        if parent == name:
            return [name]
        if parent not in self:
            return None
        chain = [parent, *self.chain_up(parent)]
        if name not in chain:
            return None
        return [name, *chain[: chain.index(name)]]

    def live_order(self, excluded: Collection[str]) -> list[tuple[str, str, int]]:
        """The live members, parents before children: (name, parent, depth), breadth-first.

        A member is live when it and every ancestor exist and are not `excluded`.
        """

        def usable(name: str) -> bool:
            return name == ROOT or (name in self._configs and name not in excluded)

        view = nx.subgraph_view(self.graph, filter_node=usable)
        depth = {ROOT: 0}
        order = []
        for parent, child in nx.bfs_edges(view, ROOT, sort_neighbors=sorted):
            depth[child] = depth[parent] + 1
            order.append((str(child), str(parent), depth[child]))
        return order


class PendingView(Structure):
    """A `Structure` as it will be once `pending` objects (allowed, not yet seen) land.

    Read-only and cheap: the base graph is not copied; parents and children are
    answered from `pending` first. The webhook's rules see recent approvals this way.
    """

    def __init__(self, base: Structure, pending: Mapping[str, MemberConfig]) -> None:
        self._base = base
        self._pending = dict(pending)
        self.graph = base.graph
        self._configs = {**base._configs, **self._pending}
        self._objects = base._objects
        self.changes, self.built_ahead = -1, None  # never built ahead

    def set(self, config: MemberConfig) -> None:
        raise TypeError("a PendingView is read-only")

    def remove(self, name: str, kind: str | None = None, namespace: str | None = None) -> None:
        raise TypeError("a PendingView is read-only")

    def parent(self, name: str) -> str | None:
        config = self._pending.get(name)
        if config is not None:
            return ROOT if config.parent is None else config.parent
        return self._base.parent(name)

    def children(self, name: str) -> list[str]:
        moved = [c for c in self._base.children(name) if c not in self._pending]
        joined = [c.name for c in self._pending.values() if c.parent == name]
        return sorted({*moved, *joined})

    def cycles(self) -> list[list[str]]:
        raise TypeError("ask the base Structure: a PendingView answers only local questions")

    def live_order(self, excluded: Collection[str]) -> list[tuple[str, str, int]]:
        raise TypeError("ask the base Structure: a PendingView answers only local questions")
