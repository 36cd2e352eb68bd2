"""The two calls the leader's Lease needs, through the operator's one connection.

The entry point gives a `LeaseCalls` to `leader.LeaderLease` as its `LeaseApi`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotree_operator.client import Kube

__all__ = ["LeaseCalls"]


class LeaseCalls:
    """`leader.LeaseApi` over a `Kube`."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        data: dict[str, Any] | None = await self.kube.read(
            f"Lease {namespace}/{name}: read",
            self.kube.coordination.read_namespaced_lease(name, namespace, _preload_content=False),
            missing_ok=True,
        )
        return data

    async def write_lease(self, namespace: str, lease: Mapping[str, Any], create: bool) -> None:
        """Create or replace (with the resourceVersion in `lease`: a 409 means we lost)."""
        name = lease["metadata"]["name"]
        if create:
            call = self.kube.coordination.create_namespaced_lease(
                namespace, dict(lease), _preload_content=False
            )
        else:
            call = self.kube.coordination.replace_namespaced_lease(
                name, namespace, dict(lease), _preload_content=False
            )
        await self.kube.discard(f"Lease {namespace}/{name}: write", call)
