"""The operator's side of the webhook process: start it, feed it, count its answers, restart it.

The webhook server (server.py) makes one `WebhookProcess` and runs `run()` for as long as
the operator serves webhooks. It:

1. starts `python -m quotree_webhooks.worker` with one end of a Unix socket pair, sends it
   its `WorkerConfig`, the operator's `GroupBook` (Jobs and pod groups) and the engine's
   `Coverage` (wire.py), then the coverage again each time it changed and the book's
   changes (checked every `SYNC_INTERVAL` seconds on the operator's loop: a version
   counter and a change log, so nothing unchanged costs anything);
2. adds the answers the worker reports to the operator's metrics (`state.on_answer`);
3. sets `serving` once the worker listens, so the configurations are written after that;
4. when the worker exits, logs one line with its exit status and starts another after
   `RESTART_DELAY` seconds, doubling up to `RESTART_DELAY_MAX` while it keeps dying
   within `STABLE_AFTER` seconds (docs/webhooks.md, "The webhook process").

When `run()` is cancelled (the operator stops), the channel is closed, which stops the
worker; it is killed if it has not exited `STOP_GRACE` seconds later.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from quotree_webhooks import fastpath
from quotree_webhooks.decisions import PodMutation
from quotree_webhooks.settings import WebhookState
from quotree_webhooks.wire import WorkerConfig, read_message, write_message

__all__ = ["WebhookProcess", "exit_status"]

logger = logging.getLogger("quotree.webhooks")

SYNC_INTERVAL = 0.02
RESTART_DELAY = 1.0
RESTART_DELAY_MAX = 30.0
#: A worker that served this long before it exited is restarted after `RESTART_DELAY` again.
STABLE_AFTER = 60.0
STOP_GRACE = 5.0


def exit_status(code: int | None) -> str:
    """`exit code 1` or `killed by SIGKILL`, for the log line."""
    if code is None:
        return "unknown exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class WebhookProcess:
    """Supervises the webhook process; see module docstring."""

    def __init__(self, state: WebhookState, config: WorkerConfig) -> None:
        self.state = state
        self.config = config
        #: Set while a worker listens.
        self.serving = asyncio.Event()
        #: The running worker's process id (None between workers).
        self.pid: int | None = None
        #: How many times a worker was started.
        self.starts = 0
        self._writer: asyncio.StreamWriter | None = None

    async def run(self) -> None:
        delay = RESTART_DELAY
        while True:
            started = time.monotonic()
            code = await self._run_once()
            if time.monotonic() - started >= STABLE_AFTER:
                delay = RESTART_DELAY
            logger.error(
                "webhooks: the webhook process exited (%s); starting another in %.0fs; "
                "until then the API server cannot reach quotree's webhooks",
                exit_status(code),
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_DELAY_MAX)

    async def reload_certificates(self) -> None:
        """Tell the running worker that the serving certificate files changed."""
        if self._writer is not None:
            with suppress(OSError):
                await write_message(self._writer, "reload-certs")

    async def _run_once(self) -> int | None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        # The worker imports the same packages from wherever this process found them.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "quotree_webhooks.worker",
                str(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                env=env,
            )
        except OSError as exc:
            ours.close()
            logger.error("webhooks: cannot start the webhook process: %s", exc)
            return None
        finally:
            theirs.close()
        self.pid = proc.pid
        self.starts += 1
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        self._writer = writer
        tasks = [
            asyncio.create_task(self._feed(writer)),
            asyncio.create_task(self._listen(reader, writer)),
        ]
        try:
            await proc.wait()
            return proc.returncode
        finally:
            self.serving.clear()
            self._writer = None
            self.pid = None
            writer.close()  # the worker stops when its channel closes
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if proc.returncode is None:
                try:
                    await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE)
                except (TimeoutError, asyncio.CancelledError):
                    with suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()

    async def _feed(self, writer: asyncio.StreamWriter) -> None:
        """The configuration and the Jobs and pod groups, then the engine's coverage each
        time it changed, and the changes of the Jobs and groups."""
        book = self.state.groups
        try:
            await write_message(writer, "config", self.config)
            await write_message(writer, "groups", book.copy())
            sent: tuple[int, int] | None = None
            admitting = False
            leader: str | None = None
            while True:
                coverage = self.state.engine.coverage
                current = (id(coverage), coverage.version)
                if current != sent:
                    await write_message(writer, "coverage", coverage)
                    sent = current
                now = self.state.admitting is not None and self.state.admitting()
                if now != admitting:
                    await write_message(writer, "admit", now)
                    admitting = now
                where = self.state.leader_address() if self.state.leader_address else None
                if where != leader:
                    await write_message(writer, "leader", where)
                    leader = where
                if book.changed:
                    await write_message(writer, "group-changes", *book.take_changes())
                await asyncio.sleep(SYNC_INTERVAL)
        except (OSError, RuntimeError):
            return  # the worker is gone; run() sees it exit

    async def _listen(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        report = self.state.on_answer
        try:
            while True:
                message = await read_message(reader)
                if message[0] == "serving":
                    self.serving.set()
                elif message[0] == "answers" and report is not None:
                    for webhook, seconds, error in message[1]:
                        report(webhook, seconds, error)
                elif message[0] == "admit-at-create":
                    answers = [
                        (rid, self.decide(ns, pod, until)) for rid, ns, pod, until in message[1]
                    ]
                    await write_message(writer, "admitted", answers)
        except (asyncio.IncompleteReadError, OSError, ValueError):
            return

    def decide(self, namespace: str, pod: Mapping[str, Any], until: float) -> PodMutation | None:
        """A pod CREATE the worker would gate, decided by the engine, which admits it if it
        fits now (admit_at_create.py); None once the worker stopped waiting (`until`, on
        the monotonic clock both processes share): it reserves nothing and the worker gates
        the pod. An unexpected error is logged and None too: the pod is created gated, and
        the decision loop takes it in as any other."""
        if time.monotonic() >= until:
            return None
        state = self.state
        try:
            return fastpath.decide(
                state.engine,
                self.config.never_gated,
                pod,
                namespace,
                state.groups,
                admit=state.admit,
            )
        except Exception:
            logger.exception("webhooks: admission at creation of a pod in %s failed", namespace)
            return None
