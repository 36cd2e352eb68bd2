"""The start-up pod list read in a helper process (pod_reader.py) gives what reading it here
gives (pod_entries.py), and says so when it cannot."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec

from quotree.podfacts import facts_from_wire, facts_to_wire, pod_facts, shared_request
from quotree_operator import pod_reader
from quotree_operator.kube_errors import KubeError
from quotree_operator.listing import Lists
from quotree_operator.pod_entries import PodEntry, pod_entry
from quotree_operator.pod_reader import ListRequest, PodReader, ReaderError
from quotree_operator.podproto import MEDIA_TYPE
from quotree_webhooks import tls


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
        spec["preemptionPolicy"] = "Never"
    if i == 13:
        spec["containers"][0]["resources"]["requests"]["cpu"] = "lots"  # unreadable
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


PODS = [_pod(i) for i in range(40)]
RAW = json.dumps(
    {"kind": "PodList", "metadata": {"resourceVersion": "77"}, "items": PODS}, ensure_ascii=False
).encode()


class ListServer:
    """An HTTP server that answers the pod list as the API server would: `raw` in chunks
    of `chunk` bytes (gzipped when the client asks), cut after `cut` bytes when set, or
    refused with `status`; `proto` instead of `raw` when given and the client accepts
    protobuf. It keeps the headers it was sent."""

    def __init__(
        self, raw: bytes, *, chunk: int = 997, cut: int | None = None, proto: bytes = b""
    ) -> None:
        self.raw, self.chunk, self.cut, self.proto = raw, chunk, cut, proto
        self.status = 200
        self.headers: dict[str, str] = {}
        self.url = ""

    async def answer(self, request: web.Request) -> web.StreamResponse:
        self.headers = dict(request.headers)
        if self.status != 200:
            body = {"kind": "Status", "message": "pods is forbidden: no list for you"}
            return web.json_response(body, status=self.status)
        response = web.StreamResponse()
        raw, response.content_type = self.raw, "application/json"
        if self.proto and MEDIA_TYPE in request.headers.get("Accept", ""):
            raw, response.content_type = self.proto, MEDIA_TYPE
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            response.enable_compression(web.ContentCoding.gzip)
        await response.prepare(request)
        end = len(raw) if self.cut is None else self.cut
        for start in range(0, end, self.chunk):
            await response.write(raw[start : min(start + self.chunk, end)])
        if self.cut is not None:
            assert request.transport is not None
            request.transport.close()  # mid-answer, as a connection lost
            return response
        await response.write_eof()
        return response

    def request(self, **fields: Any) -> ListRequest:
        return ListRequest(url=self.url + "/api/v1/pods?resourceVersion=0", **fields)


@contextlib.asynccontextmanager
async def serving(server: ListServer, ssl_context: ssl.SSLContext | None = None) -> Any:
    app = web.Application()
    app.router.add_get("/api/v1/pods", server.answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()


async def _entries(request: ListRequest) -> tuple[list[PodEntry], PodReader]:
    reader = await PodReader.fetch(request)
    try:
        entries = [entry async for batch in reader.entries() for entry in batch]
    finally:
        await reader.close()
    return entries, reader


async def _read(raw: bytes, chunk: int = 997, **fields: Any) -> tuple[list[PodEntry], PodReader]:
    async with serving(ListServer(raw, chunk=chunk)) as server:
        return await _entries(server.request(**fields))


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
async def test_the_helper_reads_every_pod_as_this_process_does(encoding: str) -> None:
    headers = {"Authorization": "Bearer t0ken", "Accept-Encoding": encoding}
    async with serving(ListServer(RAW)) as server:
        entries, reader = await _entries(server.request(headers=headers))
    assert server.headers["Authorization"] == "Bearer t0ken"
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


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
async def test_the_helper_asks_for_protobuf_and_reads_it_as_the_json_form(encoding: str) -> None:
    """A real API server's answers to one list (test_podproto.py): the helper asks for
    protobuf first, and its entries are those this process reads off the JSON."""
    data = Path(__file__).parent / "data"
    listed = json.loads((data / "podlist.json").read_bytes())
    server = ListServer(b"", proto=(data / "podlist.pb").read_bytes())
    async with serving(server):
        entries, reader = await _entries(server.request(headers={"Accept-Encoding": encoding}))
    assert server.headers["Accept"] == f"{MEDIA_TYPE}, application/json"
    assert entries == [pod_entry(body) for body in listed["items"]]
    assert reader.fields == {"metadata": listed["metadata"]}


async def test_a_protobuf_answer_cut_short_is_a_call_without_answer() -> None:
    proto = (Path(__file__).parent / "data" / "podlist.pb").read_bytes()
    async with serving(ListServer(b"", proto=proto[:-100])) as server:
        with pytest.raises(KubeError) as caught:
            await _entries(server.request(headers={}))
    assert caught.value.status == 0
    assert str(caught.value) == "list pods: the protobuf answer ended before its list did"


async def test_the_helper_checks_the_server_as_the_client_would(tmp_path: Path) -> None:
    """The CA, the client certificate and the name the server's certificate is for."""
    now = dt.datetime.now(dt.UTC)
    ca_key, key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = tls.build_ca("test-ca", ca_key, now, 1)
    files = {
        "ca.crt": tls.cert_pem(ca),
        "server.crt": tls.cert_pem(
            tls.build_cert(ca, ca_key, key, common_name="api", now=now, days=1, hosts=["kube.test"])
        ),
        "server.key": tls.key_pem(key),
        "client.crt": tls.cert_pem(
            tls.build_cert(ca, ca_key, client_key, common_name="quotree", now=now, days=1)
        ),
        "client.key": tls.key_pem(client_key),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=tmp_path / "ca.crt")
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.verify_mode = ssl.CERT_REQUIRED  # the client must show its certificate
    tls_files = {
        "headers": {},
        "ca_file": str(tmp_path / "ca.crt"),
        "cert_file": str(tmp_path / "client.crt"),
        "key_file": str(tmp_path / "client.key"),
    }
    async with serving(ListServer(RAW), context) as server:
        entries, _ = await _entries(server.request(server_name="kube.test", **tls_files))
        assert len(entries) == len(PODS)
        # The certificate is for kube.test, not 127.0.0.1: without the name, refused.
        with pytest.raises(KubeError) as caught:
            await _entries(server.request(**tls_files))
    assert caught.value.status == 0
    assert "list pods: SSLCertVerificationError" in str(caught.value)


def test_facts_cross_between_processes_unchanged() -> None:
    for body in PODS:
        if body["metadata"]["name"] == "p13":
            continue
        facts = pod_facts(body)
        again = facts_from_wire(facts_to_wire(facts))
        assert again == facts
        assert again.key == facts.key


async def test_a_list_that_ends_early_is_a_call_without_answer_naming_it() -> None:
    """A whole HTTP answer that is not one list is the answer's fault, not the helper's."""
    for cut in (len(RAW) - 300, len(RAW) - 1, 200):
        with pytest.raises(KubeError) as caught:
            await _read(RAW[:cut], 4096, headers={})
        assert caught.value.status == 0
        assert str(caught.value).startswith("list pods: the list "), cut


async def test_an_answer_cut_on_the_way_is_a_call_without_answer() -> None:
    async with serving(ListServer(RAW, chunk=500, cut=len(RAW) // 2)) as server:
        with pytest.raises(KubeError) as caught:
            await _entries(server.request(headers={"Accept-Encoding": "identity"}))
    assert caught.value.status == 0
    assert str(caught.value).startswith("list pods: IncompleteRead")


async def test_a_refused_list_is_the_api_servers_status_and_message() -> None:
    server = ListServer(RAW)
    server.status = 403
    async with serving(server):
        with pytest.raises(KubeError) as caught:
            await _entries(server.request(headers={}))
    assert caught.value.status == 403
    assert str(caught.value) == "list pods: 403 pods is forbidden: no list for you"


async def test_no_api_server_is_a_call_without_answer() -> None:
    async with serving(ListServer(RAW)) as server:
        request = server.request(headers={})  # its port, closed once the server is gone
    with pytest.raises(KubeError) as caught:
        await _entries(request)
    assert caught.value.status == 0
    assert "ConnectionRefusedError" in str(caught.value)


async def test_a_helper_that_dies_is_an_error_with_its_exit_status() -> None:
    async with serving(ListServer(RAW)) as server:
        reader = await PodReader.fetch(server.request(headers={}))
        reader._process.kill()
        with pytest.raises(ReaderError, match="exit status -9"):
            async for _ in reader.entries():
                pass
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
    """A client whose list calls answer `response` in this process, and which a helper
    asks `server` (None: no helper can make its call)."""

    def __init__(self, response: Response, server: ListServer | None = None) -> None:
        self.core = FakeCore()
        self.response = response
        self.server = server

    async def call_raw(self, what: str, coro: Any) -> Any:
        return self.response

    async def list_request(self, target: str) -> ListRequest | None:
        if self.server is None:
            return None
        assert target.startswith("/api/v1/pods?")
        return self.server.request(headers={})


@pytest.mark.parametrize("in_helper", [True, False])
async def test_the_start_up_list_gives_the_same_entries_and_version(in_helper: bool) -> None:
    async with serving(ListServer(RAW)) as server:
        lists = StreamedLists(Response(RAW), server)
        lists.pod_reader = in_helper
        batches = [batch async for batch in lists.list_pod_entries()]
    assert [e for entries, _ in batches for e in entries] == [pod_entry(b) for b in PODS]
    assert batches[-1][1] == "77"
    assert bool(server.headers) is in_helper  # the helper made the call, or this process
    assert lists.response.closed is not in_helper


async def test_a_call_only_this_process_can_make_is_made_here() -> None:
    """A proxy (connection.list_request gives no request): the list is read here."""
    lists = StreamedLists(Response(RAW), server=None)
    entries = [e async for batch, _ in lists.list_pod_entries() for e in batch]
    assert entries == [pod_entry(b) for b in PODS]
    assert lists.response.closed


async def test_a_helper_that_cannot_start_leaves_the_reading_to_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def no_helper(request: ListRequest) -> PodReader:
        raise OSError("no python here")

    monkeypatch.setattr(pod_reader.PodReader, "fetch", staticmethod(no_helper))
    async with serving(ListServer(RAW)) as server:
        lists = StreamedLists(Response(RAW), server)
        entries = [e async for batch, _ in lists.list_pod_entries() for e in batch]
    assert entries == [pod_entry(b) for b in PODS]
    assert not server.headers


async def test_an_answer_cut_on_the_way_here_is_a_call_without_answer_naming_the_cut() -> None:
    lists = StreamedLists(Response(RAW, cut=len(RAW) // 2), server=None)
    with pytest.raises(KubeError) as caught:
        async for _ in lists.list_pod_entries():
            pass
    assert caught.value.status == 0
    assert "list pods: ClientPayloadError" in str(caught.value)
    assert lists.response.closed


async def test_a_helper_that_stops_on_its_own_leaves_the_next_lists_to_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def failing_helper(request: ListRequest) -> PodReader:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import sys; print('out of memory', file=sys.stderr); sys.exit(3)",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return PodReader(process)

    monkeypatch.setattr(pod_reader.PodReader, "fetch", staticmethod(failing_helper))
    monkeypatch.setattr(Lists, "reader_failed", False)
    async with serving(ListServer(RAW)) as server:
        lists = StreamedLists(Response(RAW), server)
        with pytest.raises(KubeError) as caught:
            async for _ in lists.list_pod_entries():
                pass
        assert caught.value.status == 0
        assert "exit status 3): out of memory" in str(caught.value)
        assert Lists.reader_failed
        again = StreamedLists(Response(RAW), server)
        entries = [e async for batch, _ in again.list_pod_entries() for e in batch]
    assert entries == [pod_entry(b) for b in PODS]


async def test_a_helper_that_fails_says_why_in_one_line() -> None:
    raw = b'{"items": [{"spec": {}}], "metadata": {}}'  # an item no API server sends
    with pytest.raises(ReaderError) as caught:
        await _read(raw, 7, headers={})
    assert str(caught.value).endswith("(exit status 1): KeyError: 'metadata'")
