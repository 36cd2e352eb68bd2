"""The only module that talks to the Kubernetes API (kubernetes_asyncio), for both shells.

One `Kube` is created at start-up by the entry point (quotree_main) and shared: the operator
lists, watches and writes through it, and the webhooks get it as their `WebhookApi`
(quotree_webhooks/settings.py) without importing this package. Every call converts the
client's exceptions into `KubeError` (status code + one-line message), so nothing else
imports kubernetes_asyncio (an import-linter contract in pyproject.toml says so). Responses
that are not read are not deserialized (`_preload_content=False`): at thousands of pods,
building model objects costs more CPU than the request itself. What is sent is built in
bodies.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from quotree.models import CAPACITY_LABEL, GROUP, VERSION
from quotree_operator import bodies

__all__ = ["CredentialsError", "Kube", "KubeError", "unanswered", "write_event_retrying"]

logger = logging.getLogger(__name__)

_JSON_PATCH = "application/json-patch+json"
_MERGE_PATCH = "application/merge-patch+json"
WATCH_TIMEOUT = 300  # seconds the API server keeps one pod watch open before it ends it


class KubeError(Exception):
    """A failed API call: `status` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def unanswered(exc: KubeError) -> bool:
    """No answer, or the API server (or its storage) is unavailable: worth trying later."""
    return exc.status in {0, 429} or exc.status >= 500


async def write_event_retrying(
    write: Callable[[], Awaitable[None]],
    *,
    first: float,
    longest: float,
    give_up_after: float,
    still_wanted: Callable[[], bool] = lambda: True,
) -> KubeError | None:
    """Write one Event, trying again with backoff (`first` doubling to `longest` seconds)
    while the API does not answer, for up to `give_up_after` seconds or until
    `still_wanted()` says no. `write` names the Event the same way on every try, so a try
    whose answer was lost meets 409 instead of writing a second Event. Returns the error
    that ended the tries (None: written, or no longer wanted)."""
    give_up = time.monotonic() + give_up_after
    delay = first
    while True:
        try:
            await write()
            return None
        except KubeError as exc:
            if exc.status == 409:
                return None  # an earlier try was written, its answer lost
            if not unanswered(exc) or time.monotonic() + delay > give_up:
                return exc
            logger.debug("%s; trying again in %.1fs", exc, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, longest)
        if not still_wanted():
            return None


class CredentialsError(KubeError):
    """No usable credentials: no in-cluster ServiceAccount and no usable kubeconfig."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)


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


#: Environment variables aiohttp's trust_env reads on each request (any case).
_ENV_LOOKUPS = ("http_proxy", "https_proxy", "all_proxy", "ws_proxy", "wss_proxy", "netrc")


def env_lookups_matter(environ: Mapping[str, str], home: Path | None = None) -> bool:
    """Would the environment give an API call a proxy or netrc credentials?"""
    if any(name.lower() in _ENV_LOOKUPS and value for name, value in environ.items()):
        return True
    return ((home or Path.home()) / ".netrc").exists()


class Kube:
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

    @classmethod
    async def connect(cls, pool: int = 64) -> Kube:
        """Load the kubeconfig (or the in-cluster config) and open one connection pool."""
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            try:
                await config.load_kube_config(client_configuration=configuration)
            except Exception as exc:  # ConfigException, a missing file, bad YAML, ...
                where = os.environ.get("KUBECONFIG") or "~/.kube/config"
                detail = " ".join(str(exc).split()) or type(exc).__name__
                raise CredentialsError(f"kubeconfig {where}: {detail}") from None
        configuration.connection_pool_maxsize = pool
        api = client.ApiClient(configuration)
        if not env_lookups_matter(os.environ):
            # The client's session looks up proxies and ~/.netrc in the environment on every
            # request, each in a thread (two thread hops per API call, ~10% of the operator's
            # CPU in a burst: bench/RESULTS.md). With nothing there to find, skip them.
            api.rest_client.pool_manager._trust_env = False
        return cls(api)

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
            try:
                message = json.loads(body).get("message") or ""
            except (TypeError, ValueError):
                message = body[:200].decode(errors="replace")
            raise KubeError(status, f"{what}: {status} {message}")
        return response

    async def _read(self, what: str, coro: Any, *, missing_ok: bool = False) -> Any:
        """The call's JSON answer; None for a 404 when `missing_ok`."""
        try:
            response = await self._call(what, coro)
        except KubeError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise
        return json.loads(await response.read())

    async def _discard(self, what: str, coro: Any) -> None:
        response = await self._call(what, coro)
        release = getattr(response, "release", None)
        if release is not None:
            await release()

    # ------------------------------------------------------------ listing

    async def list_all(self, what: str) -> list[dict[str, Any]]:
        """Every Node, Pod, Cohort, ElasticQuota or ResourceFlavor (pages of 500), with `kind`."""
        items, _ = await self.list_with_version(what)
        return items

    async def list_with_version(self, what: str) -> tuple[list[dict[str, Any]], str]:
        """`list_all` and the list's resourceVersion (a watch from it misses nothing)."""
        items: list[dict[str, Any]] = []
        version = ""
        async for page, page_version in self.list_pages(what):
            items.extend(page)
            version = page_version
        return items, version

    async def list_pages(self, what: str) -> AsyncGenerator[tuple[list[dict[str, Any]], str], None]:
        """`list_with_version` a page (500 objects) at a time, each with the list's
        resourceVersion: the caller takes in one page while the next one is on its way,
        and never holds every body at once (the start-up at 30,000 pods; issue 12)."""
        token: str | None = None
        version = ""
        pending = asyncio.ensure_future(self._list_page(what, token))
        try:
            while True:
                data = await pending
                metadata = data.get("metadata") or {}
                # Every page of one list is the same snapshot: the first page's version holds.
                version = version or metadata.get("resourceVersion") or ""
                token = metadata.get("continue")
                if token:
                    pending = asyncio.ensure_future(self._list_page(what, token))
                yield data.get("items") or [], version
                if not token:
                    return
        finally:
            if not pending.done():
                pending.cancel()

    async def _list_page(self, what: str, token: str | None) -> dict[str, Any]:
        """One page of a list, each item with its `kind`."""
        kwargs: dict[str, Any] = {"limit": 500, "_preload_content": False}
        if token:
            kwargs["_continue"] = token
        if what == "nodes":
            call, kind = self.core.list_node(**kwargs), "Node"
        elif what == "pods":
            call, kind = self.core.list_pod_for_all_namespaces(**kwargs), "Pod"
        else:
            plural = {"Cohort": "cohorts", "ResourceFlavor": "resourceflavors"}.get(
                what, "elasticquotas"
            )
            call, kind = (
                self.custom.list_cluster_custom_object(GROUP, VERSION, plural, **kwargs),
                what,
            )
        data: dict[str, Any] = await self._read(f"list {what}", call)
        for item in data.get("items") or ():
            item.setdefault("kind", kind)
        return data

    async def watch_events(self, what: str, version: str) -> AsyncGenerator[dict[str, Any], None]:
        """One watch of every Pod, Cohort or ElasticQuota (`what` as for `list_pages`) from
        `version`: each event as the API sends it, parsed.

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
        if what == "pods":
            call = self.core.list_pod_for_all_namespaces(**options)
        else:
            plural = "cohorts" if what == "Cohort" else "elasticquotas"
            call = self.custom.list_cluster_custom_object(GROUP, VERSION, plural, **options)
        response = await self._call(f"watch {what}", call)
        buffer = b""
        try:
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        logger.warning("%s watch: unreadable event %r", what, line[:200])
                        continue
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
        capacity: str | None,
        *,
        flavor: tuple[str, Mapping[str, str]] | None = None,
        has_node_selector: bool = False,
    ) -> None:
        """Remove our scheduling gate (keeping any others) and set the capacity label, at once
        (and the flavor's nodeSelector and label: bodies.admission_patch).

        A 422 means `gates` (the pod's gate names as last seen) changed since: see bodies.py.
        """
        ops = bodies.admission_patch(
            gates, has_labels, capacity, flavor, has_node_selector=has_node_selector
        )
        await self._discard(
            f"Pod {namespace}/{name}: remove gate",
            self.core.patch_namespaced_pod(
                name, namespace, ops, _content_type=_JSON_PATCH, _preload_content=False
            ),
        )

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._read(
            f"Pod {namespace}/{name}: read",
            self.core.read_namespaced_pod(name, namespace, _preload_content=False),
        )
        return data

    async def label_pod(self, namespace: str, name: str, capacity: str) -> None:
        body = {"metadata": {"labels": {CAPACITY_LABEL: capacity}}}
        await self._discard(
            f"Pod {namespace}/{name}: label",
            self.core.patch_namespaced_pod(
                name, namespace, body, _content_type=_MERGE_PATCH, _preload_content=False
            ),
        )

    async def label_namespace(self, name: str, label: str, value: str | None) -> None:
        """Set (or, with None, remove) one label of a namespace."""
        body = {"metadata": {"labels": {label: value}}}
        await self._discard(
            f"Namespace {name}: label {label}",
            self.core.patch_namespace(
                name, body, _content_type=_MERGE_PATCH, _preload_content=False
            ),
        )

    async def evict(self, namespace: str, name: str) -> None:
        """The Eviction API (PodDisruptionBudgets hold); a refusal raises KubeError(429)."""
        body = bodies.eviction(namespace, name)
        await self._discard(
            f"Pod {namespace}/{name}: evict",
            self.core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False),
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
        await self._discard(
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
        await self._discard(
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
        await self._discard(
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
        """Merge-patch a Cohort's or ElasticQuota's status and/or annotations."""
        plural = "cohorts" if kind == "Cohort" else "elasticquotas"
        what = f"{kind} {name}"
        if annotations is not None:
            body: dict[str, Any] = {"metadata": {"annotations": dict(annotations)}}
            call = self._merge_patch(namespace, plural, name, body, status=False)
            await self._discard(f"{what}: annotations", call)
        if status is not None:
            call = self._merge_patch(namespace, plural, name, {"status": dict(status)}, status=True)
            await self._discard(f"{what}: status", call)

    def _merge_patch(
        self, namespace: str | None, plural: str, name: str, body: Any, *, status: bool
    ) -> Any:
        """The merge-patch call for a namespaced or cluster-scoped object, or its status."""
        api = self.custom
        options = {"_content_type": _MERGE_PATCH, "_preload_content": False}
        if namespace:
            method = (
                api.patch_namespaced_custom_object_status
                if status
                else api.patch_namespaced_custom_object
            )
            return method(GROUP, VERSION, namespace, plural, name, body, **options)
        method = (
            api.patch_cluster_custom_object_status if status else api.patch_cluster_custom_object
        )
        return method(GROUP, VERSION, plural, name, body, **options)

    # ------------------------------------------------------------ leader lease

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        data: dict[str, Any] | None = await self._read(
            f"Lease {namespace}/{name}: read",
            self.coordination.read_namespaced_lease(name, namespace, _preload_content=False),
            missing_ok=True,
        )
        return data

    async def write_lease(self, namespace: str, lease: Mapping[str, Any], create: bool) -> None:
        """Create or replace (with the resourceVersion in `lease`: a 409 means we lost)."""
        name = lease["metadata"]["name"]
        if create:
            call = self.coordination.create_namespaced_lease(
                namespace, dict(lease), _preload_content=False
            )
        else:
            call = self.coordination.replace_namespaced_lease(
                name, namespace, dict(lease), _preload_content=False
            )
        await self._discard(f"Lease {namespace}/{name}: write", call)

    # ------------------------------------------------------------ for the webhooks

    async def whoami(self) -> str:
        """The user name the API server sees for this process's credentials."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        data = await self._read(
            "SelfSubjectReview: create",
            self.authentication.create_self_subject_review(review, _preload_content=False),
        )
        return str(data["status"]["userInfo"]["username"])

    async def namespace_deleting(self, name: str) -> bool:
        """True when namespace `name` has a deletionTimestamp, or is already gone."""
        data = await self._read(
            f"Namespace {name}: read",
            self.core.read_namespace(name, _preload_content=False),
            missing_ok=True,
        )
        return data is None or bool((data.get("metadata") or {}).get("deletionTimestamp"))

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret (the webhooks' shared certificate) as stored, or None if there is none."""
        data: dict[str, Any] | None = await self._read(
            f"Secret {namespace}/{name}: read",
            self.core.read_namespaced_secret(name, namespace, _preload_content=False),
            missing_ok=True,
        )
        return data

    async def write_secret(self, namespace: str, body: Mapping[str, Any], create: bool) -> bool:
        """Create, or replace with the resourceVersion in `body`; False if another wrote first."""
        name = body["metadata"]["name"]
        if create:
            call = self.core.create_namespaced_secret(namespace, dict(body), _preload_content=False)
        else:
            call = self.core.replace_namespaced_secret(
                name, namespace, dict(body), _preload_content=False
            )
        try:
            await self._discard(f"Secret {namespace}/{name}: write", call)
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def apply_webhook_configurations(
        self, mutating: Mapping[str, Any], validating: Mapping[str, Any]
    ) -> None:
        """Create or replace both webhook configurations (the objects named in the bodies)."""
        api = self.admission
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
            current = await self._read(
                f"{what}: read", read(name, _preload_content=False), missing_ok=True
            )
            if current is None:
                await self._discard(f"{what}: create", create(dict(body), _preload_content=False))
                continue
            metadata = {
                **body["metadata"],
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
            updated = {**body, "metadata": metadata}
            await self._discard(f"{what}: replace", replace(name, updated, _preload_content=False))
