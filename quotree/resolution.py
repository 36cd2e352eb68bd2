"""Which quota a pod is charged to, and which namespaces quotree never gates.

Why a module of its own: the mutating webhook (labels and gates a new pod),
the operator's engine (charges the pod) and `quotree simulate` must give the
same answer for the same pod, and the set of namespaces left alone must be
the same in the webhook configurations, the webhook handlers and the engine.
The API's "Pods" rules are the contract; `resolve` and `never_gated` are their only
implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from quotree.models import DEFAULT_TREE, MemberConfig, quota_label

__all__ = ["DEFAULT_SYSTEM_NAMESPACES", "Coverage", "Resolution", "never_gated"]

#: Kubernetes' own namespaces: never gated, whatever the configuration says.
DEFAULT_SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})


def never_gated(
    operator_namespace: str | None = None, system_namespaces: Iterable[str] = ()
) -> frozenset[str]:
    """The namespaces whose pods quotree never touches: Kubernetes' own, the operator's
    own namespace and the configured system namespaces (QUOTREE_SYSTEM_NAMESPACES)."""
    extra = {operator_namespace} if operator_namespace else set()
    return DEFAULT_SYSTEM_NAMESPACES | extra | frozenset(system_namespaces)


@dataclass(frozen=True, slots=True)
class Resolution:
    """Which quota a pod is charged to: a quota name, none (unmanaged), or an error.

    With several trees (docs/reference/objects.md, "Several trees") a pod is charged to one quota in
    every tree that covers its namespace: `charges` lists them as (tree, quota), the default
    tree first, then by tree name; `quota` is the first of them.
    """

    quota: str | None
    error: str | None = None
    charges: tuple[tuple[str, str], ...] = ()

    @property
    def others(self) -> tuple[str, ...]:
        """The quotas the pod is charged to besides `quota` (in the other trees)."""
        return tuple(name for _, name in self.charges[1:])

    def labels(self) -> dict[str, str]:
        """The pod labels that name its quota in each tree (what the mutating webhook sets)."""
        return {quota_label(tree): name for tree, name in self.charges}


def namespaces_of(config: MemberConfig | None) -> set[str]:
    """The namespaces whose pods `config` may take (none for a Cohort)."""
    if config is None or not config.is_leaf:
        return set()
    return {ns for ns in (config.namespace, *config.namespaces) if ns}


class Coverage:
    """Namespace -> the ElasticQuotas covering it, per tree, kept as quotas come and go."""

    def __init__(self, never: frozenset[str], default_quota: str | None) -> None:
        self.never_gated = never
        self.default_quota = default_quota
        # tree -> namespace -> quota names; the default tree always, others once they hold a quota
        self._trees: dict[str, dict[str, set[str]]] = {DEFAULT_TREE: {}}
        self._home: dict[str, str | None] = {}  # quota -> its own namespace
        self._tree_of: dict[str, str] = {}  # quota -> its tree
        #: Counts changes: the webhook process's copy is resent when it moves (docs/webhooks.md).
        self.version = 0

    def add(self, config: MemberConfig) -> None:
        self.version += 1
        covering = self._trees.setdefault(config.tree, {})
        for namespace in namespaces_of(config):
            covering.setdefault(namespace, set()).add(config.name)
        self._home[config.name] = config.namespace
        self._tree_of[config.name] = config.tree

    def remove(self, config: MemberConfig) -> None:
        self.version += 1
        covering = self._trees.get(config.tree, {})
        for namespace in namespaces_of(config):
            names = covering.get(namespace)
            if names is not None:
                names.discard(config.name)
                if not names:
                    del covering[namespace]
        if not covering and config.tree != DEFAULT_TREE:
            self._trees.pop(config.tree, None)
        self._home.pop(config.name, None)
        self._tree_of.pop(config.name, None)

    def trees(self) -> list[str]:
        """The trees that hold an ElasticQuota (and the default tree), default first."""
        return [DEFAULT_TREE, *sorted(t for t in self._trees if t != DEFAULT_TREE)]

    def covering(self, namespace: str, tree: str = DEFAULT_TREE) -> list[str]:
        """The ElasticQuotas of `tree` whose namespaces include `namespace`, by name."""
        return sorted(self._trees.get(tree, {}).get(namespace, ()))

    def covered(self, namespace: str) -> bool:
        """True when some ElasticQuota, in any tree, covers `namespace`."""
        return any(namespace in covering for covering in self._trees.values())

    def resolve(self, namespace: str, labels: Mapping[str, str]) -> Resolution:
        """Which quota a pod of `namespace` with `labels` is charged to (the API's "Pods"
        rules), in every tree that covers the namespace."""
        if namespace in self.never_gated:
            return Resolution(None)
        if len(self._trees) == 1:
            quota, error = self._resolve_in(DEFAULT_TREE, namespace, labels)
            if quota is None:
                return Resolution(None, error)
            return Resolution(quota, None, ((DEFAULT_TREE, quota),))
        charges = []
        for tree in self.trees():
            quota, error = self._resolve_in(tree, namespace, labels)
            if error is not None:
                return Resolution(None, error)
            if quota is not None:
                charges.append((tree, quota))
        if not charges:
            return Resolution(None)
        return Resolution(charges[0][1], None, tuple(charges))

    def _resolve_in(
        self, tree: str, namespace: str, labels: Mapping[str, str]
    ) -> tuple[str | None, str | None]:
        """The quota of `tree` a pod is charged to, or the error (both None: not charged)."""
        key = quota_label(tree)
        wanted = labels.get(key)
        # The common cases without sorting the quotas that cover the namespace (a hundred
        # in a namespace shared by many teams; every pod of the start-up is resolved).
        names = self._trees.get(tree, {}).get(namespace)
        if names:
            if wanted in names:
                return wanted, None
            if not wanted and len(names) == 1:
                return next(iter(names)), None
        default = self.default_quota
        candidates = self.covering(namespace, tree)
        # The default quota is the candidate of every namespace no ElasticQuota of its tree
        # covers (of the default tree while it is not defined).
        if not candidates and default and self._tree_of.get(default, DEFAULT_TREE) == tree:
            candidates = [default]
        where = "" if tree == DEFAULT_TREE else f" in tree {tree}"
        if wanted:
            if wanted in candidates:
                return wanted, None
            covered = ", ".join(candidates) if candidates else "none"
            return None, (
                f"ElasticQuota {wanted} does not cover namespace {namespace}{where} "
                f"(quotas covering it: {covered})"
            )
        if len(candidates) == 1:
            return candidates[0], None
        if candidates:
            own = [name for name in candidates if self._home.get(name) == namespace]
            if len(own) == 1:
                return own[0], None
            return None, (
                f"namespace {namespace} is covered by several ElasticQuotas{where} "
                f"({', '.join(candidates)}); label the pod {key}=<one of them>"
            )
        return None, None
