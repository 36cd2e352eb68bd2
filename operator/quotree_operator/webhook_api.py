"""The calls the webhooks make, through the operator's one connection (`client.Kube`).

The entry point gives a `WebhookCalls` to the webhooks as their `WebhookApi`
(quotree_webhooks/settings.py), which does not import this package: who this process is,
whether a namespace is going away, a Job the operator has not seen yet, the shared
serving certificate's Secret and the webhook configurations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotree.models import GROUP, VERSION
from quotree_operator.client import Kube
from quotree_operator.kube_errors import KubeError
from quotree_operator.resources import PLURALS

__all__ = ["WebhookCalls"]


class WebhookCalls:
    """`WebhookApi` over a `Kube`."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def whoami(self) -> str:
        """The user name the API server sees for this process's credentials."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        data = await self.kube.read(
            "SelfSubjectReview: create",
            self.kube.authentication.create_self_subject_review(review, _preload_content=False),
        )
        return str(data["status"]["userInfo"]["username"])

    async def namespace_deleting(self, name: str) -> bool:
        """True when namespace `name` has a deletionTimestamp, or is already gone."""
        data = await self.kube.read(
            f"Namespace {name}: read",
            self.kube.core.read_namespace(name, _preload_content=False),
            missing_ok=True,
        )
        return data is None or bool((data.get("metadata") or {}).get("deletionTimestamp"))

    async def member_leaving(self, kind: str, namespace: str | None, name: str) -> bool:
        """True when the Cohort or ElasticQuota has a deletionTimestamp, or is already gone.
        Asked as a list by name: the operator may list these kinds (it has no `get`)."""
        api = self.kube.custom
        plural = PLURALS[kind]
        options = {"field_selector": f"metadata.name={name}", "_preload_content": False}
        if namespace:
            call = api.list_namespaced_custom_object(GROUP, VERSION, namespace, plural, **options)
        else:
            call = api.list_cluster_custom_object(GROUP, VERSION, plural, **options)
        data = await self.kube.read(f"{kind} {name}: read", call)
        items = data.get("items") or []
        return not items or bool((items[0].get("metadata") or {}).get("deletionTimestamp"))

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Job as stored, or None if there is none (a Job's pod whose Job the operator's
        watch has not shown yet: the pod's group is the Job's)."""
        data: dict[str, Any] | None = await self.kube.read(
            f"Job {namespace}/{name}: read",
            self.kube.batch.read_namespaced_job(name, namespace, _preload_content=False),
            missing_ok=True,
        )
        return data

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret (the webhooks' shared certificate) as stored, or None if there is none."""
        data: dict[str, Any] | None = await self.kube.read(
            f"Secret {namespace}/{name}: read",
            self.kube.core.read_namespaced_secret(name, namespace, _preload_content=False),
            missing_ok=True,
        )
        return data

    async def write_secret(self, namespace: str, body: Mapping[str, Any], create: bool) -> bool:
        """Create, or replace with the resourceVersion in `body`; False if another wrote first."""
        name = body["metadata"]["name"]
        if create:
            call = self.kube.core.create_namespaced_secret(
                namespace, dict(body), _preload_content=False
            )
        else:
            call = self.kube.core.replace_namespaced_secret(
                name, namespace, dict(body), _preload_content=False
            )
        try:
            await self.kube.discard(f"Secret {namespace}/{name}: write", call)
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def apply_webhook_configurations(
        self, mutating: Mapping[str, Any], validating: Mapping[str, Any]
    ) -> None:
        """Create or replace both webhook configurations (the objects named in the bodies)."""
        api = self.kube.admission
        pairs: list[tuple[Mapping[str, Any], Any, Any, Any]] = [
            (
                mutating,
                api.read_mutating_webhook_configuration,
                api.create_mutating_webhook_configuration,
                api.replace_mutating_webhook_configuration,
            ),
            (
                validating,
                api.read_validating_webhook_configuration,
                api.create_validating_webhook_configuration,
                api.replace_validating_webhook_configuration,
            ),
        ]
        for body, read, create, replace in pairs:
            name = body["metadata"]["name"]
            what = f"{body['kind']} {name}"
            current = await self.kube.read(
                f"{what}: read", read(name, _preload_content=False), missing_ok=True
            )
            if current is None:
                await self.kube.discard(
                    f"{what}: create", create(dict(body), _preload_content=False)
                )
                continue
            metadata = {
                **body["metadata"],
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
            updated = {**body, "metadata": metadata}
            await self.kube.discard(
                f"{what}: replace", replace(name, updated, _preload_content=False)
            )
