"""Only the leader writes: every API write of the operator goes through `LeaderWrites`.

Why a module of its own: a standby replica lists and watches like the leader and keeps
its engine current (so a failover does not pay the start-up), but it must never act on
the cluster. The decision loop and the status writer already do nothing while standby;
this is the one place that makes sure of it for every write, also for the ones a former
leader still had under way when it lost the Lease (an admission's retries, an Event
tried again, a status round half written). A write while standby raises
`KubeError(0, ...)`, as an API server that does not answer would: the callers already
keep such work and try it again later, which only a leader will do. Reads and watches
pass through.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from quotree_operator.api import KubeAPI
from quotree_operator.inputs import Signals
from quotree_operator.kube_errors import KubeError
from quotree_operator.pod_entries import PodEntry

__all__ = ["LeaderWrites"]


class LeaderWrites:
    """`KubeAPI` over `kube` that refuses writes while `signals.leading` is False."""

    def __init__(self, kube: KubeAPI, signals: Signals) -> None:
        self.kube = kube
        self.signals = signals
        #: Writes refused so far (a standby asked to write: the unit tests count them).
        self.refused = 0

    def _check(self, what: str) -> None:
        if not self.signals.leading:
            self.refused += 1
            raise KubeError(0, f"{what}: not written, this replica is not the leader")

    # ------------------------------------------------------------ reads: passed through

    async def list_all(self, what: str) -> list[dict[str, Any]]:
        return await self.kube.list_all(what)

    async def list_with_version(self, what: str) -> tuple[list[dict[str, Any]], str]:
        return await self.kube.list_with_version(what)

    def list_pages(self, what: str) -> AsyncGenerator[tuple[list[dict[str, Any]], str], None]:
        return self.kube.list_pages(what)

    def list_pod_entries(self) -> AsyncGenerator[tuple[list[PodEntry], str], None]:
        return self.kube.list_pod_entries()

    def watch_events(self, what: str, version: str) -> AsyncGenerator[dict[str, Any], None]:
        return self.kube.watch_events(what, version)

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.kube.read_pod(namespace, name)

    # ------------------------------------------------------------ writes: the leader's only

    async def admit(
        self,
        namespace: str,
        name: str,
        gates: Sequence[str],
        has_labels: bool,
        standing: str | None,
        *,
        flavor: tuple[str, Mapping[str, str]] | None = None,
        has_node_selector: bool = False,
    ) -> None:
        self._check(f"Pod {namespace}/{name}: remove gate")
        await self.kube.admit(
            namespace,
            name,
            gates,
            has_labels,
            standing,
            flavor=flavor,
            has_node_selector=has_node_selector,
        )

    async def label_pod(self, namespace: str, name: str, standing: str) -> None:
        self._check(f"Pod {namespace}/{name}: label")
        await self.kube.label_pod(namespace, name, standing)

    async def label_namespace(self, name: str, label: str, value: str | None) -> None:
        self._check(f"Namespace {name}: label {label}")
        await self.kube.label_namespace(name, label, value)

    async def evict(self, namespace: str, name: str) -> None:
        self._check(f"Pod {namespace}/{name}: evict")
        await self.kube.evict(namespace, name)

    async def suspend_job(
        self, namespace: str, name: str, suspend: bool, why: str | None = None
    ) -> None:
        self._check(f"Job {namespace}/{name}: {'suspend' if suspend else 'resume'}")
        await self.kube.suspend_job(namespace, name, suspend, why)

    async def pod_event(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None,
        reason: str,
        message: str,
        warning: bool = False,
        event_name: str | None = None,
    ) -> None:
        self._check(f"Pod {namespace}/{name}: event {reason}")
        await self.kube.pod_event(
            namespace,
            name,
            uid=uid,
            reason=reason,
            message=message,
            warning=warning,
            event_name=event_name,
        )

    async def quota_event(self, namespace: str, name: str, *, reason: str, message: str) -> None:
        self._check(f"ElasticQuota {namespace}/{name}: event {reason}")
        await self.kube.quota_event(namespace, name, reason=reason, message=message)

    async def quota_object_event(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None,
        reason: str,
        message: str,
        event_name: str | None = None,
    ) -> None:
        self._check(f"{kind} {name}: event {reason}")
        await self.kube.quota_object_event(
            kind,
            namespace,
            name,
            uid=uid,
            reason=reason,
            message=message,
            event_name=event_name,
        )

    async def patch_quota_object(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any] | None,
        annotations: Mapping[str, str] | None,
    ) -> None:
        self._check(f"{kind} {name}: status")
        await self.kube.patch_quota_object(kind, namespace, name, status, annotations)

    async def patch_finalizers(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        before: Sequence[str],
        after: Sequence[str],
    ) -> None:
        self._check(f"{kind} {name}: finalizers")
        await self.kube.patch_finalizers(kind, namespace, name, before, after)


def _typed(writes: LeaderWrites) -> KubeAPI:
    return writes  # mypy: LeaderWrites is a KubeAPI
