"""The start-up pod list asked for and read in a helper process, beside the operator's own.

Why a module of its own: at start-up the operator lists every pod in one answer (about
100 MB of JSON or 57 MB of protobuf at 30,000 pods, listing.py). Receiving it, parsing it
and reading each body into facts took more of the operator's CPU than anything else
before it could admit (bench/RESULTS.md), and none of it needs the engine. So a second
process does all of it, on the machine's other core: the operator hands it the request
(`ListRequest`: the URL, the headers with the credentials, the TLS files), the helper
sends it to the API server itself, asking for protobuf first (the API server writes it
in about half the time, and it reads here in about half the CPU: podproto.py), parses the
answer as it arrives (`podproto.ProtoListStream`, or `liststream.ListStream` when the
answer is JSON), reads each pod
(`pod_entries.pod_entry`) and sends the entries back in batches as plain tuples
(`entry_to_wire`), which cost the operator a fraction of the parse to take in. The
operator takes them in order while the rest of the list is still on its way, and reads
its quota objects meanwhile without holding the pods' bytes up.

The helper is `python -m quotree_operator.pod_reader`: stdin the pickled `ListRequest`,
stdout frames of 4 bytes of length and a pickle: a batch (a list of wire entries), then
the list's top-level fields (`("end", fields)`); `("error", message)` when the answer is
not one list, `("refused", status, body)` when the API server refused the call, and
`("failed", 0, message)` when it did not answer (or not wholly).
It uses the standard library's HTTP client only, and exits at the end of the list.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http.client
import importlib
import os
import pickle
import ssl
import sys
import zlib
from collections.abc import AsyncGenerator, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit

from quotree_operator.kube_errors import KubeError, refused
from quotree_operator.liststream import BLOCK, ListStream
from quotree_operator.podproto import MEDIA_TYPE, ProtoListStream

if TYPE_CHECKING:
    from quotree_operator.pod_entries import PodEntry

__all__ = ["ListRequest", "PodReader", "ReaderError"]

#: Entries sent back together at most.
BATCH = 500
_LENGTH = 4
# _LATE: reading pods imports the engine (about 0.7 s), which the helper does only once
# its request is out, so that the API server works on the answer meanwhile.
_LATE = "quotree_operator.pod_entries"
#: Protobuf first: the API server writes it in about half the time of JSON, and it reads
#: here in about half the CPU (podproto.py); JSON from a server that offers only that.
ACCEPT = f"{MEDIA_TYPE}, application/json"


class ReaderError(Exception):
    """The helper stopped without reading the list to its end (the message says why)."""


@dataclass(frozen=True)
class ListRequest:
    """What the helper needs to ask for the list as the operator's client would
    (connection.list_request builds it from the client's configuration)."""

    url: str
    headers: dict[str, str]
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    #: The name the server's certificate is checked against, when not the URL's host.
    server_name: str | None = None
    #: False: the certificates need not follow RFC 5280 to the letter (the client's
    #: `disable_strict_ssl_verification`).
    strict: bool = True
    #: Seconds any one read may wait for the API server.
    timeout: float = 600


class PodReader:
    """One helper process, for one list: take the entries from `entries()`."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        #: The list's top-level fields (its `metadata`), once the helper has sent them.
        self.fields: dict[str, Any] = {}

    @classmethod
    async def fetch(cls, request: ListRequest) -> PodReader:
        """Start the helper on `request` (OSError when it cannot be started)."""
        env = dict(os.environ)
        # The helper imports what this process imports, from where this process found it.
        env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "quotree_operator.pod_reader",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        stdin = process.stdin
        assert stdin is not None
        stdin.write(pickle.dumps(asdict(request), protocol=pickle.HIGHEST_PROTOCOL))
        stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await stdin.wait_closed()  # the helper may have stopped: `entries()` says why
        return cls(process)

    async def entries(self) -> AsyncGenerator[list[PodEntry], None]:
        """The pods' entries, a batch at a time, in the list's order. KubeError when the
        call failed or its answer is not one list, ReaderError when the helper stops
        early. `fields` is set once the last batch is out."""
        from quotree_operator.pod_entries import entry_from_wire  # noqa: PLC0415 (_LATE)

        stdout = self._process.stdout
        assert stdout is not None
        while True:
            try:
                head = await stdout.readexactly(_LENGTH)
                message = pickle.loads(await stdout.readexactly(int.from_bytes(head, "little")))
            except asyncio.IncompleteReadError:
                raise ReaderError(await self._stopped()) from None
            if isinstance(message, list):
                yield [entry_from_wire(wire) for wire in message]
                continue
            if message[0] == "refused":
                _, status, body = message
                raise refused("list pods", status, body)
            if message[0] == "failed":
                raise KubeError(0, f"list pods: {message[2]}")
            if message[0] == "error":  # the answer, not the helper: as one cut on the way
                raise KubeError(0, f"list pods: {message[1]}")
            self.fields = message[1]
            return

    async def _stopped(self) -> str:
        """Why the helper stopped before its end: its exit status and last line."""
        stderr = self._process.stderr
        text = (await stderr.read()).decode(errors="replace") if stderr is not None else ""
        code = await self._process.wait()
        lines = [line for line in text.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else "no message"
        return f"the pod list reader stopped (exit status {code}): {last}"

    async def close(self) -> None:
        """Stop the helper if it still runs, and wait for it."""
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        await self._process.wait()


# ---------------------------------------------------------------------------- the helper


def _send(out: BinaryIO, message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(_LENGTH, "little"))
    out.write(data)


def serve(blocks: Iterable[bytes], out: BinaryIO, *, proto: bool = False) -> None:
    """Parse a list's bytes (JSON, or protobuf when `proto`), block by block, and write its
    entries to `out`."""
    from quotree_operator.pod_entries import entry_to_wire, pod_entry  # noqa: PLC0415 (_LATE)

    stream = ProtoListStream() if proto else ListStream()
    batch: list[tuple[Any, ...]] = []

    def take(items: list[Any]) -> None:
        for item in items:
            batch.append(entry_to_wire(pod_entry(item)))
            if len(batch) >= BATCH:
                _send(out, batch)
                batch.clear()

    try:
        for block in blocks:
            take(stream.feed(block))
            if batch:  # what this block completed goes on at once
                _send(out, batch)
                batch.clear()
        take(stream.close())
    except ValueError as exc:  # not one list (cut short, or not JSON)
        _send(out, ("error", str(exc)))
    else:
        if batch:
            _send(out, batch)
        _send(out, ("end", stream.fields))
    out.flush()


class _Connection(http.client.HTTPSConnection):
    """HTTPS whose certificate is checked against `server_name` when one is given."""

    def __init__(self, request: ListRequest, host: str, port: int | None) -> None:
        super().__init__(host, port, timeout=request.timeout, context=_context(request))
        self.server_name = request.server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        context: ssl.SSLContext = self._context  # type: ignore[attr-defined]
        self.sock = context.wrap_socket(self.sock, server_hostname=self.server_name or self.host)


def _context(request: ListRequest) -> ssl.SSLContext:
    """The TLS settings kubernetes_asyncio's client makes of the same configuration."""
    context = ssl.create_default_context(cafile=request.ca_file)
    if request.cert_file:
        context.load_cert_chain(request.cert_file, keyfile=request.key_file)
    if not request.strict:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    if not request.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _ask(request: ListRequest, accept: str = ACCEPT) -> http.client.HTTPConnection:
    """The connection, with the request sent (asking for `accept`)."""
    url = urlsplit(request.url)
    connection: http.client.HTTPConnection
    if url.scheme == "https":
        connection = _Connection(request, url.hostname or "", url.port)
    else:
        connection = http.client.HTTPConnection(
            url.hostname or "", url.port, timeout=request.timeout
        )
    target = url.path + (f"?{url.query}" if url.query else "")
    headers = {**request.headers, "Accept": accept}
    connection.request("GET", target, headers=headers)
    return connection


def _decoded(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The answer's body in blocks, gunzipped when it came compressed."""
    gzipped = (response.getheader("Content-Encoding") or "").lower() == "gzip"
    inflate = zlib.decompressobj(wbits=31) if gzipped else None
    while chunk := response.read(BLOCK if inflate is None else BLOCK // 8):
        yield chunk if inflate is None else inflate.decompress(chunk)
    if inflate is not None:
        yield inflate.flush()


def _refusal(response: http.client.HTTPResponse) -> bytes:
    """A refusal's body (its Status), for `kube_errors.refused` to word."""
    body = response.read(1 << 16)
    with contextlib.suppress(ValueError, zlib.error):
        if (response.getheader("Content-Encoding") or "").lower() == "gzip":
            body = zlib.decompress(body, wbits=31)
    return body


def fetch(request: ListRequest, out: BinaryIO) -> None:
    """The helper: ask for the list, parse it as it arrives, write its entries to `out`."""
    try:
        connection = _ask(request)
        importlib.import_module(_LATE)  # while the API server answers
        response = connection.getresponse()
        if response.status != 200:
            _send(out, ("refused", response.status, _refusal(response)))
        else:
            kind = (response.getheader("Content-Type") or "").split(";")[0].strip()
            serve(_decoded(response), out, proto=kind == MEDIA_TYPE)
    except (OSError, http.client.HTTPException, zlib.error) as exc:  # no (whole) answer
        _send(out, ("failed", 0, f"{type(exc).__name__}: {exc}"))
    out.flush()


def main() -> None:
    # Nothing here is a cycle, and every body goes as soon as it is read: the collector's
    # passes would only walk the parse (collector.py says the same of the operator's load).
    gc.disable()
    try:
        fetch(ListRequest(**pickle.load(sys.stdin.buffer)), sys.stdout.buffer)
    except Exception as exc:  # one line for the operator's error (`PodReader.entries`)
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
