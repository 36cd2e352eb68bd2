"""Leader election with a coordination.k8s.io Lease: only one replica acts.

Kopf's own peering freezes *every* replica when two have the same priority (a Deployment's
replicas do), so quotree runs Kopf standalone and elects a leader with a Lease instead, the
way Kubernetes' own controllers do. Every replica watches and keeps its engine current; only
the holder decides and writes. A holder that cannot renew within the lease duration stops
acting before anyone else may take over (it renews at a third of the duration).

The identity is the pod name in a cluster (POD_NAME) and the host name otherwise, so an
operator restarted in the same pod or on the same machine takes its lease back at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from quotree_operator.client import Kube, KubeError

__all__ = ["LeaderLease"]

logger = logging.getLogger("quotree.operator")

LEASE_NAME = "quotree-operator"


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class LeaderLease:
    """Holds (or waits for) the Lease `quotree-operator` in the operator's namespace."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        identity: str,
        on_change: Callable[[bool], None],
        duration: int = 15,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.identity = identity
        self.on_change = on_change
        self.duration = duration
        self.leading = False
        self._renewed = 0.0

    def _set(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            logger.info(
                "%s the leader lease %s/%s as %s",
                "acquired" if leading else "lost",
                self.namespace,
                LEASE_NAME,
                self.identity,
            )
            self.on_change(leading)

    async def try_acquire(self) -> bool:
        """One round: take or renew the lease if it is free, ours, or expired."""
        now = datetime.now(UTC)
        lease = await self.kube.read_lease(self.namespace, LEASE_NAME)
        spec: dict[str, Any] = (lease or {}).get("spec") or {}
        holder = spec.get("holderIdentity")
        expired = (
            _parse(spec.get("renewTime")) + int(spec.get("leaseDurationSeconds") or self.duration)
            < now.timestamp()
        )
        if lease is not None and holder not in (None, "", self.identity) and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration,
            "acquireTime": spec.get("acquireTime") if holder == self.identity else _micro(now),
            "renewTime": _micro(now),
            "leaseTransitions": transitions if holder == self.identity else transitions + 1,
        }
        metadata: dict[str, Any] = {"name": LEASE_NAME, "namespace": self.namespace}
        if lease is not None:
            metadata["resourceVersion"] = lease["metadata"]["resourceVersion"]
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": new_spec,
        }
        await self.kube.write_lease(self.namespace, body, create=lease is None)
        return True

    async def run(self) -> None:
        """Keep trying (standby) or renewing (leader) until cancelled."""
        try:
            while True:
                started = time.monotonic()
                try:
                    won = await self.try_acquire()
                except KubeError as exc:
                    if exc.status != 409:  # 409: someone else wrote first
                        logger.warning("leader lease: %s", exc)
                    won = False
                if won:
                    self._renewed = started
                    self._set(True)
                elif not self.leading or time.monotonic() - self._renewed > self.duration * 2 / 3:
                    # Stop acting well before the lease could be taken over.
                    self._set(False)
                await asyncio.sleep(self.duration / 3 if self.leading else 2)
        finally:
            self._set(False)
