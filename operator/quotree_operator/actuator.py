"""Engine decisions out: the pod writes that make one `Engine.decide()` result real.

`Actuator.carry_out` starts, without waiting for them, the admissions (gate removal plus
standing label), evictions, labels and Events of one set of decisions, each within its own
concurrency budget, so status writes and Events never queue admissions behind them. It
takes no decision itself: a write the API refuses goes back to the engine as an input
(the pod waits again, or the eviction is tried again later).

A failed gate removal is not known to have failed: the API server may have applied it and
died before it answered. So the pod stays counted (in `Inputs.admitting`) until the cluster
says which it is: the actuator reads it again, with backoff for as long as the API does not
answer, and a pod still gated then waits again while an ungated one stays admitted (the
quota is never freed for another pod while this one may run, and never kept for a pod that
does not). Events the API could not take are written once it answers again (for up to
EVENT_RETRY_FOR seconds; a Pending reason no longer current is dropped).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from quotree.create_admission import CreateAdmission
from quotree.engine import Decisions, Eviction, PodState
from quotree.group_rebuild import INCONSISTENT
from quotree.models import ADMISSION_GATE
from quotree_operator.api import KubeAPI
from quotree_operator.event_budget import AdmittedEvents
from quotree_operator.inputs import Inputs
from quotree_operator.kube_errors import KubeError, write_event_retrying
from quotree_operator.metrics import METRICS
from quotree_operator.write_queue import WriteQueue

__all__ = ["EVENT_RETRY_FOR", "READ_BACKOFF", "RETRIES", "RETRY_DELAY", "Actuator"]

logger = logging.getLogger("quotree.operator")

RETRIES = 5
RETRY_DELAY = 0.2  # first wait before retrying a write (doubled each time)
READ_BACKOFF = (0.5, 5.0)  # first and longest wait between reads of a pod after a failed write
EVENT_RETRY_FOR = 300.0  # seconds an Event the API could not take is still tried


def _split(key: str) -> tuple[str, str]:
    namespace, name = key.split("/", 1)
    return namespace, name


def _told(eviction: Eviction) -> str:
    """An eviction's event text: its reason, and the group it goes with (docs/reference/pods.md,
    "Events": events on the pods name the group)."""
    group = eviction.group
    if group is None or f"pod group {group}" in eviction.reason:
        return eviction.reason
    return f"{eviction.reason}; with the whole of pod group {group}"


class Actuator:
    """See module docstring."""

    def __init__(self, kube: KubeAPI, inputs: Inputs, concurrency: int) -> None:
        self.kube = kube
        self.inputs = inputs
        # Separate budgets so that neither events nor labels queue admissions behind them:
        # admissions and evictions get `concurrency` slots of their own; the standing labels
        # of pods already running (thousands after a start-up against a cluster whose pods
        # have none, or after a failover) a quarter of that, and so do Events.
        self._writes = asyncio.Semaphore(concurrency)
        self._labels = asyncio.Semaphore(max(4, concurrency // 4))
        # Standing labels and Pending events due: one dict entry per pod, not one task
        # per pod (write_queue.py); each queue has as many workers as its budget.
        self.labels = WriteQueue("the standing label", self._label, max(4, concurrency // 4))
        self.pending = WriteQueue("the Pending event", self._pending, max(4, concurrency // 4))
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
            # At once, not in the task: a gated view of the pod arriving before the write
            # must not undo the admission (inputs.py).
            self.inputs.admitting.add(key)
            self._spawn(
                self._admit(key, labels.pop(key, None), message, decisions.flavors.get(key))
            )
        jobs: dict[tuple[str, str], list[Eviction]] = {}
        for eviction in decisions.evictions:
            job = self._job_of(eviction)
            if job is not None:  # a Job's pod group: the Job is suspended
                jobs.setdefault((_split(eviction.pod)[0], job), []).append(eviction)
            else:
                self._spawn(self._evict(eviction))
        for (namespace, job), evictions in jobs.items():
            self._spawn(self._suspend(namespace, job, evictions))
        for key, label in labels.items():
            self.labels.put(key, label)
        for key, reason in decisions.pending.items():
            self.pending.put(key, reason)
        for key, reason, message in decisions.warnings:
            if reason == INCONSISTENT:  # what a group rebuilt from running pods was found
                logger.warning("%s (pod %s)", message, key)
            self._spawn(self._event(key, reason, message, warning=True))

    async def _retrying(
        self,
        what: str,
        call: Callable[[], Awaitable[None]],
        budget: asyncio.Semaphore | None = None,
    ) -> bool:
        """Run `call` (within `budget`, else the admissions') until it succeeds; False when
        the pod is gone; raises after RETRIES."""
        delay = RETRY_DELAY
        for attempt in range(RETRIES):
            try:
                async with budget or self._writes:
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
        standing: str | None,
        message: str,
        flavor: tuple[str, dict[str, str]] | None = None,
    ) -> None:
        namespace, name = _split(key)
        self.inputs.admitting.add(key)
        attempted = False
        for _ in range(3):
            handle = self.inputs.pods.get(key)
            if handle is None:
                self.inputs.admitting.discard(key)
                return
            if ADMISSION_GATE not in handle.gates:
                # Gone already: removed by hand, or by our own write whose answer was lost
                # (its retry then failed its test op with 422).
                if attempted:
                    await self._admitted(key, message)
                break
            admit = functools.partial(
                self.kube.admit,
                namespace,
                name,
                handle.gates,
                handle.has_labels,
                standing,
                flavor=flavor,
                has_node_selector=handle.has_node_selector,
            )
            attempted = True
            try:
                done = await self._retrying(f"admit {key}", admit)
            except KubeError as exc:
                if exc.status != 422:
                    logger.warning("%s; reading the pod to learn whether it was admitted", exc)
                    await self._settle(key, message)
                    return
                # Our view of the gates was stale: read the pod and try again.
                if not await self._read_again(key, after_failure=False):
                    await self._settle(key, message)
                    return
                continue
            if not done:
                self.inputs.forget_pod(key)  # 404: the pod is gone
                return
            # Still in `admitting` until the watch shows the gate gone (inputs.py).
            self.inputs.signals.admissions += 1
            handle.gates = tuple(g for g in handle.gates if g != ADMISSION_GATE)
            handle.has_labels = handle.has_labels or standing is not None or flavor is not None
            handle.has_node_selector = handle.has_node_selector or bool(flavor and flavor[1])
            await self._admitted(key, message)
            return
        handle = self.inputs.pods.get(key)
        if handle is not None and ADMISSION_GATE in handle.gates:
            logger.warning("admit %s: its gates keep changing; the pod goes back to pending", key)
            self.inputs.release(key)
            return
        if standing is not None:
            self.labels.put(key, standing)

    def admitted_at_create(self, key: str, admission: CreateAdmission) -> None:
        """A pod admitted in its creation is here (inputs.py): count it and tell it, as
        for a gate removal."""
        self.inputs.signals.admissions += 1
        self._spawn(self._admitted(key, admission.message))

    async def _admitted(self, key: str, message: str) -> None:
        """The pod's gate is gone: count it, and tell it (within the event budget)."""
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
                config = self.inputs.engine.tree_of(quota).config(quota)
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

    async def _read_again(self, key: str, *, after_failure: bool) -> bool:
        """Read the pod and feed it in; False when the API did not answer (404: forgotten).

        `after_failure`: no write of ours is under way any more, so a gate the read shows
        means pending (`Inputs.release`). An ungated read keeps the pod in `admitting`
        until the watch, which may still deliver older gated views, shows it too.
        """
        namespace, name = _split(key)
        try:
            async with self._writes:
                body = await self.kube.read_pod(namespace, name)
        except KubeError as exc:
            if exc.status == 404:
                self.inputs.forget_pod(key)
                return True
            logger.info("%s", exc)
            return False
        self.inputs.observe_pod(body, deleted=False, read=True)
        handle = self.inputs.pods.get(key)
        if after_failure and handle is not None and ADMISSION_GATE in handle.gates:
            self.inputs.release(key)
        return True

    async def _settle(self, key: str, message: str) -> None:
        """A gate removal failed: read the pod until the API answers (module docstring).

        Gated: the admission is forgotten and the pod waits again. Ungated (the write was
        applied before the answer was lost): it stays admitted and gets its Admitted event.
        """
        delay = READ_BACKOFF[0]
        while key in self.inputs.admitting and key in self.inputs.pods:
            if await self._read_again(key, after_failure=True):
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, READ_BACKOFF[1])
        handle = self.inputs.pods.get(key)
        record = self.inputs.engine.pods.get(key)
        if (
            handle is not None
            and ADMISSION_GATE not in handle.gates
            and record is not None
            and record.state is PodState.ADMITTED
        ):
            await self._admitted(key, message)

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
        await self._event(eviction.pod, eviction.kind, _told(eviction), warning=True)

    def _job_of(self, eviction: Eviction) -> str | None:
        """The Job to suspend for an eviction: its group's Job, also when the group is
        named by its label (the webhook labels a Job's pods) and the pod is a Job's."""
        if eviction.group is None:
            return None
        if eviction.job is not None:
            return eviction.job
        record = self.inputs.engine.pods.get(eviction.pod)
        return record.facts.owner_job if record is not None else None

    async def _suspend(self, namespace: str, job: str, evictions: list[Eviction]) -> None:
        """Evict a Job's pod group by suspending the Job (jobs.py says why and how it is
        resumed), then tell each pod why."""
        first = evictions[0]
        try:
            async with self._writes:
                await self.kube.suspend_job(namespace, job, True, first.kind)
        except KubeError as exc:
            if exc.status == 404:
                return  # the Job is gone, and its pods with it
            logger.info("%s; will retry", exc)
            for eviction in evictions:
                self.inputs.engine.eviction_refused(eviction.pod)
            self.inputs.signals.wake.set()
            return
        logger.info(
            "%s Job %s/%s (pod group %s, %d pods): suspended; %s",
            first.kind,
            namespace,
            job,
            first.group,
            len(evictions),
            first.reason,
        )
        for eviction in evictions:
            METRICS.evicted(eviction.quota, eviction.kind)
        await asyncio.gather(
            *(self._event(e.pod, e.kind, _told(e), warning=True) for e in evictions)
        )

    async def _label(self, key: str, standing: str) -> None:
        namespace, name = _split(key)
        try:
            await self._retrying(
                f"label {key}",
                lambda: self.kube.label_pod(namespace, name, standing),
                self._labels,
            )
        except KubeError as exc:
            logger.warning("%s", exc)

    async def _pending(self, key: str, reason: str) -> None:
        await self._event(key, "Pending", reason)

    async def _event(self, key: str, reason: str, message: str, warning: bool = False) -> None:
        """An Event on the pod; kept and tried again while the API does not answer."""
        namespace, name = _split(key)
        handle = self.inputs.pods.get(key)
        uid = handle.uid if handle else None
        event_name = f"{name}.{uuid.uuid4().hex[:16]}"  # one name for every try

        async def write() -> None:
            async with self._events:
                await self.kube.pod_event(
                    namespace,
                    name,
                    uid=uid,
                    reason=reason,
                    message=message,
                    warning=warning,
                    event_name=event_name,
                )

        failed = await write_event_retrying(
            write,
            first=READ_BACKOFF[0],
            longest=READ_BACKOFF[1],
            give_up_after=EVENT_RETRY_FOR,
            # A newer reason (or the admission) says more than an old Pending one.
            still_wanted=lambda: reason != "Pending" or self._still_pending(key, message),
        )
        if failed is not None:
            logger.info("%s", failed)

    def _still_pending(self, key: str, message: str) -> bool:
        record = self.inputs.engine.pods.get(key)
        return record is not None and record.state is PodState.PENDING and record.reason == message
