"""The operator's parts put together: inputs, the decision loop, actuator, status writer.

`Controller` holds the live `quotree.Engine` and runs one decision loop: woken by every
input change (and at least every TICK seconds, since the reclaim delay needs a clock), it
calls `Engine.decide()` and hands the result to the actuator. It takes no quota decision
itself. Only the holder of the leader Lease acts (leader.py calls `set_leading`); every
replica lists, watches and keeps its engine current, so a standby takes over with a warm
tree, and every write goes through `LeaderWrites`, so a standby writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import time
from typing import Any

from quotree.engine import Decisions, Engine
from quotree_operator import loading
from quotree_operator.actuator import Actuator
from quotree_operator.api import KubeAPI
from quotree_operator.config import OperatorConfig
from quotree_operator.create_admitter import CreateAdmitter
from quotree_operator.desired_status import StatusMemory
from quotree_operator.in_use import CohortsInUse
from quotree_operator.inputs import Inputs, Signals
from quotree_operator.jobs import Jobs
from quotree_operator.leader_writes import LeaderWrites
from quotree_operator.metrics import METRICS
from quotree_operator.namespaces import NamespaceLabels
from quotree_operator.pod_groups import WHAT as PODGROUPS
from quotree_operator.pod_groups import PodGroups
from quotree_operator.podwatch import PodWatch
from quotree_operator.status_writer import StatusWriter

__all__ = ["GC_YOUNG", "TICK", "Controller", "tune_garbage_collection"]

logger = logging.getLogger("quotree.operator")

TICK = 1.0  # seconds between decisions when nothing changes (the reclaim delay needs a clock)
#: Allocations between two collections of the youngest generation (Python's default: 700).
GC_YOUNG = 10_000
#: Seconds the start-up's collection waits after the first decisions are handed on.
ADMISSIONS_FIRST = 1.0


def give_back_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim; elsewhere,
    nothing): the lists of the start-up leave megabytes of them (bench/RESULTS.md)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def tune_garbage_collection() -> None:
    """Spare the event loop most of the cyclic garbage collector's passes.

    Every pod event leaves objects that live (its facts, records, handles), and with
    Python's default thresholds a full collection came every few thousand of them: it
    walked every object of the process, the modules (Kopf, the Kubernetes client's models:
    over 100,000 objects) and the engine built from the lists included, 100 to 200 ms each
    on the event loop the admissions share, a fifth of the operator's CPU per pod in a
    burst (bench/history/2026-11-27-1.md, "Pod groups through the live operator"). So, once the
    start-up is done: its garbage is collected and what is left frozen (never walked
    again; an object of it freed later by its last reference still goes at once, a
    cycle among them is left for good: the price of the freeze), and the youngest
    generation is collected every GC_YOUNG allocations instead of 700. For the process,
    once (quotree_main), not for every `Controller.load` of the unit tests.
    """
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, middle, oldest)
    gc.enable()


async def tune_after_first_decisions(signals: Signals, limit: float = 30.0) -> None:
    """`tune_garbage_collection` once this replica's first decisions are handed on (or
    after `limit` seconds: a standby decides nothing). Until then the collector stays off,
    as it was during the load: the collection walks everything the start-up made (about
    0.5 s at 30,000 pods), and the first admissions should not wait for it."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limit):
            await signals.decided.wait()
    await asyncio.sleep(ADMISSIONS_FIRST)  # the first gate removals are on their way
    tune_garbage_collection()


class Controller:
    """See module docstring."""

    def __init__(self, config: OperatorConfig, kube: KubeAPI) -> None:
        self.engine = Engine(
            system_namespaces=config.never_gated,
            default_quota=config.default_quota,
            reclaim_delay=config.reclaim_delay,
            group_timeout=config.group_timeout,
            scheduling_timeout=config.scheduling_timeout,
        )
        if config.maintenance:
            self.engine.set_maintenance("QUOTREE_MAINTENANCE is set on the operator")
        self.signals = Signals()
        memory = StatusMemory()
        #: Every write goes through this: a standby writes nothing (leader_writes.py).
        self.writes = LeaderWrites(kube, self.signals)
        #: The in-use finalizer on the Cohorts that have children (in_use.py).
        self.in_use = CohortsInUse(self.engine, self.writes)
        self.inputs = Inputs(self.engine, memory, self.signals, in_use=self.in_use)
        self.jobs = Jobs(self.engine, self.inputs, self.inputs.book)
        self.pod_groups = PodGroups(self.engine, self.inputs)
        self.actuator = Actuator(self.writes, self.inputs, config.concurrency)
        self.status_writer = StatusWriter(self.writes, self.inputs, memory, config.concurrency)
        self.pod_watch = PodWatch(kube, self.inputs.observe_pod, self.inputs.relist_pods)
        self.namespaces = NamespaceLabels(self.engine, self.writes)
        #: The leader's admission at creation (the pod CREATE webhook asks it).
        self.admitter = CreateAdmitter(
            self.engine,
            self.inputs,
            enabled=config.admit_at_create and config.webhooks,
            reserve_for=config.admit_reservation_seconds,
        )
        self.inputs.on_created = self.actuator.admitted_at_create
        self.kube = kube
        self._pods_version = ""  # resourceVersion of the pod list load() read
        self._jobs_version = ""  # and of the Job list
        self._pod_groups_version: str | None = None  # and of the PodGroups' (None: no API)

    async def load(self) -> None:
        """Rebuild the engine from the API; call before any watch starts. Jobs and
        PodGroups come before pods, so that their pods find their group."""
        self._jobs_version = await self.jobs.load(self.kube)
        self._pod_groups_version = await self.pod_groups.load(self.kube)
        self._pods_version = await loading.load(self.inputs, self.kube)
        # Every pod seen: a group rebuilt from running pods with some missing is said once.
        self.engine.group_ledger.rebuild.check()
        give_back_memory()

    async def watch_quota_objects(self, kind: str) -> None:
        """Every Cohort or ElasticQuota (`kind`) change after `load()`, forever (not through
        Kopf: see podwatch.py)."""
        inputs = self.inputs

        def observe(body: dict[str, Any], deleted: bool) -> None:
            body.setdefault("kind", kind)
            inputs.observe_quota_object(body, deleted)

        def relist(bodies: list[dict[str, Any]]) -> None:
            inputs.relist_quota_objects(kind, bodies)

        watch = PodWatch(self.kube, observe, relist, what=kind)
        await watch.run(inputs.list_versions.get(kind, ""))

    async def watch_pods(self) -> None:
        """Every pod change after `load()` (from its list's resourceVersion), forever."""
        await self.pod_watch.run(self._pods_version)

    async def watch_jobs(self) -> None:
        """Every Job change after `load()`, forever (jobs.py)."""
        watch = PodWatch(self.kube, self.jobs.observe, self.jobs.relist, what="jobs")
        await watch.run(self._jobs_version)

    async def watch_pod_groups(self) -> None:
        """Every PodGroup change after `load()`, forever; nothing where the cluster does
        not serve PodGroups (pod_groups.py)."""
        if self._pod_groups_version is None:
            return
        groups = self.pod_groups
        watch = PodWatch(self.kube, groups.observe, groups.relist, what=PODGROUPS)
        await watch.run(self._pod_groups_version)

    def set_leading(self, leading: bool, previous: tuple[float, float] | None = None) -> None:
        """This replica (no longer) holds the leader Lease; `previous`: the former holder's
        last renewal (wall seconds) and its Lease's duration, when it took the Lease over
        (create_admitter.py waits out what that holder may have admitted at creation)."""
        if leading:
            self.admitter.took_lead(*(previous or (None, 0.0)))
        self.signals.leading = leading
        self.signals.decided.clear()  # the status writer waits for the first decisions
        self.inputs.dirty.all()  # what another replica wrote meanwhile is compared again
        METRICS.set_leader(leading)
        self.signals.changed()

    def _decided_on(self, decisions: Decisions) -> None:
        """The quotas whose pods were admitted or are evicted show other numbers now."""
        for quota in decisions.quotas:
            self.inputs.dirty.add(quota)

    async def decision_loop(self) -> None:
        """Decide whenever an input changed, and at least every TICK seconds."""
        signals = self.signals
        while True:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation
            # that comes as the event is set, and the loop would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK):
                    await signals.wake.wait()
            signals.wake.clear()
            self.admitter.expire()
            if not signals.leading or not self.admitter.deciding():
                continue
            self.namespaces.reconcile(signals.config_changes)
            self.in_use.reconcile(signals.config_changes)
            try:
                started = time.perf_counter()
                decisions = self.engine.decide(time.monotonic())
                METRICS.decided(time.perf_counter() - started)
            except Exception:
                logger.exception("the engine failed to decide; retrying on the next change")
                await asyncio.sleep(TICK)
                continue
            if decisions:
                self._decided_on(decisions)
                self.actuator.carry_out(decisions)
                signals.status_dirty.set()
            signals.decided.set()
            if self.jobs.evicted:
                self.jobs.resume_due(self.writes)
