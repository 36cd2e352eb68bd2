"""The operator's shell around the engine: cluster objects in, engine decisions out.

`Shell` holds the live `quotree.Engine` (kept current by its own pod watch and the Kopf
handlers in main.py),
runs one decision loop (woken by every input change, plus a 1 s tick for the reclaim
delay) and one coalescing status writer. It takes no quota decision itself: every
admission, eviction, label and Pending reason comes from `Engine.decide()`.

Only the holder of the leader Lease acts (see leader.py); every replica keeps its engine
current, so a standby takes over with a warm tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from quotree.engine import Decisions, Engine, Eviction
from quotree.models import ADMISSION_GATE, ConfigError, parse_node, pod_facts
from quotree.quantity import QuantityError, parse_quantity
from quotree_operator.client import Kube, KubeError
from quotree_operator.config import OperatorConfig
from quotree_operator.metrics import METRICS
from quotree_operator.status import Desired, desired, status_patch

__all__ = ["Shell", "node_allocatable"]

logger = logging.getLogger("quotree.operator")

TICK = 1.0  # seconds between decisions when nothing changes (the reclaim delay needs a clock)
STATUS_INTERVAL = 0.5  # status writes are coalesced over at least this long
# ... and over STATUS_BACKOFF times as long as the last round of writes took: under a burst
# every quota's status changes all the time, and rewriting all of them every 0.5 s would
# take most of the API server from the admissions (the writer keeps to ~1/(1+3) of the time).
STATUS_BACKOFF = 3.0
RETRIES = 5


def node_allocatable(body: Mapping[str, Any]) -> dict[str, int] | None:
    """A Node's allocatable in base units, or None when it is not Ready or not schedulable."""
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    if spec.get("unschedulable") or (body.get("metadata") or {}).get("deletionTimestamp"):
        return None
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    if not ready:
        return None
    amounts = status.get("allocatable") or status.get("capacity") or {}
    out = {}
    for resource, value in amounts.items():
        try:
            out[resource] = parse_quantity(value, resource)
        except QuantityError:
            logger.warning("Node %s: ignoring %s %r", body["metadata"]["name"], resource, value)
    return out


@dataclass(slots=True)
class PodHandle:
    """What the shell needs to write to a pod besides the engine's facts."""

    uid: str | None
    gates: tuple[str, ...]
    has_labels: bool


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Shell:
    """See module docstring."""

    def __init__(self, config: OperatorConfig, kube: Kube, concurrency: int = 48) -> None:
        self.config = config
        self.kube = kube
        self.engine = Engine(
            system_namespaces=config.never_gated,
            default_quota=config.default_quota,
            reclaim_delay=config.reclaim_delay,
        )
        self.pods: dict[str, PodHandle] = {}
        self.kinds: dict[str, tuple[str, str | None]] = {}  # node name -> (kind, namespace)
        self.bad_configs: dict[str, str] = {}  # node name -> why its spec cannot be read
        self.written: dict[str, Desired] = {}
        self.written_times: dict[str, dict[str, str]] = {}
        self.leading = False
        self.wake = asyncio.Event()
        self.status_dirty = asyncio.Event()
        # Separate budgets so that status writes and events never queue admissions behind
        # them: admissions, evictions and labels get `concurrency` slots of their own.
        self._writes = asyncio.Semaphore(concurrency)
        self._status_writes = asyncio.Semaphore(max(4, concurrency // 6))
        self._events = asyncio.Semaphore(max(4, concurrency // 4))
        self._tasks: set[asyncio.Task[None]] = set()
        self.admissions = 0  # admitted and written (metrics, bench)
        self.pods_version = ""  # resourceVersion of the pod list load() read

    # ------------------------------------------------------------ inputs

    def changed(self) -> None:
        self.wake.set()
        self.status_dirty.set()

    def observe_node(self, body: Mapping[str, Any], deleted: bool) -> None:
        name = body["metadata"]["name"]
        self.engine.set_cluster_node(name, None if deleted else node_allocatable(body))
        self.changed()

    def observe_quota_object(self, body: Mapping[str, Any], deleted: bool) -> None:
        """A Cohort or ElasticQuota was added, changed or deleted."""
        metadata = body["metadata"]
        name = metadata["name"]
        if deleted:
            self.engine.remove_config(name)
            self.kinds.pop(name, None)
            self.bad_configs.pop(name, None)
            self.written.pop(name, None)
        else:
            self.kinds[name] = (body["kind"], metadata.get("namespace"))
            if name not in self.written and body.get("status"):
                self._remember_written(name, body)
            try:
                config = parse_node(body)
            except ConfigError as exc:
                logger.warning("%s", exc)
                self.bad_configs[name] = str(exc)
                self.engine.remove_config(name)
            else:
                self.bad_configs.pop(name, None)
                if self.engine.tree.config(name) == config:
                    # Our own status or annotation write came back: nothing for the engine
                    # (set_config would re-resolve every pod, once per status write).
                    return
                self.engine.set_config(config)
        self.changed()

    def _remember_written(self, name: str, body: Mapping[str, Any]) -> None:
        """Start from what the object already shows, so a restart rewrites nothing unchanged."""
        status = dict(body.get("status") or {})
        conditions = status.get("conditions") or []
        self.written_times[name] = {
            c["type"]: c.get("lastTransitionTime", "") for c in conditions if "type" in c
        }
        status["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions
        ]
        annotations = dict(body["metadata"].get("annotations") or {})
        self.written[name] = Desired(
            status, {k: v for k, v in annotations.items() if k.startswith("quotree.io/")}
        )

    def observe_pod(self, body: Mapping[str, Any], deleted: bool) -> None:
        metadata = body["metadata"]
        key = f"{metadata.get('namespace')}/{metadata['name']}"
        if deleted:
            self.engine.forget_pod(key)
            self.pods.pop(key, None)
        else:
            try:
                facts = pod_facts(body)
            except ConfigError as exc:
                logger.warning("%s", exc)
                return
            spec = body.get("spec") or {}
            gates = tuple(g.get("name", "") for g in spec.get("schedulingGates") or ())
            if facts.terminal:
                self.pods.pop(key, None)
            else:
                self.pods[key] = PodHandle(
                    metadata.get("uid"), gates, metadata.get("labels") is not None
                )
            self.engine.observe_pod(facts)
        self.changed()

    # ------------------------------------------------------------ loops

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def decision_loop(self) -> None:
        """Decide whenever an input changed, and at least every TICK seconds."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=TICK)
            self.wake.clear()
            if not self.leading:
                continue
            try:
                started = time.perf_counter()
                decisions = self.engine.decide(time.monotonic())
                METRICS.decided(time.perf_counter() - started)
            except Exception:
                logger.exception("the engine failed to decide; retrying on the next change")
                await asyncio.sleep(TICK)
                continue
            if decisions:
                self.carry_out(decisions)
                self.status_dirty.set()

    def carry_out(self, decisions: Decisions) -> None:
        """Start the API writes for one set of decisions (bounded concurrency, not awaited)."""
        labels = dict(decisions.labels)
        for key, message in decisions.admitted:
            self.spawn(self._admit(key, labels.pop(key, None), message))
        for eviction in decisions.evictions:
            self.spawn(self._evict(eviction))
        for key, label in labels.items():
            self.spawn(self._label(key, label))
        for key, reason in decisions.pending.items():
            self.spawn(self._event(key, "Pending", reason))

    async def _retrying(self, what: str, call: Callable[[], Awaitable[None]]) -> bool:
        """Run `call` until it succeeds; False when the pod is gone; raises after RETRIES."""
        delay = 0.2
        for attempt in range(RETRIES):
            try:
                async with self._writes:
                    await call()
                return True
            except KubeError as exc:
                if exc.status == 404:
                    return False
                if attempt == RETRIES - 1 or exc.status in (400, 403, 422):
                    raise
                logger.info("%s failed (%s); retrying in %.1fs", what, exc, delay)
                await asyncio.sleep(delay)
                delay *= 2
        return False  # pragma: no cover - the loop returns or raises

    async def _admit(self, key: str, capacity: str | None, message: str) -> None:
        namespace, name = key.split("/", 1)
        for _ in range(3):
            handle = self.pods.get(key)
            if handle is None:
                return
            if ADMISSION_GATE not in handle.gates:
                break  # the gate is gone already (restart, or removed by hand)
            try:
                done = await self._retrying(
                    f"admit {key}",
                    lambda h=handle: self.kube.admit(  # type: ignore[misc]
                        namespace, name, h.gates, {} if h.has_labels else None, capacity
                    ),
                )
            except KubeError as exc:
                if exc.status != 422:
                    logger.error("%s; the pod goes back to pending", exc)
                    await self._requeue(key)
                    return
                # Our view of the gates was stale: read the pod and try again.
                try:
                    body = await self.kube.read_pod(namespace, name)
                except KubeError:
                    return
                self.observe_pod(body, deleted=False)
                continue
            if not done:
                return
            handle.gates = tuple(g for g in handle.gates if g != ADMISSION_GATE)
            handle.has_labels = handle.has_labels or capacity is not None
            self.admissions += 1
            record = self.engine.pods.get(key)
            if record is not None:
                METRICS.admitted(record.quota, record.facts.created)
            await self._event(key, "Admitted", message)
            return
        if capacity is not None:
            await self._label(key, capacity)

    async def _requeue(self, key: str) -> None:
        """The gate could not be removed: forget the admission and let the pod wait again."""
        namespace, name = key.split("/", 1)
        try:
            body = await self.kube.read_pod(namespace, name)
        except KubeError:
            return
        self.engine.forget_pod(key)
        self.observe_pod(body, deleted=False)

    async def _evict(self, eviction: Eviction) -> None:
        namespace, name = eviction.pod.split("/", 1)
        try:
            async with self._writes:
                await self.kube.evict(namespace, name)
        except KubeError as exc:
            if exc.status == 404:
                return
            # 429: a PodDisruptionBudget says no; anything else: also try again later.
            logger.info("%s; will retry", exc)
            self.engine.eviction_refused(eviction.pod)
            self.wake.set()
            return
        logger.info("%s %s: %s", eviction.kind, eviction.pod, eviction.reason)
        METRICS.evicted(eviction.quota, eviction.kind)
        await self._event(eviction.pod, eviction.kind, eviction.reason, warning=True)

    async def _label(self, key: str, capacity: str) -> None:
        namespace, name = key.split("/", 1)
        try:
            await self._retrying(
                f"label {key}", lambda: self.kube.label_pod(namespace, name, capacity)
            )
        except KubeError as exc:
            logger.warning("%s", exc)

    async def _event(self, key: str, reason: str, message: str, warning: bool = False) -> None:
        namespace, name = key.split("/", 1)
        handle = self.pods.get(key)
        try:
            async with self._events:
                await self.kube.pod_event(
                    namespace,
                    name,
                    uid=handle.uid if handle else None,
                    reason=reason,
                    message=message,
                    warning=warning,
                )
        except KubeError as exc:
            logger.info("%s", exc)

    async def status_loop(self) -> None:
        """Write what changed in statuses and annotations: coalesced, see STATUS_BACKOFF."""
        while True:
            await self.status_dirty.wait()
            self.status_dirty.clear()
            started = time.monotonic()
            if self.leading:
                try:
                    await self.write_statuses()
                except Exception:
                    logger.exception("status writing failed; retrying")
            spent = time.monotonic() - started
            await asyncio.sleep(max(STATUS_INTERVAL, spent * STATUS_BACKOFF))

    async def write_statuses(self) -> None:
        now = _now()
        writes = []
        for name, (kind, namespace) in list(self.kinds.items()):
            new = desired(self.engine, name, kind == "ElasticQuota", self.bad_configs.get(name))
            old = self.written.get(name)
            patch = status_patch(new, old, self.written_times.get(name, {}), now)
            same = old is not None and old.annotations == new.annotations
            annotations = None if same else new.annotations
            if patch is None and annotations is None:
                continue
            writes.append(
                self._write_status(
                    name,
                    kind=kind,
                    namespace=namespace,
                    new=new,
                    patch=patch,
                    annotations=annotations,
                )
            )
        if writes:
            await asyncio.gather(*writes)

    async def _write_status(
        self,
        name: str,
        *,
        kind: str,
        namespace: str | None,
        new: Desired,
        patch: dict[str, Any] | None,
        annotations: dict[str, str] | None,
    ) -> None:
        try:
            async with self._status_writes:
                await self.kube.patch_node(kind, namespace, name, patch, annotations)
        except KubeError as exc:
            if exc.status != 404:
                logger.warning("%s", exc)
                self.status_dirty.set()
            return
        self.written[name] = new
        if patch is not None:
            self.written_times[name] = {
                c["type"]: c["lastTransitionTime"] for c in patch["conditions"]
            }

    # ------------------------------------------------------------ start-up

    async def load(self) -> None:
        """Rebuild the engine from the API before the watches start (restart safety).

        Nodes and quota objects first, so that pods find their quotas and capacity.
        """
        for body in await self.kube.list_all("nodes"):
            self.observe_node(body, deleted=False)
        for kind in ("Cohort", "ElasticQuota"):
            for body in await self.kube.list_all(kind):
                self.observe_quota_object(body, deleted=False)
        pods, self.pods_version = await self.kube.list_with_version("pods")
        for body in pods:
            self.observe_pod(body, deleted=False)
        logger.info("loaded %d quota objects and %d pods from the API", len(self.kinds), len(pods))

    async def watch_pods(self) -> None:
        """Every pod change after `load()` (from its list's resourceVersion), forever."""
        await self.kube.watch_pods(self.pods_version, self.observe_pod, self.relist_pods)

    def relist_pods(self, bodies: list[dict[str, Any]]) -> None:
        """The pod watch had to list again (410 Gone): forget pods that went meanwhile."""
        listed = {f"{b['metadata'].get('namespace')}/{b['metadata']['name']}" for b in bodies}
        for key in [key for key in self.engine.pods if key not in listed]:
            self.engine.forget_pod(key)
            self.pods.pop(key, None)
        for body in bodies:
            self.observe_pod(body, deleted=False)
        logger.info("pod watch: listed %d pods again", len(bodies))
        self.changed()
