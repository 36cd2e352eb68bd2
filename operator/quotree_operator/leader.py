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
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from quotree_operator.kube_errors import KubeError

__all__ = ["ADDRESS_ANNOTATION", "LEASE_NAME", "LeaderLease", "LeaseApi", "next_lease"]

logger = logging.getLogger("quotree.operator")

LEASE_NAME = "quotree-operator"
#: Where the holder's webhooks answer ("host:port"), written on the Lease by the holder:
#: the other replicas pass it the pod CREATE reviews, which only it may admit at creation
#: (quotree_operator/create_admitter.py).
ADDRESS_ANNOTATION = "quotree.io/webhook-address"


class LeaseApi(Protocol):
    """The two calls the lease needs (lease_api.LeaseCalls makes them; tests use a fake)."""

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def write_lease(self, namespace: str, lease: Mapping[str, Any], create: bool) -> None: ...


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def next_lease(
    lease: Mapping[str, Any] | None,
    *,
    namespace: str,
    identity: str,
    duration: int,
    now: datetime,
    address: str | None = None,
) -> dict[str, Any] | None:
    """The Lease to write to take or renew it, or None while another holder's is valid.

    A lease that is missing, free, ours, or not renewed within its duration is ours to
    write. Taking it from someone else counts one more transition and restarts
    acquireTime; renewing our own keeps both. The resourceVersion read is sent back, so a
    concurrent writer makes the write fail (409) instead of both winning.
    """
    spec: Mapping[str, Any] = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity")
    expired = (
        _parse(spec.get("renewTime")) + int(spec.get("leaseDurationSeconds") or duration)
        < now.timestamp()
    )
    if lease is not None and holder not in (None, "", identity) and not expired:
        return None
    ours = holder == identity
    transitions = int(spec.get("leaseTransitions") or 0)
    metadata: dict[str, Any] = {"name": LEASE_NAME, "namespace": namespace}
    if lease is not None:
        metadata["resourceVersion"] = lease["metadata"]["resourceVersion"]
    if address is not None:
        metadata["annotations"] = {ADDRESS_ANNOTATION: address}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration,
            "acquireTime": spec.get("acquireTime") if ours else _micro(now),
            "renewTime": _micro(now),
            "leaseTransitions": transitions if ours else transitions + 1,
        },
    }


class LeaderLease:
    """Holds (or waits for) the Lease `quotree-operator` in the operator's namespace.

    `clock` (seconds, monotonic) and `wall` (the time written into the Lease) are
    parameters so that tests drive the state machine with a fake clock.
    """

    def __init__(
        self,
        kube: LeaseApi,
        namespace: str,
        identity: str,
        on_change: Callable[[bool], None],
        duration: int = 15,
        *,
        address: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.identity = identity
        self.on_change = on_change
        self.duration = duration
        self.clock = clock
        self.wall = wall
        self.leading = False
        self._renewed = 0.0
        #: When this replica last took the Lease: its former holder's last renewal (wall
        #: seconds) and duration; None when nobody held it (create_admitter.py reads it).
        self.previous: tuple[float, float] | None = None
        #: This replica's webhook address, written on the Lease while it holds it.
        self.address = address
        #: The holder's webhook address as its Lease said when last read (None: this
        #: replica holds it, or nobody does, or the holder did not say).
        self.leader_address: str | None = None

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
        """One attempt: take or renew the lease if it is free, ours, or expired."""
        lease = await self.kube.read_lease(self.namespace, LEASE_NAME)
        body = next_lease(
            lease,
            namespace=self.namespace,
            identity=self.identity,
            duration=self.duration,
            now=self.wall(),
            address=self.address,
        )
        if body is None:
            notes = ((lease or {}).get("metadata") or {}).get("annotations") or {}
            self.leader_address = notes.get(ADDRESS_ANNOTATION)
            return False
        self.leader_address = None
        await self.kube.write_lease(self.namespace, body, create=lease is None)
        if not self.leading:
            spec: Mapping[str, Any] = (lease or {}).get("spec") or {}
            renewed = spec.get("renewTime") if spec.get("holderIdentity") else None
            duration = float(spec.get("leaseDurationSeconds") or self.duration)
            self.previous = (_parse(renewed), duration) if renewed else None
        return True

    async def step(self) -> float:
        """One round of the state machine; returns how long to wait before the next one.

        A leader renews every third of the duration; one that could not renew for two
        thirds of it stops acting, well before anyone else may take the lease over.
        """
        started = self.clock()
        try:
            won = await self.try_acquire()
        except KubeError as exc:
            if exc.status != 409:  # 409: someone else wrote first
                logger.warning("leader lease: %s", exc)
            won = False
        if won:
            self._renewed = started
            self._set(True)
        elif not self.leading or self.clock() - self._renewed > self.duration * 2 / 3:
            self._set(False)
        return self.duration / 3 if self.leading else 2

    async def run(self) -> None:
        """Keep trying (standby) or renewing (leader) until cancelled."""
        try:
            while True:
                await asyncio.sleep(await self.step())
        finally:
            self._set(False)
