"""`batch/v1` Jobs in, and Jobs resumed: what pod groups need of the Jobs in the cluster.

A Job whose parallelism is above 1 makes its pods one pod group (docs/reference/pods.md,
"Pod groups"). `Jobs` keeps the engine (`Engine.observe_job` / `forget_job`) and the
webhooks' copy (`GroupBook`) current from the operator's Job watch (podwatch.PodWatch over
"jobs") and the start-up list.

A Job's group is evicted by suspending the Job (actuator.py): the job controller then
deletes its pods without counting them failed, so the Job's `backoffLimit` is not spent
on quota decisions. The Job is marked with `quotree.io/evicted` when it is suspended;
once none of its pods is left, `resume_due` sets `spec.suspend` back to false and
removes the mark, and the job controller creates the pods again, which wait as one
group. The mark is read from the cluster, so a Job suspended just before the operator
restarted is still resumed; a Job its owner suspended (no mark) is left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from quotree.engine import Engine
from quotree.group_book import GroupBook
from quotree.groups import JobFacts, job_facts
from quotree_operator.api import KubeAPI
from quotree_operator.bodies import EVICTED_ANNOTATION
from quotree_operator.inputs import Inputs
from quotree_operator.kube_errors import KubeError

__all__ = ["Jobs"]

logger = logging.getLogger("quotree.operator")


class Jobs:
    """See module docstring."""

    def __init__(self, engine: Engine, inputs: Inputs, book: GroupBook) -> None:
        self.engine = engine
        self.inputs = inputs
        self.book = book
        #: "namespace/name" -> what the engine was told of the Job.
        self.facts: dict[str, JobFacts] = {}
        #: Jobs quotree suspended (marked, and still suspended): resumed once their pods
        #: are gone.
        self.evicted: set[str] = set()
        self._resuming: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def observe(self, body: Mapping[str, Any], deleted: bool) -> None:
        """A Job was added, changed or deleted."""
        facts = job_facts(body)
        key = facts.key
        if deleted:
            self.evicted.discard(key)
            if self.facts.pop(key, None) is not None:
                self.engine.forget_job(facts.namespace, facts.name)
                self.book.forget_job(key)
                self.inputs.signals.changed()
            return
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        if facts.suspended and EVICTED_ANNOTATION in annotations:
            self.evicted.add(key)
        else:
            self.evicted.discard(key)
        if self.facts.get(key) == facts:
            return  # e.g. its status moved on: nothing the engine reads
        self.facts[key] = facts
        self.engine.observe_job(facts)
        self.book.set_job(facts)
        self.inputs.signals.changed()

    def relist(self, bodies: list[dict[str, Any]]) -> None:
        """The Job watch had to list again (410 Gone): forget the Jobs that went meanwhile."""
        listed = {job_facts(body).key for body in bodies}
        for key in [key for key in self.facts if key not in listed]:
            namespace, name = key.split("/", 1)
            self.observe({"metadata": {"namespace": namespace, "name": name}}, deleted=True)
        for body in bodies:
            self.observe(body, deleted=False)
        logger.info("jobs watch: listed %d Jobs again", len(bodies))

    async def load(self, kube: KubeAPI) -> str:
        """Every Job, before the pods are loaded; the list's resourceVersion."""
        items, version = await kube.list_with_version("jobs")
        for body in items:
            self.observe(body, deleted=False)
        return version

    def resume_due(self, kube: KubeAPI) -> list[asyncio.Task[None]]:
        """Resume every Job quotree suspended whose pods are all gone (module docstring)."""
        started = []
        for key in self.evicted - self._resuming:
            if self.inputs.job_pods.get(key):
                continue
            self._resuming.add(key)
            task = asyncio.ensure_future(self._resume(kube, key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            started.append(task)
        return started

    async def _resume(self, kube: KubeAPI, key: str) -> None:
        namespace, name = key.split("/", 1)
        try:
            await kube.suspend_job(namespace, name, False)
        except KubeError as exc:
            if exc.status == 404:
                self.evicted.discard(key)
            else:
                logger.info("%s; will retry", exc)  # still marked: the next round tries again
            return
        finally:
            self._resuming.discard(key)
        self.evicted.discard(key)
        logger.info("Job %s: its pods are gone; resumed, its pods wait again as one group", key)
