"""The operator's plain pod watch (podwatch.PodWatch over client.Kube) against a scripted API.

Resume from the list's resourceVersion, bookmarks move the version on, 410 Gone lists
again (and hands the list over), a connection cut mid-stream resumes after the last event.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from quotree_operator import podwatch
from quotree_operator.client import Kube
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.podwatch import PodWatch
from tests.unit.objects import pod


class Stream:
    def __init__(self, chunks: list[bytes], fail: BaseException | None) -> None:
        self.chunks, self.fail = chunks, fail

    async def iter_any(self) -> Any:
        for chunk in self.chunks:
            yield chunk
        if self.fail is not None:
            raise self.fail


class Response:
    status = 200

    def __init__(
        self, chunks: list[bytes] = (), fail: BaseException | None = None, body: Any = None
    ) -> None:
        if body is not None:  # a list's answer, read as it arrives
            chunks = [json.dumps(body).encode()]
        self.content = Stream(list(chunks), fail)
        self.body = body
        self.closed = False

    async def read(self) -> bytes:
        return json.dumps(self.body).encode()

    async def release(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


def event(kind: str, name: str, version: str) -> dict[str, Any]:
    obj = {"kind": "Pod", "metadata": {"name": name, "namespace": "a", "resourceVersion": version}}
    return {"type": kind, "object": obj}


def lines(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


class Core:
    """Answers list/watch calls from a script; records the versions asked for."""

    def __init__(self, script: list[Response], done: asyncio.Event) -> None:
        self.script, self.done = script, done
        self.calls: list[tuple[str, str]] = []

    async def list_pod_for_all_namespaces(self, **kwargs: Any) -> Response:
        if kwargs.get("watch"):
            self.calls.append(("watch", kwargs["resource_version"]))
        else:
            self.calls.append(("list", ""))
        if not self.script:
            self.done.set()
            await asyncio.sleep(3600)
        return self.script.pop(0)


async def test_watch_resumes_relists_on_410_and_reconnects(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(podwatch, "WATCH_BACKOFF", (0.01, 0.02))
    whole = lines(
        event("ADDED", "p1", "6"),
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "7"}}},
    )
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    script = [
        # split mid-line: events are whole lines, however the bytes arrive
        Response([whole[:15], whole[15:], lines(gone)]),
        Response(
            body={
                "metadata": {"resourceVersion": "10"},
                "items": [{"metadata": {"name": "p2", "namespace": "a"}}],
            }
        ),
        Response([lines(event("MODIFIED", "p2", "11"))], fail=ConnectionResetError("cut")),
        Response([lines(event("DELETED", "p2", "12"))]),
    ]
    done = asyncio.Event()
    kube = Kube.__new__(Kube)
    kube.core = Core(script, done)
    seen: list[tuple[str, bool]] = []
    relisted: list[list[str]] = []
    watch = PodWatch(
        kube,
        lambda body, deleted: seen.append((body["metadata"]["name"], deleted)),
        lambda bodies: relisted.append([b["metadata"]["name"] for b in bodies]),
    )
    task = asyncio.create_task(watch.run("5"))
    await asyncio.wait_for(done.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [("p1", False), ("p2", False), ("p2", True)]
    assert relisted == [["p2"]]
    # The log names it "pod watch" (people and the e2e fault tests search for it).
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("quotree")]
    assert any(m.startswith("pod watch: watch pods: ConnectionResetError") for m in logged), logged
    # the last watch ended normally and quickly: it resumes from 12 after a short wait
    assert kube.core.calls == [
        ("watch", "5"),
        ("list", ""),
        ("watch", "10"),
        ("watch", "11"),
        ("watch", "12"),
    ]


def test_relist_forgets_pods_deleted_while_the_watch_was_away() -> None:
    def ungated(name: str) -> dict[str, Any]:
        return pod("team", name, gates=None, uid=name, labels=None)

    inputs = Controller(OperatorConfig.from_env(), kube=None).inputs  # type: ignore[arg-type]
    for name in ("kept", "gone"):
        inputs.observe_pod(ungated(name), deleted=False)
    assert set(inputs.engine.pods) == {"team/kept", "team/gone"}
    inputs.relist_pods([ungated("kept"), ungated("new")])
    assert set(inputs.engine.pods) == {"team/kept", "team/new"}
    assert set(inputs.pods) == {"team/kept", "team/new"}
