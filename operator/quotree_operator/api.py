"""What the operator's parts need of the Kubernetes API: the `KubeAPI` protocol.

The parts (inputs, actuator, status writer, pod watch, namespace labels) are
written against this protocol, not against `client.Kube`, which is its one real
implementation; the unit tests give them an in-memory fake instead. mypy checks both
sides: the entry point hands a `Kube` to `Controller`, which asks for a `KubeAPI`, and
the tests' fake is annotated as one (tests/unit/operator/fake_kube.py). Calls raise
`kube_errors.KubeError` when the API refuses or does not answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

from quotree_operator.pod_entries import PodEntry

__all__ = ["KubeAPI"]


class KubeAPI(Protocol):
    """The API calls the operator makes (client.Kube documents each one)."""

    # ------------------------------------------------------------ listing and watching

    async def list_all(self, what: str) -> list[dict[str, Any]]: ...

    async def list_with_version(self, what: str) -> tuple[list[dict[str, Any]], str]: ...

    def list_pages(self, what: str) -> AsyncGenerator[tuple[list[dict[str, Any]], str], None]: ...

    def list_pod_entries(self) -> AsyncGenerator[tuple[list[PodEntry], str], None]: ...

    def watch_events(self, what: str, version: str) -> AsyncGenerator[dict[str, Any], None]: ...

    # ------------------------------------------------------------ pods, Jobs and namespaces

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
    ) -> None: ...

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def label_pod(self, namespace: str, name: str, standing: str) -> None: ...

    async def label_namespace(self, name: str, label: str, value: str | None) -> None: ...

    async def evict(self, namespace: str, name: str) -> None: ...

    async def suspend_job(
        self, namespace: str, name: str, suspend: bool, why: str | None = None
    ) -> None: ...

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
    ) -> None: ...

    async def quota_event(
        self, namespace: str, name: str, *, reason: str, message: str
    ) -> None: ...

    # ------------------------------------------------------------ quota objects

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
    ) -> None: ...

    async def patch_quota_object(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any] | None,
        annotations: Mapping[str, str] | None,
    ) -> None: ...

    async def patch_finalizers(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        before: Sequence[str],
        after: Sequence[str],
    ) -> None: ...
