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

from quotree.models import QUOTA_LABEL, NodeConfig

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
    """Which quota a pod is charged to: a quota name, none (unmanaged), or an error."""

    quota: str | None
    error: str | None = None


def namespaces_of(config: NodeConfig | None) -> set[str]:
    """The namespaces whose pods `config` may take (none for a Cohort)."""
    if config is None or not config.is_leaf:
        return set()
    return {ns for ns in (config.namespace, *config.namespaces) if ns}


class Coverage:
    """Namespace -> the ElasticQuotas covering it, kept as quotas come and go."""

    def __init__(self, never: frozenset[str], default_quota: str | None) -> None:
        self.never_gated = never
        self.default_quota = default_quota
        self._covering: dict[str, set[str]] = {}
        self._home: dict[str, str | None] = {}  # quota -> its own namespace

    def add(self, config: NodeConfig) -> None:
        for namespace in namespaces_of(config):
            self._covering.setdefault(namespace, set()).add(config.name)
        self._home[config.name] = config.namespace

    def remove(self, config: NodeConfig) -> None:
        for namespace in namespaces_of(config):
            names = self._covering.get(namespace)
            if names is not None:
                names.discard(config.name)
                if not names:
                    del self._covering[namespace]
        self._home.pop(config.name, None)

    def covering(self, namespace: str) -> list[str]:
        """The ElasticQuotas whose namespaces include `namespace`, by name."""
        return sorted(self._covering.get(namespace, ()))

    def resolve(self, namespace: str, labels: Mapping[str, str]) -> Resolution:
        """Which quota a pod of `namespace` with `labels` is charged to (the API's "Pods" rules)."""
        if namespace in self.never_gated:
            return Resolution(None)
        candidates = self.covering(namespace)
        wanted = labels.get(QUOTA_LABEL)
        if wanted:
            if wanted in candidates:
                return Resolution(wanted)
            covered = ", ".join(candidates) if candidates else "none"
            return Resolution(
                None,
                f"ElasticQuota {wanted} does not cover namespace {namespace} "
                f"(quotas covering it: {covered})",
            )
        if len(candidates) == 1:
            return Resolution(candidates[0])
        if candidates:
            own = [name for name in candidates if self._home.get(name) == namespace]
            if len(own) == 1:
                return Resolution(own[0])
            return Resolution(
                None,
                f"namespace {namespace} is covered by several ElasticQuotas "
                f"({', '.join(candidates)}); label the pod {QUOTA_LABEL}=<one of them>",
            )
        if self.default_quota:
            return Resolution(self.default_quota)
        return Resolution(None)
