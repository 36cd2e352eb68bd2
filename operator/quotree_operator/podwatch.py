"""The operator's own pod watch: every Pod change in all namespaces, from a known position.

Pods are not watched through Kopf (its per-object machinery costs ~4 ms of CPU per event, a
third of the operator's time at thousands of pods). `PodWatch` keeps the watch's position
(the last resourceVersion seen, bookmarks included) and what to do when the watch ends:
resume from that position (with backoff when it fails), and when the position is too old
(410 Gone) list all pods again, hand them over, and watch from that list. The requests
themselves are client.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from quotree_operator.api import KubeAPI
from quotree_operator.kube_errors import KubeError

__all__ = ["WATCH_BACKOFF", "PodWatch"]

logger = logging.getLogger("quotree.operator")

WATCH_BACKOFF = (0.5, 30.0)  # first and longest wait before reconnecting a failed watch

Observe = Callable[[dict[str, Any], bool], None]
Relist = Callable[[list[dict[str, Any]]], None]


class PodWatch:
    """Feeds every Pod change to `observe(body, deleted)`; `relist(bodies)` after a new list."""

    def __init__(self, kube: KubeAPI, observe: Observe, relist: Relist, what: str = "pods") -> None:
        self.kube = kube
        #: What is watched: "pods", or "Cohort" / "ElasticQuota" (their own watches: Kopf's
        #: per-event machinery at 10,000 quota objects and two status writes each held the
        #: event loop for tens of seconds at start-up).
        self.what = what
        #: How the log lines name it: "pod watch: ..." (operators' log searches rely on it).
        self.label = "pod" if what == "pods" else what
        self.observe = observe
        self.relist = relist
        #: The last resourceVersion seen: a watch from it misses nothing and repeats nothing.
        self.version = ""

    async def run(self, version: str) -> None:
        """Watch from `version` (the resourceVersion of the list the caller loaded), forever."""
        delay = WATCH_BACKOFF[0]
        while True:
            started = asyncio.get_running_loop().time()
            try:
                if not version:
                    items, version = await self.kube.list_with_version(self.what)
                    self.relist(items)
                version, gone = await self._watch_once(version)
            except KubeError as exc:
                if exc.status != 410:
                    # Resume after the last event seen (or list again if the list failed).
                    version = self.version if version else ""
                    logger.warning("%s watch: %s; reconnecting in %.1fs", self.label, exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, WATCH_BACKOFF[1])
                    continue
                gone = True
            except Exception:
                version = self.version if version else ""
                logger.exception("%s watch failed; reconnecting in %.1fs", self.label, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, WATCH_BACKOFF[1])
                continue
            if gone:
                logger.info(
                    "%s watch: resourceVersion %s is too old; listing again", self.label, version
                )
                version = ""
                continue
            if asyncio.get_running_loop().time() - started < 1.0:
                await asyncio.sleep(delay)  # the server ended it at once: do not spin
                delay = min(delay * 2, WATCH_BACKOFF[1])
            else:
                delay = WATCH_BACKOFF[0]

    async def _watch_once(self, version: str) -> tuple[str, bool]:
        """One watch request: (the last version seen, whether the server said 410 Gone).

        A failed connection raises KubeError; events seen before it still moved
        `self.version` on, so they are not delivered twice.
        """
        self.version = version
        async with contextlib.aclosing(self.kube.watch_events(self.what, version)) as events:
            async for event in events:
                if self._handle(event):
                    return self.version, True
        return self.version, False

    def _handle(self, event: dict[str, Any]) -> bool:
        """Handle one watch event; True when it says the version is gone (410)."""
        kind, body = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if body.get("code") == 410:
                return True
            raise KubeError(int(body.get("code") or 0), f"watch {self.what}: {body.get('message')}")
        version = (body.get("metadata") or {}).get("resourceVersion")
        if kind != "BOOKMARK":
            try:
                self.observe(body, kind == "DELETED")
            except Exception:
                logger.exception("%s watch: handling a %s event failed", self.label, kind)
        if version:
            self.version = version
        return False
