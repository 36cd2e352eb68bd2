"""The `quotree.io/managed` label on namespaces (docs/reference/pods.md, "System and managed
namespaces").

A namespace is managed when some ElasticQuota covers it (or, with a default quota, when
it is not a system namespace): exactly the namespaces whose pods the engine resolves to
a quota. The pod webhooks select namespaces by this label, so while the operator is down
only managed namespaces wait for it; every other namespace creates pods as usual.

`NamespaceLabels` keeps what each namespace's label says (from the namespace watch) and,
on the leader, writes the differences with the wanted state (a merge patch each, started
without waiting; one at a time per namespace). Only the operator may change the label
(the webhooks refuse anyone else).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from quotree.engine import Engine
from quotree.models import MANAGED_LABEL
from quotree_operator.api import KubeAPI
from quotree_operator.kube_errors import KubeError

__all__ = ["NamespaceLabels", "managed"]

logger = logging.getLogger("quotree.operator")


def managed(engine: Engine, namespace: str) -> bool:
    """Whether the pods of `namespace` are quotree's (some quota covers it)."""
    coverage = engine.coverage
    if namespace in coverage.never_gated:
        return False
    return coverage.covered(namespace) or bool(coverage.default_quota)


class NamespaceLabels:
    """See module docstring."""

    def __init__(self, engine: Engine, kube: KubeAPI) -> None:
        self.engine = engine
        self.kube = kube
        #: namespace -> whether its label says managed (as last seen).
        self.labelled: dict[str, bool] = {}
        self._writing: dict[str, asyncio.Task[None]] = {}
        # `reconcile` compares every namespace: only when a namespace or the quota
        # configuration changed since, or a write failed (it runs once per decision, and
        # under a pod burst that is hundreds of times a second).
        self._stale = True
        self._config_changes = -1

    def observe(self, body: Mapping[str, Any], deleted: bool) -> None:
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name") or "")
        if not name:
            return
        if deleted:
            self.labelled.pop(name, None)
            return
        labels = metadata.get("labels") or {}
        labelled = labels.get(MANAGED_LABEL) == "true"
        if self.labelled.get(name) != labelled:
            self._stale = True
        self.labelled[name] = labelled

    def reconcile(self, config_changes: int | None = None) -> None:
        """Start a write for every namespace whose label differs from the engine's view.

        `config_changes` (`Signals.config_changes`): when neither it nor any namespace
        changed since the last call, nothing can differ and nothing is compared.
        """
        if config_changes is not None:
            if not self._stale and config_changes == self._config_changes:
                return
            self._stale = False
            self._config_changes = config_changes
        for name, labelled in list(self.labelled.items()):
            wanted = managed(self.engine, name)
            if wanted != labelled and name not in self._writing:
                task = asyncio.create_task(self._write(name, wanted))
                self._writing[name] = task

    async def _write(self, name: str, wanted: bool) -> None:
        try:
            await self.kube.label_namespace(name, MANAGED_LABEL, "true" if wanted else None)
            if name in self.labelled:
                self.labelled[name] = wanted  # the watch event confirms it soon
            logger.info("namespace %s: %s %s", name, "set" if wanted else "removed", MANAGED_LABEL)
        except KubeError as exc:
            if exc.status != 404:
                logger.warning("namespace %s: cannot write %s: %s", name, MANAGED_LABEL, exc)
                self._stale = True  # the next decision tries again
        finally:
            self._writing.pop(name, None)
