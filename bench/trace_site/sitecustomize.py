"""Benchmark-only timestamps of each pod's way through the operator (bench_operator --trace).

Put on PYTHONPATH with QUOTREE_BENCH_TRACE=<file>: Python imports it at start-up, and it
wraps the operator's functions to note, per pod, when (time.monotonic, the clock the
benchmark client uses too) its first watch event was handled, when a decision admitted
it, when its admission task started, when the gate-removal PATCH was sent and answered,
and when its Admitted event was answered. The notes go to the file as JSON at exit.
Nothing here is part of quotree.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import time
from typing import Any

_PATH = os.environ.get("QUOTREE_BENCH_TRACE")


def _install(path: str) -> None:
    # Imported only when tracing is asked for (this file runs in every Python on the path).
    from quotree.decide import Decider  # noqa: PLC0415
    from quotree_operator.actuator import Actuator  # noqa: PLC0415
    from quotree_operator.client import Kube  # noqa: PLC0415
    from quotree_operator.inputs import Inputs, pod_key  # noqa: PLC0415

    notes: dict[str, dict[str, float]] = {}

    def note(key: str, what: str) -> None:
        notes.setdefault(key, {}).setdefault(what, time.monotonic())

    observe = Inputs.observe_pod

    @functools.wraps(observe)
    def observe_pod(self: Any, body: Any, deleted: bool) -> None:
        note(pod_key(body), "watch")
        observe(self, body, deleted)

    decide = Decider.decide

    @functools.wraps(decide)
    def traced_decide(self: Any, now: float = 0.0) -> Any:
        started = time.monotonic()
        out = decide(self, now)
        for key, _ in out.admitted:
            notes.setdefault(key, {})["decide_start"] = started
            note(key, "decided")
        return out

    admit_task = Actuator._admit

    @functools.wraps(admit_task)
    async def traced_admit_task(self: Any, key: str, *args: Any, **kwargs: Any) -> None:
        note(key, "task")
        await admit_task(self, key, *args, **kwargs)

    admit = Kube.admit

    @functools.wraps(admit)
    async def traced_admit(self: Any, namespace: str, name: str, *args: Any, **kwargs: Any) -> None:
        # Keyword arguments too (flavor=..., has_node_selector=...): dropping them made every
        # traced admission fail with a TypeError, and a traced run admitted nothing.
        note(f"{namespace}/{name}", "patch_sent")
        await admit(self, namespace, name, *args, **kwargs)
        note(f"{namespace}/{name}", "patch_answered")

    event = Kube.pod_event

    @functools.wraps(event)
    async def traced_event(self: Any, namespace: str, name: str, **kwargs: Any) -> None:
        await event(self, namespace, name, **kwargs)
        if kwargs.get("reason") == "Admitted":
            note(f"{namespace}/{name}", "event_answered")

    Inputs.observe_pod = observe_pod  # type: ignore[method-assign]
    Decider.decide = traced_decide  # type: ignore[method-assign]
    Actuator._admit = traced_admit_task  # type: ignore[method-assign]
    Kube.admit = traced_admit  # type: ignore[method-assign]
    Kube.pod_event = traced_event  # type: ignore[method-assign]

    def dump() -> None:
        with open(path, "w") as out:
            json.dump(notes, out)

    atexit.register(dump)


if _PATH:
    _install(_PATH)
