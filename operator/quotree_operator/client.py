"""The calls quotree makes to the Kubernetes API (kubernetes_asyncio), for both shells.

One `Kube` is created at start-up by the entry point (quotree_main) over the connection
connection.py opens, and shared: the operator lists, watches and writes through it, and the
webhooks make theirs through it (webhook_api.py) without importing this package. Every call
converts the client's exceptions into `KubeError` (kube_errors.py: status code + one-line
message), so nothing above imports kubernetes_asyncio (an import-linter contract in
pyproject.toml says so). Responses
that are not read are not deserialized (`_preload_content=False`): at thousands of pods,
building model objects costs more CPU than the request itself. What is sent is built in
bodies.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from quotree.models import GROUP, STANDING_LABEL, VERSION
from quotree_operator import bodies
from quotree_operator.connection import list_request, open_api
from quotree_operator.kube_errors import KubeError, refused
from quotree_operator.listing import LIST_TIMEOUT, Lists
from quotree_operator.pod_reader import ListRequest
from quotree_operator.resources import PLURALS, call_for, events_of

__all__ = ["Kube"]

logger = logging.getLogger(__name__)

_JSON_PATCH = "application/json-patch+json"
_MERGE_PATCH = "application/merge-patch+json"
WATCH_TIMEOUT = 300  # seconds the API server keeps one pod watch open before it ends it


def _convert(exc: BaseException, what: str) -> KubeError:
    if isinstance(exc, ApiException):
        reason = exc.reason or ""
        with contextlib.suppress(TypeError, ValueError):
            reason = json.loads(exc.body or "{}").get("message") or reason
        return KubeError(int(exc.status or 0), f"{what}: {exc.status} {reason}")
    return KubeError(0, f"{what}: {type(exc).__name__}: {exc}")


def _failed_call(exc: Exception) -> bool:
    """An HTTP error or a network failure (aiohttp's own are known by their module)."""
    failed = isinstance(exc, (TimeoutError, ApiException, OSError))
    return failed or type(exc).__module__.startswith("aiohttp")


class Kube(Lists):
    """The API calls quotree makes, and nothing else."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        # Typed as Any: the operator sends plain dicts and raw patches, which the generated
        # signatures (model classes, no `_content_type`) do not describe.
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.coordination: Any = client.CoordinationV1Api(api)
        self.authentication: Any = client.AuthenticationV1Api(api)
        self.admission: Any = client.AdmissionregistrationV1Api(api)
        self.batch: Any = client.BatchV1Api(api)

    @classmethod
    async def connect(cls, pool: int = 64) -> Kube:
        """Load the kubeconfig (or the in-cluster config) and open one connection pool."""
        return cls(await open_api(pool))

    async def close(self) -> None:
        await self.api.close()

    async def _call(self, what: str, coro: Any) -> Any:
        try:
            response = await coro
        except Exception as exc:
            if _failed_call(exc):
                raise _convert(exc, what) from None
            raise
        status = getattr(response, "status", 200)
        if not 200 <= status <= 299:  # _preload_content=False skips the client's own check
            body = await response.read()
            await response.release()
            raise refused(what, status, body)
        return response

    async def call_raw(self, what: str, coro: Any) -> Any:
        return await self._call(what, coro)

    async def list_request(self, target: str) -> ListRequest | None:
        return await list_request(self.api, target, LIST_TIMEOUT)

    async def read(self, what: str, coro: Any, *, missing_ok: bool = False) -> Any:
        """The call's JSON answer; None for a 404 when `missing_ok`."""
        try:
            response = await self._call(what, coro)
        except KubeError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise
        return json.loads(await response.read())

    async def discard(self, what: str, coro: Any) -> None:
        response = await self._call(what, coro)
        release = getattr(response, "release", None)
        if release is not None:
            await release()

    # ------------------------------------------------------------ watching (lists: listing.py)

    async def watch_events(self, what: str, version: str) -> AsyncGenerator[dict[str, Any], None]:
        """One watch of every Pod, Job, Cohort or ElasticQuota (`what` as for
        `listing.Lists.list_pages`) from `version`: each event as the API sends it, parsed.

        Events are `{"type": ..., "object": ...}` with the object as the API's own JSON
        (camelCase), bookmarks and ERROR events included; the caller keeps the position
        (podwatch.py). The iteration ends when the server ends the watch; a failed
        connection raises KubeError. Use it inside `contextlib.aclosing`, so the stream is
        closed (not handed back to the pool: it may be cut mid-way) when the caller stops.
        """
        options: dict[str, Any] = {
            "watch": True,
            "resource_version": version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": WATCH_TIMEOUT,
            "_preload_content": False,
            "_request_timeout": (30, WATCH_TIMEOUT + 60),
        }
        call, _ = call_for(self, what, options)
        response = await self._call(f"watch {what}", call)
        try:
            async for event in events_of(response, what):
                yield event
        except Exception as exc:
            if _failed_call(exc):
                raise _convert(exc, f"watch {what}") from None
            raise
        finally:
            response.close()

    # ------------------------------------------------------------ pods

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
        """Remove our scheduling gate (keeping any others) and set the standing label, at once
        (and the flavor's nodeSelector and label: bodies.admission_patch).

        A 422 means `gates` (the pod's gate names as last seen) changed since: see bodies.py.
        """
        ops = bodies.admission_patch(
            gates, has_labels, standing, flavor, has_node_selector=has_node_selector
        )
        await self.discard(
            f"Pod {namespace}/{name}: remove gate",
            self.core.patch_namespaced_pod(
                name, namespace, ops, _content_type=_JSON_PATCH, _preload_content=False
            ),
        )

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        data: dict[str, Any] = await self.read(
            f"Pod {namespace}/{name}: read",
            self.core.read_namespaced_pod(name, namespace, _preload_content=False),
        )
        return data

    async def label_pod(self, namespace: str, name: str, standing: str) -> None:
        body = {"metadata": {"labels": {STANDING_LABEL: standing}}}
        await self.discard(
            f"Pod {namespace}/{name}: label",
            self.core.patch_namespaced_pod(
                name, namespace, body, _content_type=_MERGE_PATCH, _preload_content=False
            ),
        )

    async def label_namespace(self, name: str, label: str, value: str | None) -> None:
        """Set (or, with None, remove) one label of a namespace."""
        body = {"metadata": {"labels": {label: value}}}
        await self.discard(
            f"Namespace {name}: label {label}",
            self.core.patch_namespace(
                name, body, _content_type=_MERGE_PATCH, _preload_content=False
            ),
        )

    async def evict(self, namespace: str, name: str) -> None:
        """The Eviction API (PodDisruptionBudgets hold); a refusal raises KubeError(429)."""
        body = bodies.eviction(namespace, name)
        await self.discard(
            f"Pod {namespace}/{name}: evict",
            self.core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False),
        )

    async def suspend_job(
        self, namespace: str, name: str, suspend: bool, why: str | None = None
    ) -> None:
        """Suspend a Job (its pods stop and are not counted failed: a pod group evicted as
        a whole) or resume it (bodies.job_suspension)."""
        await self.discard(
            f"Job {namespace}/{name}: {'suspend' if suspend else 'resume'}",
            self.batch.patch_namespaced_job(
                name,
                namespace,
                bodies.job_suspension(suspend, why),
                _content_type=_MERGE_PATCH,
                _preload_content=False,
            ),
        )

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
        """A core/v1 Event on the pod (kubectl describe pod shows it).

        `event_name`: the same name for every try of one Event, so a try whose answer was
        lost and that is made again meets 409 AlreadyExists instead of a second Event.
        """
        body = bodies.pod_event(
            namespace,
            name,
            event_name=event_name or f"{name}.{uuid.uuid4().hex[:16]}",
            uid=uid,
            reason=reason,
            message=message,
            warning=warning,
            now=datetime.now(UTC),
        )
        await self.discard(
            f"Pod {namespace}/{name}: event {reason}",
            self.core.create_namespaced_event(namespace, body, _preload_content=False),
        )

    async def quota_event(self, namespace: str, name: str, *, reason: str, message: str) -> None:
        """A core/v1 Event on an ElasticQuota (event_budget.py's summaries)."""
        body = bodies.quota_event(
            namespace,
            name,
            event_name=f"{name}.{uuid.uuid4().hex[:16]}",
            reason=reason,
            message=message,
            now=datetime.now(UTC),
        )
        await self.discard(
            f"ElasticQuota {namespace}/{name}: event {reason}",
            self.core.create_namespaced_event(namespace, body, _preload_content=False),
        )

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
    ) -> None:
        """A Warning Event on a Cohort or ElasticQuota (a Cohort's go in "default").

        `event_name`: as for `pod_event`, the same for every try of one Event.
        """
        involved = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "name": name}
        if namespace:
            involved["namespace"] = namespace
        where = namespace or "default"
        body = bodies.object_event(
            where,
            involved,
            event_name=event_name or f"{name}.{uuid.uuid4().hex[:16]}",
            uid=uid,
            reason=reason,
            message=message,
            warning=True,
            now=datetime.now(UTC),
        )
        await self.discard(
            f"{kind} {name}: event {reason}",
            self.core.create_namespaced_event(where, body, _preload_content=False),
        )

    async def patch_quota_object(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any] | None,
        annotations: Mapping[str, str] | None,
    ) -> None:
        """One merge PATCH of a Cohort or ElasticQuota carrying its status and/or annotations.

        The CRDs have no status subresource (crds.py), so the object itself takes both
        in one write: a status change costs the API server one write, not two.
        """
        body: dict[str, Any] = {}
        if annotations is not None:
            body["metadata"] = {"annotations": dict(annotations)}
        if status is not None:
            body["status"] = dict(status)
        if not body:
            return
        call = self._patch(namespace, PLURALS[kind], name, body, _MERGE_PATCH)
        await self.discard(f"{kind} {name}: status", call)

    async def patch_finalizers(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        before: Sequence[str],
        after: Sequence[str],
    ) -> None:
        """Set a Cohort's or ElasticQuota's finalizers to `after` if they are still `before`
        (bodies.finalizers_patch; a 422 when they are not)."""
        ops = bodies.finalizers_patch(before, after)
        call = self._patch(namespace, PLURALS[kind], name, ops, _JSON_PATCH)
        await self.discard(f"{kind} {name}: finalizers", call)

    def _patch(
        self, namespace: str | None, plural: str, name: str, body: Any, content_type: str
    ) -> Any:
        """The patch call (merge or JSON patch) for a namespaced or cluster-scoped object."""
        api = self.custom
        options = {"_content_type": content_type, "_preload_content": False}
        if namespace:
            return api.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, body, **options
            )
        return api.patch_cluster_custom_object(GROUP, VERSION, plural, name, body, **options)
