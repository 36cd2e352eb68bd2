"""The start-up pod list read in a helper process, beside the operator's own.

Why a module of its own: at start-up the operator lists every pod in one answer (about
100 MB of JSON at 30,000 pods, listing.py). Parsing it and reading each body into facts
took more of the operator's CPU than anything else before it could admit (about half of
its start-up: bench/RESULTS.md), and none of it needs the engine. So a second process
does it, on the machine's other core: the operator passes the answer's bytes on as they
arrive (`PodReader.feed`), the helper parses them (`liststream.ListStream`) and reads
each pod (`pod_entries.pod_entry`), and sends the entries back in batches as plain
tuples (`entry_to_wire`), which cost the operator a fraction of the parse to take in.
The operator takes them in order while the rest of the list is still on its way.

The helper is `python -m quotree_operator.pod_reader`: stdin the list's bytes, stdout
frames of 4 bytes of length and a pickle: a batch (a list of wire entries), then the
list's top-level fields (`("end", fields)`), or `("error", message)` when the bytes are
not one list. It reads nothing else and exits at the end of its input.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import sys
from collections.abc import AsyncGenerator
from typing import Any, BinaryIO

from quotree_operator.liststream import ListStream
from quotree_operator.pod_entries import PodEntry, entry_from_wire, entry_to_wire, pod_entry

__all__ = ["PodReader", "ReaderError"]

#: Bytes the helper reads before it parses (as listing.py's blocks).
BLOCK = 1 << 20
#: Entries sent back together at most.
BATCH = 500
_LENGTH = 4


class ReaderError(Exception):
    """The helper stopped without reading the list to its end (the message says why)."""


class PodReader:
    """One helper process, for one list: `feed` it the bytes, `end()`, and take the
    entries from `entries()` meanwhile (another task's job: the pipes are bounded)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        #: The list's top-level fields (its `metadata`), once the helper has sent them.
        self.fields: dict[str, Any] = {}

    @classmethod
    async def start(cls) -> PodReader:
        """Start the helper (OSError when it cannot be)."""
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
        return cls(process)

    async def feed(self, data: bytes) -> None:
        """The next bytes of the list (waits while the helper is that far behind)."""
        stdin = self._process.stdin
        assert stdin is not None
        if stdin.is_closing():
            return  # the helper stopped: `entries()` says why
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return

    async def end(self) -> None:
        """The list's bytes are all fed."""
        stdin = self._process.stdin
        assert stdin is not None
        stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await stdin.wait_closed()  # the helper may have stopped: `entries()` says why

    async def entries(self) -> AsyncGenerator[list[PodEntry], None]:
        """The pods' entries, a batch at a time, in the list's order; ReaderError when the
        helper finds no list or stops early. `fields` is set once the last batch is out."""
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
            what, detail = message
            if what == "error":
                raise ReaderError(detail)
            self.fields = detail
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


def _send(out: BinaryIO, message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(_LENGTH, "little"))
    out.write(data)


def serve(source: BinaryIO, out: BinaryIO) -> None:
    """The helper: read a list's bytes from `source`, write its entries to `out`."""
    stream = ListStream()
    batch: list[tuple[Any, ...]] = []

    def take(items: list[Any]) -> None:
        for item in items:
            batch.append(entry_to_wire(pod_entry(item)))
            if len(batch) >= BATCH:
                _send(out, batch)
                batch.clear()

    try:
        while chunk := source.read(BLOCK):
            take(stream.feed(chunk))
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


def main() -> None:
    # Nothing here is a cycle, and every body goes as soon as it is read: the collector's
    # passes would only walk the parse (collector.py says the same of the operator's load).
    gc.disable()
    try:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    except Exception as exc:  # one line for the operator's error (`PodReader.entries`)
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
