"""The webhooks' only Kubernetes API calls (kubernetes_asyncio), with errors turned into answers.

Three needs: write the webhook configurations, learn the operator's own
user name (so the pod-update webhook can tell the operator from users), and
ask whether a namespace is being deleted (rule 7).
"""

from __future__ import annotations

import os
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = ["KubeApi"]


class KubeApi:
    """One API client, created at start-up and shared by the server and the handlers."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    @classmethod
    async def connect(cls) -> KubeApi:
        """In a pod: the service account; else KUBECONFIG (or ~/.kube/config)."""
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return cls(client.ApiClient(configuration=configuration))
        return cls(await config.new_client_from_config(config_file=os.environ.get("KUBECONFIG")))

    async def close(self) -> None:
        await self.api.close()

    async def whoami(self) -> str:
        """The user name the API server sees for this process's credentials."""
        review = await client.AuthenticationV1Api(self.api).create_self_subject_review(
            client.V1SelfSubjectReview(
                api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"
            )
        )
        return str(review.status.user_info.username)

    async def namespace_deleting(self, name: str) -> bool:
        """True when namespace `name` has a deletionTimestamp, or is already gone."""
        try:
            namespace = await client.CoreV1Api(self.api).read_namespace(name)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return namespace.metadata.deletion_timestamp is not None

    async def apply_webhook_configurations(
        self, mutating: dict[str, Any], validating: dict[str, Any]
    ) -> None:
        """Create or replace both configurations (the objects named in the bodies)."""
        api = client.AdmissionregistrationV1Api(self.api)
        pairs: list[tuple[dict[str, Any], Any, Any, Any]] = [
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
            try:
                current = await read(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                await create(body)
                continue
            updated = {**body, "metadata": {**body["metadata"]}}
            updated["metadata"]["resourceVersion"] = current.metadata.resource_version
            await replace(name, updated)

    async def delete_webhook_configurations(self, name: str) -> None:
        """Remove both configurations named `name` (uninstall); missing ones are fine."""
        api = client.AdmissionregistrationV1Api(self.api)
        for delete in (
            api.delete_mutating_webhook_configuration,
            api.delete_validating_webhook_configuration,
        ):
            try:
                await delete(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
