"""Kubernetes' own PodGroups in (`scheduling.k8s.io/v1alpha2`): what the engine needs to
group the pods that name them (quotree/native_groups.py).

`PodGroups` keeps the engine current from the operator's PodGroup watch
(podwatch.PodWatch over "podgroups") and the start-up list; it only lists and watches
(RBAC: `podgroups` `list, watch`). The API is alpha, served only where the cluster turns
it on (the `GenericWorkload` feature gate and `--runtime-config`): where it is not, the
list answers 404, the operator says so once in its log and watches nothing; pods then
name no PodGroup (the API server drops the field) and groups are quotree's own, as before.
A cluster that turns the API on later is read at the operator's next start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from quotree.engine import Engine
from quotree.models import ConfigError
from quotree.native_groups import POD_GROUP_API, pod_group_facts
from quotree_operator.api import KubeAPI
from quotree_operator.inputs import Inputs
from quotree_operator.kube_errors import KubeError

__all__ = ["WHAT", "PodGroups"]

logger = logging.getLogger("quotree.operator")

#: The name the operator's list and watch calls know PodGroups by (resources.py).
WHAT = "podgroups"


class PodGroups:
    """See module docstring."""

    def __init__(self, engine: Engine, inputs: Inputs) -> None:
        self.engine = engine
        self.inputs = inputs
        #: The PodGroups the engine was told of, "namespace/name".
        self.known: set[str] = set()
        #: Whether the cluster serves the API (None: not asked yet).
        self.served: bool | None = None

    def observe(self, body: Mapping[str, Any], deleted: bool) -> None:
        """A PodGroup was added, changed or deleted."""
        metadata = body.get("metadata") or {}
        key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
        facts = None
        if not deleted:
            try:
                facts = pod_group_facts(body)
            except ConfigError as exc:
                logger.warning("%s; its pods wait as if it did not exist", exc)
        if facts is None:
            if key not in self.known:
                return
            self.known.discard(key)
        else:
            self.known.add(key)
        self.engine.group_ledger.observe_pod_group(key, facts)
        # Its pods that waited for it may form a group now: the group counts of the
        # quotas of its namespace may change.
        namespace = key.split("/", 1)[0]
        for tree in self.engine.trees:
            for name in self.engine.covering(namespace, tree):
                self.inputs.dirty.add(name)
        self.inputs.signals.changed()

    def relist(self, bodies: list[dict[str, Any]]) -> None:
        """The watch had to list again (410 Gone): forget the PodGroups that went meanwhile."""
        listed = set()
        for body in bodies:
            metadata = body.get("metadata") or {}
            listed.add(f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}")
        for key in sorted(self.known - listed):
            namespace, name = key.split("/", 1)
            self.observe({"metadata": {"namespace": namespace, "name": name}}, deleted=True)
        for body in bodies:
            self.observe(body, deleted=False)
        logger.info("podgroups watch: listed %d PodGroups again", len(bodies))

    async def load(self, kube: KubeAPI) -> str | None:
        """Every PodGroup, before the pods are loaded; the list's resourceVersion, or None
        when the cluster does not serve the API (said once in the log)."""
        try:
            items, version = await kube.list_with_version(WHAT)
        except KubeError as exc:
            if exc.status != 404:
                raise
            if self.served is None:  # once, not at each retry of the start-up
                logger.info(
                    "PodGroups (%s) are not served by this cluster (its GenericWorkload "
                    "feature gate is off): pods are grouped by quotree's label and by their "
                    "Jobs only",
                    POD_GROUP_API,
                )
            self.served = False
            return None
        self.served = True
        for body in items:
            self.observe(body, deleted=False)
        return version
