"""The `quotree.io/managed` label on namespaces (api.md, "Managed namespaces").

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
from quotree_operator.client import Kube, KubeError

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

    def __init__(self, engine: Engine, kube: Kube) -> None:
        self.engine = engine
        self.kube = kube
        #: namespace -> whether its label says managed (as last seen).
        self.labelled: dict[str, bool] = {}
        self._writing: dict[str, asyncio.Task[None]] = {}

    def observe(self, body: Mapping[str, Any], deleted: bool) -> None:
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name") or "")
        if not name:
            return
        if deleted:
            self.labelled.pop(name, None)
            return
        labels = metadata.get("labels") or {}
        self.labelled[name] = labels.get(MANAGED_LABEL) == "true"

    def reconcile(self) -> None:
        """Start a write for every namespace whose label differs from the engine's view."""
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
        finally:
            self._writing.pop(name, None)
