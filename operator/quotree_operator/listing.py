"""How the operator lists objects: one streamed list from the API server's watch cache.

Why a module of its own: the lists decide how fast the operator starts (at 10,000 quotas
and 30,000 pods they were most of its start-up) and how much memory a pod costs, and
client.py, which only knows how to send a call, should not carry that. `Lists` is a part
of `client.Kube` (it makes its calls through `Kube.call_raw`).

A list is one request with `resourceVersion=0`: the API server answers from its watch
cache (no read of etcd) with every object at once, and `liststream.ListStream` hands
each object on as soon as it has arrived, so the caller takes objects in while the rest
are on their way and never holds more than a few bodies. A list from the watch cache may
be a moment behind etcd; the watch that follows starts from the list's resourceVersion
and brings what it missed. Paged lists (`page_size` objects a request, read from etcd
as of one snapshot) are the other way, kept for comparison and for API servers that
must not build one big answer (QUOTREE_LIST_PAGE_SIZE).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from quotree_operator.kube_errors import KubeError
from quotree_operator.liststream import BLOCK, ListStream
from quotree_operator.pod_entries import PodEntry, pod_entry
from quotree_operator.pod_reader import ListRequest, PodReader, ReaderError
from quotree_operator.resources import call_for

__all__ = ["LIST_TIMEOUT", "Lists"]

#: Seconds one list may take (tens of MiB at 30,000 pods on a busy API server).
LIST_TIMEOUT = 600
#: Items handed on together at most.
BATCH = 200

Page = tuple[list[dict[str, Any]], str]

#: A list from the API server's watch cache, its answer read as it arrives.
_STREAM_OPTIONS: dict[str, Any] = {
    "resource_version": "0",
    "resource_version_match": "NotOlderThan",
    "_preload_content": False,
    "_request_timeout": LIST_TIMEOUT,
}

#: The same list, as the path and query a helper process asks for (pod_reader.py).
_POD_LIST = "/api/v1/pods?resourceVersion=0&resourceVersionMatch=NotOlderThan"

logger = logging.getLogger("quotree.operator")


class Lists:
    """The list calls of `client.Kube`; see module docstring."""

    #: Objects per request; 0: one streamed list from the watch cache (the default).
    page_size: int = 0
    #: Read the streamed pod list in a helper process (pod_reader.py; QUOTREE_LIST_READER).
    pod_reader: bool = True
    #: The helper stopped on its own once: the process reads its lists itself from then on
    #: (a class attribute: the start-up's next attempt makes a new `Kube`).
    reader_failed: bool = False

    async def call_raw(self, what: str, coro: Any) -> Any:
        """The call's response, unread (client.Kube makes it)."""
        raise NotImplementedError

    async def list_all(self, what: str) -> list[dict[str, Any]]:
        """Every Node, Pod, Job, Cohort, ElasticQuota or ResourceFlavor, with `kind`."""
        items, _ = await self.list_with_version(what)
        return items

    async def list_with_version(self, what: str) -> Page:
        """`list_all` and the list's resourceVersion (a watch from it misses nothing)."""
        items: list[dict[str, Any]] = []
        version = ""
        async for page, page_version in self.list_pages(what):
            items.extend(page)
            version = page_version
        return items, version

    def list_pages(self, what: str) -> AsyncGenerator[Page, None]:
        """`list_with_version` a few objects at a time, each batch with the list's
        resourceVersion as known so far (the last batch's holds; it may be empty)."""
        if self.page_size > 0:
            return self._paged(what)
        return self._streamed(what)

    async def _streamed(self, what: str) -> AsyncGenerator[Page, None]:
        call, kind = call_for(self, what, dict(_STREAM_OPTIONS))
        response = await self.call_raw(f"list {what}", call)
        stream = ListStream()
        block: list[bytes] = []
        size = 0
        try:
            async for chunk in response.content.iter_any():
                block.append(chunk)
                size += len(chunk)
                if size < BLOCK:
                    continue
                text, block, size = b"".join(block), [], 0
                for batch in _batches(stream.feed(text), kind):
                    yield batch, _version(stream)
                del text
            last = stream.feed(b"".join(block)) + stream.close()
        except Exception as exc:
            # Cut or garbled on the way: as a call that got no answer (the caller lists again).
            if isinstance(exc, (ValueError, OSError, TimeoutError)) or _from_aiohttp(exc):
                raise KubeError(0, f"list {what}: {type(exc).__name__}: {exc}") from None
            raise
        finally:
            response.close()
        for batch in _batches(last, kind):
            yield batch, _version(stream)
        yield [], _version(stream)

    async def list_request(self, target: str) -> ListRequest | None:
        """The call for `target` as a helper process would make it (client.Kube knows
        how); None: only this process can make it."""
        return None

    async def list_pod_entries(self) -> AsyncGenerator[tuple[list[PodEntry], str], None]:
        """Every Pod as `pod_entries.pod_entry` reads it, a batch at a time, each batch with
        the list's resourceVersion as known so far (the last batch's holds). The streamed
        list is asked for and read by a helper process (pod_reader.py) unless `pod_reader`
        is off or the helper cannot start; pages are read here."""
        reader = None
        if self.page_size <= 0 and self.pod_reader and not Lists.reader_failed:
            request = await self.list_request(_POD_LIST)
            try:
                reader = None if request is None else await PodReader.fetch(request)
            except OSError as exc:
                logger.warning(
                    "pods are read in this process: the list reader did not start: %s", exc
                )
        if reader is None:
            async for page, version in self.list_pages("pods"):
                yield [pod_entry(body) for body in page], version
            return
        try:
            async for batch in reader.entries():
                yield batch, ""
        except ReaderError as exc:
            # The helper failed on its own, not the call: the next lists are read here.
            Lists.reader_failed = True
            logger.warning("list pods: %s; the next lists are read in this process", exc)
            raise KubeError(0, f"list pods: ReaderError: {exc}") from None
        finally:
            await reader.close()
        metadata = reader.fields.get("metadata") or {}
        yield [], str(metadata.get("resourceVersion") or "")

    async def _paged(self, what: str) -> AsyncGenerator[Page, None]:
        """Pages of `page_size` objects; the next page is asked for while the caller takes
        in this one."""
        token: str | None = None
        version = ""
        pending = asyncio.ensure_future(self._page(what, token))
        try:
            while True:
                data = await pending
                metadata = data.get("metadata") or {}
                # Every page of one list is the same snapshot: the first page's version holds.
                version = version or metadata.get("resourceVersion") or ""
                token = metadata.get("continue")
                if token:
                    pending = asyncio.ensure_future(self._page(what, token))
                yield data.get("items") or [], version
                if not token:
                    return
        finally:
            if not pending.done():
                pending.cancel()

    async def _page(self, what: str, token: str | None) -> dict[str, Any]:
        """One page of a list, each item with its `kind`."""
        options: dict[str, Any] = {"limit": self.page_size, "_preload_content": False}
        if token:
            options["_continue"] = token
        call, kind = call_for(self, what, options)
        response = await self.call_raw(f"list {what}", call)
        data: dict[str, Any] = json.loads(await response.read())
        for item in data.get("items") or ():
            item.setdefault("kind", kind)
        return data


def _from_aiohttp(exc: Exception) -> bool:
    return type(exc).__module__.startswith("aiohttp")


def _version(stream: ListStream) -> str:
    metadata = stream.fields.get("metadata") or {}
    return str(metadata.get("resourceVersion") or "")


def _batches(items: list[dict[str, Any]], kind: str) -> list[list[dict[str, Any]]]:
    for item in items:
        item.setdefault("kind", kind)
    return [items[i : i + BATCH] for i in range(0, len(items), BATCH)]
