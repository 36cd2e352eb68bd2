"""The start-up pod list read in a helper process (pod_reader.py) gives what reading it here
gives (pod_entries.py), and says so when it cannot."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from quotree.podfacts import facts_from_wire, facts_to_wire, pod_facts, shared_request
from quotree_operator import pod_reader
from quotree_operator.kube_errors import KubeError
from quotree_operator.listing import Lists
from quotree_operator.pod_entries import PodEntry, pod_entry
from quotree_operator.pod_reader import PodReader, ReaderError


def _pod(i: int) -> dict[str, Any]:
    """Pods that exercise every field the entry reads (and one unreadable pod)."""
    metadata: dict[str, Any] = {
        "name": f"p{i}",
        "namespace": f"ns-{i % 3}",
        "uid": f"uid-{i}",
        "creationTimestamp": f"2026-11-27T10:00:{i % 60:02d}Z",
    }
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{100 + i}m"}}}]
    }
    if i % 2:
        metadata["labels"] = {"app": "é" * (i % 4), "quotree.io/quota-name": "q"}
        spec["schedulingGates"] = [{"name": "quotree.io/admission"}, {"name": "other"}]
    if i % 5 == 0:
        spec["nodeSelector"] = {"pool": "gpu"}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        }
    if i % 7 == 0:
        metadata["annotations"] = {"quotree.io/pod-group-size": "3"}
        metadata.setdefault("labels", {})["quotree.io/pod-group"] = "g"
    if i % 11 == 0:
        spec["nodeName"] = "node-1"
        spec["priority"] = 1000
    if i == 13:
        spec["containers"][0]["resources"]["requests"]["cpu"] = "lots"  # unreadable
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


PODS = [_pod(i) for i in range(40)]
RAW = json.dumps(
    {"kind": "PodList", "metadata": {"resourceVersion": "77"}, "items": PODS}, ensure_ascii=False
).encode()


async def _read(raw: bytes, chunk: int) -> tuple[list[PodEntry], PodReader]:
    reader = await PodReader.start()

    async def pump() -> None:
        for start in range(0, len(raw), chunk):
            await reader.feed(raw[start : start + chunk])
        await reader.end()

    feeding = asyncio.ensure_future(pump())
    try:
        entries = [entry async for batch in reader.entries() for entry in batch]
        await feeding
    finally:
        await reader.close()
    return entries, reader


async def test_the_helper_reads_every_pod_as_this_process_does() -> None:
    entries, reader = await _read(RAW, 997)
    assert entries == [pod_entry(body) for body in PODS]
    assert reader.fields == {"kind": "PodList", "metadata": {"resourceVersion": "77"}}
    bad = entries[13]
    assert bad.facts is None
    assert "Pod ns-1/p13" in bad.problem
    assert "cpu" in bad.problem
    gated = entries[1]
    assert gated.gates == ("quotree.io/admission", "other")
    assert gated.has_labels
    assert entries[5].has_node_selector
    assert not entries[4].has_node_selector
    # The strings many pods repeat are kept once in this process, as pod_facts keeps them.
    facts = [entry.facts for entry in entries if entry.facts is not None]
    assert all(f.namespace is sys.intern(f"ns-{int(f.name[1:]) % 3}") for f in facts)
    assert all(shared_request(dict(f.request)) is f.request for f in facts)


def test_facts_cross_between_processes_unchanged() -> None:
    for body in PODS:
        if body["metadata"]["name"] == "p13":
            continue
        facts = pod_facts(body)
        again = facts_from_wire(facts_to_wire(facts))
        assert again == facts
        assert again.key == facts.key


async def test_a_list_that_ends_early_is_an_error_naming_it() -> None:
    for cut in (len(RAW) - 300, len(RAW) - 1, 200):
        with pytest.raises(ReaderError, match="the list"):
            await _read(RAW[:cut], 4096)


async def test_a_helper_that_dies_is_an_error_with_its_exit_status() -> None:
    reader = await PodReader.start()
    await reader.feed(RAW[:100])
    reader._process.kill()
    with pytest.raises(ReaderError, match="exit status -9"):
        async for _ in reader.entries():
            pass
    await reader.feed(RAW[100:200])  # feeding a stopped helper is not an error of its own
    await reader.end()
    await reader.close()


class Response:
    """An unread HTTP answer (kubernetes_asyncio, _preload_content=False), cut after
    `cut` bytes with aiohttp's own error when `cut` is set."""

    def __init__(self, raw: bytes, cut: int | None = None) -> None:
        self.raw, self.cut, self.closed = raw, cut, False
        self.content = self

    async def iter_any(self) -> AsyncIterator[bytes]:
        end = len(self.raw) if self.cut is None else self.cut
        for start in range(0, end, 500):
            yield self.raw[start : min(start + 500, end)]
        if self.cut is not None:
            raise aiohttp.ClientPayloadError("Response payload is not completed")

    def close(self) -> None:
        self.closed = True


class FakeCore:
    def list_pod_for_all_namespaces(self, **options: Any) -> dict[str, Any]:
        return options


class StreamedLists(Lists):
    def __init__(self, response: Response, *, page_size: int = 0) -> None:
        self.core = FakeCore()
        self.response = response
        self.page_size = page_size

    async def call_raw(self, what: str, coro: Any) -> Any:
        return self.response


@pytest.mark.parametrize("in_helper", [True, False])
async def test_the_start_up_list_gives_the_same_entries_and_version(in_helper: bool) -> None:
    lists = StreamedLists(Response(RAW))
    lists.pod_reader = in_helper
    batches = [batch async for batch in lists.list_pod_entries()]
    assert [e for entries, _ in batches for e in entries] == [pod_entry(b) for b in PODS]
    assert batches[-1][1] == "77"
    assert lists.response.closed


async def test_a_helper_that_cannot_start_leaves_the_reading_to_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def no_helper() -> PodReader:
        raise OSError("no python here")

    monkeypatch.setattr(pod_reader.PodReader, "start", staticmethod(no_helper))
    lists = StreamedLists(Response(RAW))
    entries = [e async for batch, _ in lists.list_pod_entries() for e in batch]
    assert entries == [pod_entry(b) for b in PODS]


async def test_an_answer_cut_on_the_way_is_a_call_without_answer_naming_the_cut() -> None:
    lists = StreamedLists(Response(RAW, cut=len(RAW) // 2))
    with pytest.raises(KubeError) as caught:
        async for _ in lists.list_pod_entries():
            pass
    assert caught.value.status == 0
    assert "list pods: ClientPayloadError" in str(caught.value)
    assert lists.response.closed


async def test_a_helper_that_stops_on_its_own_leaves_the_next_lists_to_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def failing_helper() -> PodReader:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import sys; sys.stdin.buffer.read(10); "
            "print('out of memory', file=sys.stderr); sys.exit(3)",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return PodReader(process)

    monkeypatch.setattr(pod_reader.PodReader, "start", staticmethod(failing_helper))
    monkeypatch.setattr(Lists, "reader_failed", False)
    lists = StreamedLists(Response(RAW))
    with pytest.raises(KubeError) as caught:
        async for _ in lists.list_pod_entries():
            pass
    assert "exit status 3): out of memory" in str(caught.value)
    assert Lists.reader_failed
    again = StreamedLists(Response(RAW))
    entries = [e async for batch, _ in again.list_pod_entries() for e in batch]
    assert entries == [pod_entry(b) for b in PODS]


async def test_a_helper_that_fails_says_why_in_one_line() -> None:
    raw = b'{"items": [{"spec": {}}], "metadata": {}}'  # an item no API server sends
    with pytest.raises(ReaderError) as caught:
        await _read(raw, 7)
    assert str(caught.value).endswith("(exit status 1): KeyError: 'metadata'")
