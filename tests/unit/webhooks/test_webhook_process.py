"""The webhook process (process.py, worker.py, wire.py), run for real without a cluster.

`WebhookProcess` starts the real `python -m quotree_webhooks.worker`; requests go to it over
HTTPS with the CA `tls.ensure_pki` made; the operator's own listener is a small aiohttp
server on an abstract Unix socket that records what was passed to it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pickle
import secrets
import signal
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from quotree import ADMISSION_GATE, QUOTA_LABEL, Engine, parse_member
from quotree.create_admission import RESERVATION_ANNOTATION, CreateAdmission
from quotree.groups import POD_GROUP_SIZE_ANNOTATION, GroupSpec, JobFacts
from quotree_webhooks import fastpath, process, tls
from quotree_webhooks.process import WebhookProcess, exit_status
from quotree_webhooks.settings import WebhookState
from quotree_webhooks.wire import WorkerConfig, read_message, write_message
from tests.unit.objects import cohort, engine_with, quota
from tests.unit.webhooks.test_webhooks import SETTINGS


def pod_review(namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": []}}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE", "object": pod},
    }


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    encoded = answer["response"].get("patch")
    return json.loads(base64.b64decode(encoded)) if encoded else []


def gated(answer: dict[str, Any]) -> bool:
    return any(
        op["path"] == "/spec/schedulingGates" and {"name": ADMISSION_GATE} in op["value"]
        for op in patch_of(answer)
    )


# ------------------------------------------------------------ the copy resolves the same


NAMESPACES = ["team-a", "team-b", "shared", "kube-system", "quotree-system", "other"]


@given(
    namespace=st.sampled_from(NAMESPACES),
    label=st.sampled_from([None, "team-a", "team-b", "ops", "nowhere"]),
    remove_b=st.booleans(),
)
def test_the_copied_coverage_answers_as_the_engine(
    namespace: str, label: str | None, remove_b: bool
) -> None:
    """What the webhook process answers from its pickled copy is the engine's own answer."""
    engine = engine_with(
        cohort("research", min={"cpu": "40"}),
        quota("team-a", "team-a", "research", min={"cpu": "20"}, namespaces=["shared"]),
        quota("team-b", "team-b", "research", min={"cpu": "20"}, namespaces=["shared"]),
        quota("ops", "ops"),
    )
    if remove_b:
        engine.remove_config("team-b", kind="ElasticQuota", namespace="team-b")
    copy = pickle.loads(pickle.dumps(engine.coverage))
    review = pod_review(namespace, {QUOTA_LABEL: label} if label else None)
    assert fastpath.mutate_pod(copy, SETTINGS.never_gated, review) == (
        fastpath.mutate_pod(engine, SETTINGS.never_gated, review)
    )


def test_the_coverage_version_moves_with_every_change() -> None:
    engine = Engine()
    versions = [engine.coverage.version]
    engine.set_config(parse_member(quota("team-a", "team-a")))
    versions.append(engine.coverage.version)
    engine.set_config(parse_member(quota("team-a", "team-a", namespaces=["x"])))
    versions.append(engine.coverage.version)
    engine.remove_config("team-a", kind="ElasticQuota", namespace="team-a")
    versions.append(engine.coverage.version)
    assert versions == sorted(set(versions)), versions


async def test_messages_cross_the_socket_pair_whole() -> None:
    one, two = socket.socketpair()
    _, writer = await asyncio.open_unix_connection(sock=one)
    reader, _ = await asyncio.open_unix_connection(sock=two)
    big = {f"ns-{i}": {f"q-{i}"} for i in range(20_000)}

    async def send() -> None:
        await write_message(writer, "coverage", big)
        await write_message(writer, "reload-certs")

    sending = asyncio.create_task(send())  # larger than the socket's buffer: read meanwhile
    assert await read_message(reader) == ("coverage", big)
    assert await read_message(reader) == ("reload-certs",)
    await sending
    writer.close()
    with pytest.raises(asyncio.IncompleteReadError):
        await read_message(reader)


def test_exit_status_lines() -> None:
    assert exit_status(-signal.SIGKILL) == "killed by SIGKILL"
    assert exit_status(1) == "exit code 1"


# ------------------------------------------------------------ the real process


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


class Operator:
    """The operator's side: its listener (recording what is passed to it) and the process."""

    def __init__(self, tmp_path: Path) -> None:
        self.engine = engine_with(quota("team-a", "team-a"))
        self.pki = tls.ensure_pki(tmp_path / "pki", ["127.0.0.1", "localhost"])
        self.upstream = f"\0quotree-test-{os.getpid()}-{secrets.token_hex(4)}"
        self.passed: list[str] = []
        self.counted: list[tuple[str, float, bool]] = []
        state = WebhookState(self.engine, SETTINGS)
        state.on_answer = lambda webhook, seconds, error: self.counted.append(
            (webhook, seconds, error)
        )
        self.port = free_port()
        self.process = WebhookProcess(
            state,
            WorkerConfig(
                host="127.0.0.1",
                port=self.port,
                certfile=str(self.pki.cert),
                keyfile=str(self.pki.key),
                never_gated=SETTINGS.never_gated,
                upstream=self.upstream,
            ),
        )

    async def answer(self, request: web.Request) -> web.Response:
        self.passed.append(request.path)
        review = await request.json()
        uid = review["request"]["uid"]
        status = {"code": 403, "message": "from the operator"}
        return web.json_response({"response": {"uid": uid, "allowed": False, "status": status}})

    async def post(self, path: str, review: dict[str, Any]) -> dict[str, Any]:
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"https://127.0.0.1:{self.port}{path}", json=review, ssl=context) as r,
        ):
            assert r.status == 200, await r.text()
            answer: dict[str, Any] = await r.json()
            return answer


@pytest.fixture
async def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Operator]:
    monkeypatch.setattr(process, "RESTART_DELAY", 0.2)
    op = Operator(tmp_path)
    app = web.Application()
    app.add_routes([web.post("/{id:.*}", op.answer)])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, op.upstream).start()
    task = asyncio.create_task(op.process.run())
    try:
        await asyncio.wait_for(op.process.serving.wait(), 30)
        yield op
    finally:
        pid = op.process.pid
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await runner.cleanup()
        if pid is not None:  # stopped with the supervisor: the pid is no longer running
            await until(lambda: _gone(pid), 10, "the webhook process to stop")


async def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_pod_creates_follow_the_operators_view(operator: Operator) -> None:
    answer = await operator.post("/pods-mutate", pod_review("team-a"))
    assert answer["response"]["allowed"]
    assert gated(answer)
    assert {"op": "add", "path": "/metadata/labels", "value": {QUOTA_LABEL: "team-a"}} in (
        patch_of(answer)
    )
    # team-b: no quota yet, the pod is left alone; then the operator learns of one.
    assert not gated(await operator.post("/pods-mutate", pod_review("team-b")))
    operator.engine.set_config(parse_member(quota("team-b", "team-b")))

    async def team_b_gated() -> bool:
        return gated(await operator.post("/pods-mutate", pod_review("team-b")))

    await until(team_b_gated, 5, "the webhook process to see quota team-b")
    operator.engine.remove_config("team-a", kind="ElasticQuota", namespace="team-a")

    async def team_a_free() -> bool:
        return not gated(await operator.post("/pods-mutate", pod_review("team-a")))

    await until(team_a_free, 5, "the webhook process to see quota team-a go")
    denied = await operator.post("/pods-mutate", pod_review("team-b", {QUOTA_LABEL: "nowhere"}))
    assert not denied["response"]["allowed"]
    assert (
        "ElasticQuota nowhere does not cover namespace team-b"
        in (denied["response"]["status"]["message"])
    )
    assert operator.passed == []  # all answered by the webhook process itself


async def test_other_reviews_are_passed_to_the_operator_and_everything_is_counted(
    operator: Operator,
) -> None:
    review = pod_review("team-a")
    answer = await operator.post("/cohorts-validate", review)
    assert answer["response"]["status"]["message"] == "from the operator"
    malformed = pod_review("team-a")
    malformed["request"]["object"]["metadata"] = "not a map"
    await operator.post("/pods-mutate", malformed)
    await operator.post("/pods-mutate", pod_review("team-a"))
    assert operator.passed == ["/cohorts-validate", "/pods-mutate"]

    async def counted() -> bool:
        return len(operator.counted) == 3

    await until(counted, 5, "the answers to reach the operator's metrics")
    labels = sorted(webhook for webhook, _, _ in operator.counted)
    assert labels == ["cohorts-validate", "pods-mutate", "pods-mutate"]
    assert all(seconds > 0 for _, seconds, _ in operator.counted)


async def test_a_killed_webhook_process_is_replaced(operator: Operator) -> None:
    first = operator.process.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)

    async def replaced() -> bool:
        pid = operator.process.pid
        return operator.process.serving.is_set() and pid is not None and pid != first

    await until(replaced, 20, "a new webhook process")
    assert operator.process.starts == 2
    # The new one was given the coverage before it listened.
    assert gated(await operator.post("/pods-mutate", pod_review("team-a")))


async def test_a_port_in_use_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    pki = tls.ensure_pki(tmp_path / "pki", ["127.0.0.1"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ours, theirs = socket.socketpair()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "quotree_webhooks.worker",
            str(theirs.fileno()),
            pass_fds=(theirs.fileno(),),
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        theirs.close()
        _, writer = await asyncio.open_unix_connection(sock=ours)
        config = WorkerConfig("127.0.0.1", port, str(pki.cert), str(pki.key), frozenset(), "\0x")
        await write_message(writer, "config", config)
        await write_message(writer, "coverage", Engine().coverage)
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
        writer.close()
    text = stderr.decode()
    assert proc.returncode == 1, text
    assert f"the webhook process cannot listen on 127.0.0.1:{port}" in text, text
    assert "Traceback" not in text, text


async def test_the_webhook_process_follows_the_operators_jobs_and_groups(
    operator: Operator,
) -> None:
    review = pod_review("team-a")
    review["request"]["object"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "controller": True}
    ]
    # No such Job yet: passed to the operator, which reads the Job from the API.
    first = await operator.post("/pods-mutate", review)
    assert first["response"]["status"]["message"] == "from the operator"
    assert operator.passed == ["/pods-mutate"]
    book = operator.process.state.groups
    book.set_job(JobFacts("team-a", "train", "u", parallelism=3, completions=None))

    async def grouped() -> bool:
        ops = patch_of(await operator.post("/pods-mutate", review))
        return {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {POD_GROUP_SIZE_ANNOTATION: "3"},
        } in ops

    await until(grouped, 5, "the webhook process to learn of Job train")
    book.declare("team-a/train", ("team-a", GroupSpec("train", 3, 3), 7))

    async def refused() -> bool:
        answer = await operator.post("/pods-mutate", review)
        return not answer["response"]["allowed"]

    await until(refused, 5, "the webhook process to learn what group train declared")
    book.declare("team-a/train", None)
    book.forget_job("team-a/train")

    async def forgotten() -> bool:
        answer = await operator.post("/pods-mutate", review)
        return answer["response"].get("status", {}).get("message") == "from the operator"

    await until(forgotten, 5, "the webhook process to forget Job train")


# ------------------------------------------------------------ admission at creation


async def test_while_the_operator_admits_only_pods_it_would_gate_are_asked_in_batches(
    operator: Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhook process decides each pod CREATE from its copies; only pods it would gate
    (and not a dry run) go to the operator's engine, the questions of one turn of its loop
    in one message, and the engine's answer (admitted: no gate) is what the pod gets."""
    asked: list[str] = []
    messages: list[int] = []
    real_read = process.read_message

    async def counting_read(reader: asyncio.StreamReader) -> tuple[Any, ...]:
        message = await real_read(reader)
        if message[0] == "admit-at-create":
            messages.append(len(message[1]))
        return message

    def admit(pod: Any) -> CreateAdmission | None:
        asked.append(pod["metadata"]["name"])
        if pod["metadata"]["name"].startswith("fits"):
            return CreateAdmission(f"token-{len(asked)}", "team-a", "admitted", "in-quota")
        return None

    monkeypatch.setattr(process, "read_message", counting_read)
    state = operator.process.state
    state.admit = admit
    state.admitting = lambda: True

    def named(namespace: str, name: str, dry_run: bool = False) -> dict[str, Any]:
        review = pod_review(namespace)
        review["request"]["object"]["metadata"]["name"] = name
        review["request"]["dryRun"] = dry_run
        return review

    async def probe_asked() -> bool:
        await operator.post("/pods-mutate", named("team-a", "probe"))
        return "probe" in asked

    await until(probe_asked, 5, "the webhook process to learn that the operator admits")
    asked.clear()
    messages.clear()
    answers = await asyncio.gather(
        *(operator.post("/pods-mutate", named("team-a", f"fits-{i}")) for i in range(20)),
        operator.post("/pods-mutate", named("team-a", "waits")),
        operator.post("/pods-mutate", named("other", "unmanaged")),
        operator.post("/pods-mutate", named("team-a", "fits-dry", dry_run=True)),
    )
    *fitting, waits, unmanaged, dry = answers
    for answer in fitting:
        assert not gated(answer)
        assert any(
            op["path"] == "/metadata/annotations"
            and op["value"][RESERVATION_ANNOTATION].startswith("token-")
            for op in patch_of(answer)
        ), patch_of(answer)
    assert gated(waits)
    assert gated(dry)
    assert patch_of(unmanaged) == []
    assert sorted(asked) == sorted([f"fits-{i}" for i in range(20)] + ["waits"])
    assert sum(messages) == 21
    assert len(messages) < 21, messages  # asked together, not one message each
    assert operator.passed == []
