"""The `quotree.io/in-use` finalizer on Cohorts that have children (docs/webhooks.md, rule 7).

Kubernetes' own in-use protection (`kubernetes.io/pvc-protection` on a claim a pod uses):
the operator keeps the finalizer on every Cohort that has children in the tree, and takes
it off when it has none. A Cohort deleted while it has children (one `kubectl delete -f`
that lists the Cohort before its ElasticQuotas, a GitOps prune) is then accepted by the
webhook (with a warning) instead of refused, and stays, with its deletionTimestamp, a
parent like any other: the engine does not look at the deletionTimestamp, so its children
keep their guarantee and their pods. Once its last child is gone, the finalizer comes off
and the API server deletes it.

`CohortsInUse` keeps what each Cohort's finalizers are and whether it is being deleted
(from the Cohort watch, through `Inputs.observe_quota_object`) and, on the leader, writes
the differences with the wanted state: one JSON patch of `metadata.finalizers` per Cohort
that tests the list as last seen (another controller's finalizer written meanwhile makes
it fail, and the watch's newer view is compared again), one write at a time per Cohort.
A finalizer is never added to a Cohort being deleted (the API server refuses it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quotree.engine import Engine
from quotree.models import IN_USE_FINALIZER
from quotree_operator.api import KubeAPI
from quotree_operator.kube_errors import KubeError

__all__ = ["WRITERS", "CohortsInUse", "parents"]

logger = logging.getLogger("quotree.operator")

#: Finalizer writes in flight at most: after an upgrade every Cohort with children needs
#: one, and the admissions share the connection pool.
WRITERS = 4


@dataclass(frozen=True, slots=True)
class CohortSeen:
    """A Cohort's metadata as the watch last showed it."""

    finalizers: tuple[str, ...]
    deleting: bool

    @property
    def protected(self) -> bool:
        return IN_USE_FINALIZER in self.finalizers


def parents(engine: Engine) -> set[str]:
    """The names that some Cohort or ElasticQuota of the tree names as its parent."""
    return {
        config.parent
        for configs in engine.tree_configs().values()
        for config in configs.values()
        if config.parent is not None
    }


class CohortsInUse:
    """See module docstring."""

    def __init__(self, engine: Engine, kube: KubeAPI) -> None:
        self.engine = engine
        self.kube = kube
        #: Cohort name -> its metadata as last seen.
        self.seen: dict[str, CohortSeen] = {}
        self._writing: dict[str, asyncio.Task[None]] = {}
        self._writers = asyncio.Semaphore(WRITERS)
        # As NamespaceLabels: compare only when a Cohort or the configuration changed
        # since, or a write failed.
        self._stale = True
        self._config_changes = -1

    def observe(self, body: Mapping[str, Any], deleted: bool) -> bool:
        """A Cohort was added, changed or deleted; True when what it carries changed."""
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name") or "")
        if not name:
            return False
        if deleted:
            return self.seen.pop(name, None) is not None
        finalizers = metadata.get("finalizers") or ()
        seen = CohortSeen(
            tuple(str(f) for f in finalizers), bool(metadata.get("deletionTimestamp"))
        )
        if self.seen.get(name) == seen:
            return False
        self.seen[name] = seen
        self._stale = True
        return True

    def reconcile(self, config_changes: int | None = None) -> None:
        """Start a write for every Cohort whose finalizer differs from the wanted state (it
        has children: the finalizer; it has none: no finalizer).

        `config_changes` (`Signals.config_changes`): when neither it nor any Cohort's
        metadata changed since the last call, nothing can differ and nothing is compared.
        """
        if config_changes is not None:
            if not self._stale and config_changes == self._config_changes:
                return
            self._stale = False
            self._config_changes = config_changes
        in_use = parents(self.engine)
        for name, seen in list(self.seen.items()):
            wanted = name in in_use
            if wanted == seen.protected or name in self._writing:
                continue
            if wanted and seen.deleting:
                continue  # no finalizer can be added to an object being deleted
            after = (
                (*seen.finalizers, IN_USE_FINALIZER)
                if wanted
                else tuple(f for f in seen.finalizers if f != IN_USE_FINALIZER)
            )
            self._writing[name] = asyncio.create_task(self._write(name, seen, after))

    async def _write(self, name: str, seen: CohortSeen, after: tuple[str, ...]) -> None:
        added = IN_USE_FINALIZER in after
        try:
            async with self._writers:
                await self.kube.patch_finalizers("Cohort", None, name, seen.finalizers, after)
            if self.seen.get(name) == seen:
                # The watch confirms it soon; until then this is what the Cohort carries.
                self.seen[name] = CohortSeen(after, seen.deleting)
            logger.info(
                "Cohort %s: %s %s (%s)",
                name,
                "added" if added else "removed",
                IN_USE_FINALIZER,
                "it has children" if added else "it has no children",
            )
        except KubeError as exc:
            # 422: the finalizers changed since they were seen; the watch shows the newer
            # ones and the next decision compares again. 404: gone.
            if exc.status not in (404, 422):
                logger.warning("Cohort %s: cannot write %s: %s", name, IN_USE_FINALIZER, exc)
            self._stale = True
        finally:
            self._writing.pop(name, None)
