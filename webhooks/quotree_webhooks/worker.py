"""The webhook process: quotree's HTTPS webhook endpoint, off the operator's event loop.

Why a process of its own: every pod created in a managed namespace waits for the pod
CREATE review. Served from the operator's process, that answer queued behind the
operator's own watch handling and admission writes on one event loop, and under one
GIL (bench/RESULTS.md, the webhooks' burst). This process answers it with its own loop
and interpreter; the operator starts and supervises it (process.py, docs/webhooks.md).

What it answers itself: the pod CREATE review (`/pods-mutate`, also called for the
unlabelled namespaces), with `fastpath.mutate_pod`, the same decision function the
operator's engine uses, over a copy of the engine's `Coverage` (namespace -> the quotas
covering it: all `Engine.resolve` reads) and of the operator's `GroupBook` (the Jobs and
what each pod group declared: a Job's pods get their group, a pod that disagrees with
its group is refused), which the operator sends whenever they change.
Admission at creation (admit_at_create.py): while the operator leads, this process still
decides each pod CREATE from its copies, and asks the operator's engine (over the channel,
the questions of one turn of its loop in one message) about the pods it would gate; the
engine decides again and admits a pod that fits now. Pods no quota covers, and dry runs,
are never asked. While another replica leads, the reviews are passed to that replica's
webhook process (its address is on the Lease), which does the same with its operator. A
review passed on is never passed on again, and one that gets no answer in time is answered
here, the pod gated: a pod is only ever admitted at creation by the Lease holder's engine.
Everything else (Cohort and ElasticQuota reviews, which read the whole tree, the pods
admitted and recently allowed objects; pod UPDATE and namespace reviews; a review Kopf
must answer because its object is malformed) is passed, as received, to the operator's
own listener on a Unix socket, and its answer returned as it is.

It counts each request it answers (webhook, seconds, error) and sends them to the
operator in batches, which adds them to the operator's /metrics. It exits when the
operator's end of the channel closes, and is killed by the kernel when the operator dies
(PR_SET_PDEATHSIG), so it never serves with a view nobody updates.

Run as `python -m quotree_webhooks.worker FD`, FD being its end of the socket pair.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import aiohttp.web

from quotree.group_book import GroupBook
from quotree.resolution import Coverage
from quotree_webhooks import fastpath
from quotree_webhooks.configurations import METRIC_WEBHOOKS, PODS_MUTATE
from quotree_webhooks.decisions import PodMutation
from quotree_webhooks.pod_groups import job_unknown
from quotree_webhooks.wire import WorkerConfig, read_message, send_message, write_message

__all__ = ["Worker", "main"]

logger = logging.getLogger("quotree.webhooks")

#: Seconds between two batches of answers sent to the operator (its metrics lag that much).
REPORT_INTERVAL = 0.25
#: The operator's listener must answer within the API server's webhook timeout.
UPSTREAM_TIMEOUT = 10.0
#: ... and the engine's decision on a pod asked for admission at creation well within it
#: (5 s, the Fail webhook's; 2 s, the unlabelled namespaces'): else this process gates it.
ADMIT_TIMEOUT = 1.0
#: A pod CREATE passed on to the replica that admits at creation: its answer within this
#: long (its own passing on to its operator included), else this process gates the pod.
LEADER_TIMEOUT = 1.5
#: After the leader did not answer, seconds this process gates pods before asking again.
LEADER_RETRY = 2.0
#: The header on a review passed on to the leader: it is never passed on again.
PASSED_ON = "X-Quotree-Passed-On"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask the kernel to kill this process when the operator dies (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the closed channel still stops it


class Worker:
    """One webhook process: the channel to the operator, the coverage, the HTTPS server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.config: WorkerConfig | None = None
        self.coverage: Coverage | None = None
        #: The operator's Jobs and pod-group declarations, as last sent.
        self.groups = GroupBook()
        self.context: ssl.SSLContext | None = None
        self.answers: list[tuple[str, float, bool]] = []
        #: The operator admits at creation now (it leads): pod CREATE reviews go to it.
        self.admitting = False
        #: Where the replica that admits at creation answers, when it is another one.
        self.leader: str | None = None
        self.leader_session: aiohttp.ClientSession | None = None
        #: While the leader did not answer: pods are gated here until then (monotonic).
        self.leader_down_until = 0.0
        #: Pods asked of the operator (ask_operator): to send this turn, and unanswered.
        self.questions: list[tuple[int, str, Mapping[str, Any], float]] = []
        self.waiting: dict[int, asyncio.Future[PodMutation | None]] = {}
        self.asked = 0
        self.session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------ requests

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        started = time.perf_counter()
        webhook = request.match_info.get("id", "")
        error = True
        try:
            body = await request.read()
            response = None
            if webhook == PODS_MUTATE and self.admitting:
                response = await self.admit(body)
            elif (
                webhook == PODS_MUTATE
                and self.leader
                and PASSED_ON not in request.headers
                and time.monotonic() >= self.leader_down_until
            ):
                response = await self.ask_leader(self.leader, body)
            if webhook == PODS_MUTATE and response is None:
                response = self.mutate(body)
            if response is None:
                response = await self.forward(request, body)
            error = fastpath.answer_is_error(response.status, response.body)  # type: ignore[arg-type]
            return response
        finally:
            label = webhook if webhook in METRIC_WEBHOOKS else "other"
            self.answers.append((label, time.perf_counter() - started, error))

    def mutate(self, body: bytes) -> aiohttp.web.Response | None:
        """The pod CREATE review answered here; None: the operator's Kopf path answers it."""
        assert self.config is not None
        assert self.coverage is not None
        try:
            review = json.loads(body)
        except ValueError:
            return None
        if not isinstance(review, dict):
            return None
        answer = fastpath.mutate_pod(self.coverage, self.config.never_gated, review, self.groups)
        if answer is None:
            return None
        return aiohttp.web.Response(
            body=json.dumps(answer).encode(), content_type="application/json"
        )

    async def admit(self, body: bytes) -> aiohttp.web.Response | None:
        """The pod CREATE review while the operator admits at creation (admit_at_create.py).
        Decided here first, from the copies; a pod that would be gated (and is not a dry
        run) is asked of the operator, whose engine decides again and admits it if it fits
        now. Without its answer in time the pod is gated here. None: Kopf's path answers."""
        assert self.config is not None
        assert self.coverage is not None
        try:
            review = json.loads(body)
        except ValueError:
            return None
        if not isinstance(review, dict):
            return None
        read = fastpath.read_review(review)
        if read is None:
            return None
        if not read.namespace:
            return self.respond(read.answer)
        if job_unknown(self.groups, read.pod, read.namespace) is not None:
            return None  # a Job not seen yet: Kopf's path reads it
        try:
            mutation = fastpath.decide(
                self.coverage, self.config.never_gated, read.pod, read.namespace, self.groups
            )
        except Exception as exc:
            return self.respond(fastpath.failed(read, exc))
        if fastpath.wants_admission(mutation) and not read.dry_run:
            decided = await self.ask_operator(read.namespace, read.pod)
            if decided is not None:
                mutation = decided
        return self.respond(fastpath.finish(read, mutation))

    @staticmethod
    def respond(answer: dict[str, Any]) -> aiohttp.web.Response:
        return aiohttp.web.Response(
            body=json.dumps(answer).encode(), content_type="application/json"
        )

    async def ask_operator(self, namespace: str, pod: Mapping[str, Any]) -> PodMutation | None:
        """The operator's decision on a pod this process would gate; None when it does not
        come within ADMIT_TIMEOUT. The questions asked in one turn of the loop go in one
        message, and their answers come back in one (`flush`, `answered`)."""
        loop = asyncio.get_running_loop()
        self.asked += 1
        rid = self.asked
        future: asyncio.Future[PodMutation | None] = loop.create_future()
        self.waiting[rid] = future
        if not self.questions:
            loop.call_soon(self.flush)
        # The operator answers nothing past this (the clock is the machine's, shared).
        self.questions.append((rid, namespace, pod, time.monotonic() + ADMIT_TIMEOUT))
        try:
            return await asyncio.wait_for(future, ADMIT_TIMEOUT)
        except TimeoutError:
            logger.warning(
                "webhooks: the operator did not decide a pod of %s within %.1fs; it is gated",
                namespace,
                ADMIT_TIMEOUT,
            )
            return None
        finally:
            self.waiting.pop(rid, None)

    def flush(self) -> None:
        """Send the questions of this turn of the loop as one message."""
        batch, self.questions = self.questions, []
        if batch:
            send_message(self.writer, "admit-at-create", batch)

    def answered(self, answers: list[tuple[int, PodMutation | None]]) -> None:
        for rid, mutation in answers:
            future = self.waiting.get(rid)
            if future is not None and not future.done():
                future.set_result(mutation)

    async def ask_leader(self, address: str, body: bytes) -> aiohttp.web.Response | None:
        """The pod CREATE review answered by the replica that admits at creation (the
        Lease holder, at `address`); None when it does not answer in time: this process
        answers, gating the pod. Its certificate is checked against the webhook CA (the
        replicas share it), not against a host name: it is reached by its pod's IP."""
        assert self.config is not None
        if self.leader_session is None:
            context = ssl.create_default_context(cafile=self.config.cafile or None)
            context.check_hostname = False
            self.leader_session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=context),
                timeout=aiohttp.ClientTimeout(total=LEADER_TIMEOUT),
            )
        headers = {"Content-Type": "application/json", PASSED_ON: "1"}
        try:
            async with self.leader_session.post(
                f"https://{address}/{PODS_MUTATE}", data=body, headers=headers
            ) as answer:
                if answer.status != 200:
                    return None
                return aiohttp.web.Response(
                    body=await answer.read(), content_type=answer.content_type
                )
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            if time.monotonic() >= self.leader_down_until:
                logger.warning(
                    "webhooks: the leader at %s did not answer (%s); gating pods here for "
                    "%.0fs before asking it again",
                    address,
                    exc,
                    LEADER_RETRY,
                )
            self.leader_down_until = time.monotonic() + LEADER_RETRY
            return None

    async def forward(self, request: aiohttp.web.Request, body: bytes) -> aiohttp.web.Response:
        """Pass a review to the operator's own listener and return its answer."""
        assert self.session is not None
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        try:
            async with self.session.post(
                f"http://quotree{request.path}", data=body, headers=headers
            ) as upstream:
                return aiohttp.web.Response(
                    status=upstream.status,
                    body=await upstream.read(),
                    content_type=upstream.content_type,
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            logger.error("webhooks: the operator did not answer %s: %s", request.path, exc)
            return aiohttp.web.Response(status=503, text="quotree operator not answering")

    # ------------------------------------------------------------ channel

    def load_certificate(self) -> None:
        assert self.config is not None
        if self.context is None:
            self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        # New handshakes use the new chain; open connections keep theirs.
        self.context.load_cert_chain(self.config.certfile, self.config.keyfile)

    async def report(self) -> None:
        while True:
            await asyncio.sleep(REPORT_INTERVAL)
            if self.answers:
                batch, self.answers = self.answers, []
                await write_message(self.writer, "answers", batch)

    async def serve(self) -> None:
        config = self.config
        assert config is not None
        self.load_certificate()
        connector = aiohttp.UnixConnector(path=config.upstream)
        self.session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=UPSTREAM_TIMEOUT)
        )
        app = aiohttp.web.Application()
        app.add_routes([aiohttp.web.post("/{id:.*}", self.handle)])
        runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = aiohttp.web.TCPSite(
            runner, config.host or None, config.port, ssl_context=self.context, reuse_address=True
        )
        try:
            await site.start()
        except OSError as exc:
            logger.error(
                "webhooks: the webhook process cannot listen on %s:%d: %s",
                config.host,
                config.port,
                exc.strerror or exc,
            )
            raise SystemExit(1) from None
        logger.info(
            "webhooks: the webhook process %d serves %s:%d", os.getpid(), config.host, config.port
        )
        await write_message(self.writer, "serving")

    async def run(self) -> None:
        reporter: asyncio.Task[None] | None = None
        try:
            while True:
                try:
                    message = await read_message(self.reader)
                except asyncio.IncompleteReadError:
                    return  # the operator closed the channel: stop serving
                kind = message[0]
                if kind == "config":
                    self.config = message[1]
                    logging.getLogger("quotree").setLevel(self.config.log_level)
                elif kind == "groups":
                    self.groups = message[1]
                elif kind == "admit":
                    self.admitting = bool(message[1])
                elif kind == "admitted":
                    self.answered(message[1])
                elif kind == "leader":
                    self.leader = message[1]
                    self.leader_down_until = 0.0
                elif kind == "group-changes":
                    self.groups.apply(message[1], message[2])
                elif kind == "coverage":
                    self.coverage = message[1]
                    if reporter is None:
                        await self.serve()
                        reporter = asyncio.create_task(self.report())
                elif kind == "reload-certs":
                    self.load_certificate()
                    logger.info("webhooks: the webhook process loaded the renewed certificate")
        finally:
            if reporter is not None:
                reporter.cancel()
            if self.session is not None:
                await self.session.close()
            if self.leader_session is not None:
                await self.leader_session.close()


async def _main(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    await Worker(reader, writer).run()


def main(argv: list[str]) -> int:
    _die_with_parent()
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="[%(asctime)s] %(name)-20.20s [%(levelname)-8.8s] %(message)s",
    )
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m quotree_webhooks.worker FD", file=sys.stderr)
        return 2
    # Ctrl-C in a terminal reaches the whole process group: the operator stops this
    # process by closing the channel, in its own time.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(_main(int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
