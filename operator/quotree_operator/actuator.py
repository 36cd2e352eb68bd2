"""Engine decisions out: the pod writes that make one `Engine.decide()` result real.

`Actuator.carry_out` starts, without waiting for them, the admissions (gate removal plus
capacity label), evictions, labels and Events of one set of decisions, each within its own
concurrency budget, so status writes and Events never queue admissions behind them. It
takes no decision itself: a write the API refuses goes back to the engine as an input
(the pod waits again, or the eviction is tried again later).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable

from quotree.engine import Decisions, Eviction
from quotree.models import ADMISSION_GATE
from quotree_operator.client import Kube, KubeError
from quotree_operator.event_budget import AdmittedEvents
from quotree_operator.inputs import Inputs
from quotree_operator.metrics import METRICS

__all__ = ["RETRIES", "Actuator"]

logger = logging.getLogger("quotree.operator")

RETRIES = 5


def _split(key: str) -> tuple[str, str]:
    namespace, name = key.split("/", 1)
    return namespace, name


class Actuator:
    """See module docstring."""

    def __init__(self, kube: Kube, inputs: Inputs, concurrency: int) -> None:
        self.kube = kube
        self.inputs = inputs
        # Separate budgets so that events never queue admissions behind them: admissions,
        # evictions and labels get `concurrency` slots of their own.
        self._writes = asyncio.Semaphore(concurrency)
        self._events = asyncio.Semaphore(max(4, concurrency // 4))
        self._tasks: set[asyncio.Task[None]] = set()
        #: Per-pod Admitted events per quota, the rest summed up on the quota (event_budget).
        self.admitted_events = AdmittedEvents()
        self._summaries: asyncio.Task[None] | None = None

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def carry_out(self, decisions: Decisions) -> None:
        """Start the API writes for one set of decisions (bounded concurrency, not awaited)."""
        labels = dict(decisions.labels)
        for key, message in decisions.admitted:
            self._spawn(
                self._admit(key, labels.pop(key, None), message, decisions.flavors.get(key))
            )
        for eviction in decisions.evictions:
            self._spawn(self._evict(eviction))
        for key, label in labels.items():
            self._spawn(self._label(key, label))
        for key, reason in decisions.pending.items():
            self._spawn(self._event(key, "Pending", reason))

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

    async def _admit(
        self,
        key: str,
        capacity: str | None,
        message: str,
        flavor: tuple[str, dict[str, str]] | None = None,
    ) -> None:
        namespace, name = _split(key)
        for _ in range(3):
            handle = self.inputs.pods.get(key)
            if handle is None:
                return
            if ADMISSION_GATE not in handle.gates:
                break  # the gate is gone already (restart, or removed by hand)
            admit = functools.partial(
                self.kube.admit,
                namespace,
                name,
                handle.gates,
                handle.has_labels,
                capacity,
                flavor=flavor,
                has_node_selector=handle.has_node_selector,
            )
            try:
                done = await self._retrying(f"admit {key}", admit)
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
                self.inputs.observe_pod(body, deleted=False)
                continue
            if not done:
                return
            self.inputs.signals.admissions += 1
            handle.gates = tuple(g for g in handle.gates if g != ADMISSION_GATE)
            handle.has_labels = handle.has_labels or capacity is not None or flavor is not None
            handle.has_node_selector = handle.has_node_selector or bool(flavor and flavor[1])
            record = self.inputs.engine.pods.get(key)
            if record is not None:
                METRICS.admitted(record.quota, record.facts.created)
            quota = record.quota if record is not None else None
            if quota is None or self.admitted_events.take(quota, time.monotonic()):
                await self._event(key, "Admitted", message)
            elif self._summaries is None or self._summaries.done():
                self._summaries = asyncio.ensure_future(self._write_summaries())
                self._tasks.add(self._summaries)
                self._summaries.add_done_callback(self._tasks.discard)
            return
        if capacity is not None:
            await self._label(key, capacity)

    async def _write_summaries(self) -> None:
        """Every interval while admissions go without their own event: one event per quota
        that says how many did (event_budget.py)."""
        budget = self.admitted_events
        while True:
            await asyncio.sleep(budget.interval)
            counts = budget.summaries()
            budget.forget_idle(time.monotonic())
            if not counts:
                return
            for quota, count in counts:
                config = self.inputs.engine.tree.config(quota)
                if config is None or not config.namespace:
                    continue
                try:
                    async with self._events:
                        await self.kube.quota_event(
                            config.namespace,
                            quota,
                            reason="Admitted",
                            message=budget.message(quota, count),
                        )
                except KubeError as exc:
                    logger.info("%s", exc)

    async def _requeue(self, key: str) -> None:
        """The gate could not be removed: forget the admission and let the pod wait again."""
        namespace, name = _split(key)
        try:
            body = await self.kube.read_pod(namespace, name)
        except KubeError:
            return
        self.inputs.engine.forget_pod(key)
        self.inputs.observe_pod(body, deleted=False)

    async def _evict(self, eviction: Eviction) -> None:
        namespace, name = _split(eviction.pod)
        try:
            async with self._writes:
                await self.kube.evict(namespace, name)
        except KubeError as exc:
            if exc.status == 404:
                return
            # 429: a PodDisruptionBudget says no; anything else: also try again later.
            logger.info("%s; will retry", exc)
            self.inputs.engine.eviction_refused(eviction.pod)
            self.inputs.signals.wake.set()
            return
        logger.info("%s %s: %s", eviction.kind, eviction.pod, eviction.reason)
        METRICS.evicted(eviction.quota, eviction.kind)
        await self._event(eviction.pod, eviction.kind, eviction.reason, warning=True)

    async def _label(self, key: str, capacity: str) -> None:
        namespace, name = _split(key)
        try:
            await self._retrying(
                f"label {key}", lambda: self.kube.label_pod(namespace, name, capacity)
            )
        except KubeError as exc:
            logger.warning("%s", exc)

    async def _event(self, key: str, reason: str, message: str, warning: bool = False) -> None:
        namespace, name = _split(key)
        handle = self.inputs.pods.get(key)
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
