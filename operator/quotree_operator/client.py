"""The only module that talks to the Kubernetes API (kubernetes_asyncio).

Created once at start-up and kept in Kopf's `memo.kube`. Every call converts the client's
exceptions into `KubeError` (status code + one-line message), so the rest of the operator
never imports kubernetes_asyncio. Responses the operator does not read are not deserialized
(`_preload_content=False`): at thousands of pods, building model objects costs more CPU
than the request itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from quotree.models import ADMISSION_GATE, CAPACITY_LABEL, GROUP, VERSION

__all__ = ["Kube", "KubeError"]

logger = logging.getLogger(__name__)

COMPONENT = "quotree-operator"
_JSON_PATCH = "application/json-patch+json"
_MERGE_PATCH = "application/merge-patch+json"
WATCH_TIMEOUT = 300  # seconds the API server keeps one pod watch open before it ends it
WATCH_BACKOFF = (0.5, 30.0)  # first and longest wait before reconnecting a failed watch


class KubeError(Exception):
    """A failed API call: `status` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _convert(exc: BaseException, what: str) -> KubeError:
    if isinstance(exc, ApiException):
        reason = exc.reason or ""
        with contextlib.suppress(TypeError, ValueError):
            reason = json.loads(exc.body or "{}").get("message") or reason
        return KubeError(int(exc.status or 0), f"{what}: {exc.status} {reason}")
    return KubeError(0, f"{what}: {type(exc).__name__}: {exc}")


def _escape(key: str) -> str:
    """A map key as a JSON-pointer segment."""
    return key.replace("~", "~0").replace("/", "~1")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Kube:
    """The API calls the operator makes, and nothing else."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        # Typed as Any: the operator sends plain dicts and raw patches, which the generated
        # signatures (model classes, no `_content_type`) do not describe.
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.coordination: Any = client.CoordinationV1Api(api)
        self._pod_version = ""  # the pod watch's last resourceVersion seen

    @classmethod
    async def connect(cls, pool: int = 64) -> Kube:
        """Load the kubeconfig (or the in-cluster config) and open one connection pool."""
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            await config.load_kube_config(client_configuration=configuration)
        configuration.connection_pool_maxsize = pool
        return cls(client.ApiClient(configuration))

    async def close(self) -> None:
        await self.api.close()

    async def _call(self, what: str, coro: Any) -> Any:
        try:
            response = await coro
        except (TimeoutError, ApiException, OSError) as exc:
            raise _convert(exc, what) from None
        except Exception as exc:  # aiohttp's client errors, without importing aiohttp here
            if type(exc).__module__.startswith("aiohttp"):
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

    async def _discard(self, what: str, coro: Any) -> None:
        response = await self._call(what, coro)
        release = getattr(response, "release", None)
        if release is not None:
            await release()

    # ------------------------------------------------------------ listing

    async def list_all(self, what: str) -> list[dict[str, Any]]:
        """Every Node, Pod, Cohort or ElasticQuota (pages of 500), each with its `kind` set."""
        items, _ = await self.list_with_version(what)
        return items

    async def list_with_version(self, what: str) -> tuple[list[dict[str, Any]], str]:
        """`list_all` and the list's resourceVersion (a watch from it misses nothing)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        version = ""
        while True:
            kwargs: dict[str, Any] = {"limit": 500, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            if what == "nodes":
                call, kind = self.core.list_node(**kwargs), "Node"
            elif what == "pods":
                call, kind = self.core.list_pod_for_all_namespaces(**kwargs), "Pod"
            else:
                plural = "cohorts" if what == "Cohort" else "elasticquotas"
                call, kind = (
                    self.custom.list_cluster_custom_object(GROUP, VERSION, plural, **kwargs),
                    what,
                )
            response = await self._call(f"list {what}", call)
            data = json.loads(await response.read())
            for item in data.get("items") or ():
                item.setdefault("kind", kind)
                items.append(item)
            metadata = data.get("metadata") or {}
            # Every page of one list is the same snapshot: the first page's version holds.
            version = version or metadata.get("resourceVersion") or ""
            token = metadata.get("continue")
            if not token:
                return items, version

    async def watch_pods(
        self,
        version: str,
        observe: Callable[[dict[str, Any], bool], None],
        relist: Callable[[list[dict[str, Any]]], None],
    ) -> None:
        """Feed every Pod change in all namespaces to `observe(body, deleted)`, forever.

        Starts from `version` (the resourceVersion of the list the caller loaded), resumes
        from the last version seen (bookmarks included) when the server ends the watch or
        the connection fails (with backoff), and when that version is too old (410 Gone)
        lists all pods again, hands them to `relist(bodies)`, and watches from that list.
        Bodies are the API's own JSON (camelCase), as a list returns them.
        """
        delay = WATCH_BACKOFF[0]
        while True:
            started = asyncio.get_running_loop().time()
            try:
                if not version:
                    items, version = await self.list_with_version("pods")
                    relist(items)
                version, gone = await self._watch_pods_once(version, observe)
            except KubeError as exc:
                if exc.status != 410:
                    # Resume after the last event seen (or list again if the list failed).
                    version = self._pod_version if version else ""
                    logger.warning("pod watch: %s; reconnecting in %.1fs", exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, WATCH_BACKOFF[1])
                    continue
                gone = True
            except Exception:
                version = self._pod_version if version else ""
                logger.exception("pod watch failed; reconnecting in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, WATCH_BACKOFF[1])
                continue
            if gone:
                logger.info("pod watch: resourceVersion %s is too old; listing again", version)
                version = ""
                continue
            if asyncio.get_running_loop().time() - started < 1.0:
                await asyncio.sleep(delay)  # the server ended it at once: do not spin
                delay = min(delay * 2, WATCH_BACKOFF[1])
            else:
                delay = WATCH_BACKOFF[0]

    async def _watch_pods_once(
        self, version: str, observe: Callable[[dict[str, Any], bool], None]
    ) -> tuple[str, bool]:
        """One watch request: (the last version seen, whether the server said 410 Gone).

        A failed connection raises KubeError; events seen before it still moved `version`
        on, so they are not delivered twice: that is kept in `self._pod_version`.
        """
        self._pod_version = version
        response = await self._call(
            "watch pods",
            self.core.list_pod_for_all_namespaces(
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_TIMEOUT,
                _preload_content=False,
                _request_timeout=(30, WATCH_TIMEOUT + 60),
            ),
        )
        buffer = b""
        try:
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip() and self._pod_watch_event(line, observe):
                        return self._pod_version, True
        except (TimeoutError, OSError) as exc:
            raise KubeError(0, f"watch pods: {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # aiohttp's client errors, without importing aiohttp here
            if type(exc).__module__.startswith("aiohttp"):
                raise KubeError(0, f"watch pods: {type(exc).__name__}: {exc}") from None
            raise
        finally:
            response.close()  # not back to the pool: the stream may be cut mid-way
        return self._pod_version, False

    def _pod_watch_event(
        self, line: bytes, observe: Callable[[dict[str, Any], bool], None]
    ) -> bool:
        """Handle one watch event line; True when it says the version is gone (410)."""
        try:
            event = json.loads(line)
        except ValueError:
            logger.warning("pod watch: unreadable event %r", line[:200])
            return False
        kind, body = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if body.get("code") == 410:
                return True
            raise KubeError(int(body.get("code") or 0), f"watch pods: {body.get('message')}")
        version = (body.get("metadata") or {}).get("resourceVersion")
        if kind != "BOOKMARK":
            try:
                observe(body, kind == "DELETED")
            except Exception:
                logger.exception("pod watch: handling a %s event failed", kind)
        if version:
            self._pod_version = version
        return False

    # ------------------------------------------------------------ pods

    async def admit(
        self,
        namespace: str,
        name: str,
        gates: Sequence[str],
        labels: Mapping[str, str] | None,
        capacity: str | None,
    ) -> None:
        """Remove our scheduling gate (keeping any others) and set the capacity label, at once.

        `gates` are the pod's gate names as last seen; the `test` op makes the patch fail
        (422) instead of removing someone else's gate if the list has changed since.
        """
        index = list(gates).index(ADMISSION_GATE)
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": ADMISSION_GATE},
            {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
        ]
        if capacity is not None:
            if labels is None:
                ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
            ops.append(
                {
                    "op": "add",
                    "path": f"/metadata/labels/{_escape(CAPACITY_LABEL)}",
                    "value": capacity,
                }
            )
        await self._discard(
            f"Pod {namespace}/{name}: remove gate",
            self.core.patch_namespaced_pod(
                name, namespace, ops, _content_type=_JSON_PATCH, _preload_content=False
            ),
        )

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        response = await self._call(
            f"Pod {namespace}/{name}: read",
            self.core.read_namespaced_pod(name, namespace, _preload_content=False),
        )
        data: dict[str, Any] = json.loads(await response.read())
        return data

    async def label_pod(self, namespace: str, name: str, capacity: str) -> None:
        body = {"metadata": {"labels": {CAPACITY_LABEL: capacity}}}
        await self._discard(
            f"Pod {namespace}/{name}: label",
            self.core.patch_namespaced_pod(
                name, namespace, body, _content_type=_MERGE_PATCH, _preload_content=False
            ),
        )

    async def evict(self, namespace: str, name: str) -> None:
        """The Eviction API (PodDisruptionBudgets hold); a refusal raises KubeError(429)."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
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
    ) -> None:
        """A core/v1 Event on the pod (kubectl describe pod shows it)."""
        now = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{name}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": namespace,
                "name": name,
                **({"uid": uid} if uid else {}),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": f"{GROUP}/operator",
            "reportingInstance": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self._discard(
            f"Pod {namespace}/{name}: event {reason}",
            self.core.create_namespaced_event(namespace, body, _preload_content=False),
        )

    # ------------------------------------------------------------ quota objects

    async def patch_node(
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
        try:
            response = await self._call(
                f"Lease {namespace}/{name}: read",
                self.coordination.read_namespaced_lease(name, namespace, _preload_content=False),
            )
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        data: dict[str, Any] = json.loads(await response.read())
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
