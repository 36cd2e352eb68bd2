"""Lists read item by item (liststream.py) and asked of the watch cache (listing.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from quotree_operator import listing, liststream
from quotree_operator.kube_errors import KubeError
from quotree_operator.listing import Lists
from quotree_operator.liststream import ListStream

LIST = {
    "kind": "PodList",
    "apiVersion": "v1",
    "metadata": {"resourceVersion": "4711"},
    "items": [
        {"metadata": {"name": f"p{i}", "labels": {"team": "né ✓" * i}}, "n": [1.5e3, i, None]}
        for i in range(12)
    ],
}


def read(raw: bytes, size: int) -> tuple[list[Any], ListStream]:
    stream = ListStream()
    items: list[Any] = []
    for start in range(0, len(raw), size):
        items += stream.feed(raw[start : start + size])
    items += stream.close()
    return items, stream


@pytest.mark.parametrize("indent", [None, 2])
def test_every_split_of_the_answer_gives_the_same_items_and_fields(indent: int | None) -> None:
    raw = json.dumps(LIST, ensure_ascii=False, indent=indent).encode()
    for size in (*range(1, 12), 64, 1000, len(raw)):
        items, stream = read(raw, size)
        assert items == LIST["items"], size
        assert stream.fields == {k: v for k, v in LIST.items() if k != "items"}, size


def test_compact_items_are_parsed_whole_and_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """An API server's answer has no space between items: each item up to where the next
    begins is parsed whole (liststream's faster path), and an item in which that beginning
    also appears (nested, or not at all) still comes out exactly."""
    items: list[Any] = [
        {"metadata": {"name": f"p{i}"}, "spec": {"n": [i, 1.5e3, None, "},{"]}} for i in range(9)
    ]
    items[3]["spec"]["volumes"] = [{"a": 1}, {"metadata": {"name": "nested"}}]  # the beginning
    items[5]["spec"]["note"] = '},{"metadata":'  # in a string (escaped, so never a beginning)
    compact = {**LIST, "items": items}
    raw = json.dumps(compact, ensure_ascii=False, separators=(",", ":")).encode()
    assert raw.count(b'},{"metadata":') == len(items)  # 8 between items, 1 nested
    whole: list[str] = []
    parse = liststream.from_json

    def counting(text: str, **options: Any) -> Any:
        whole.append(text)
        return parse(text, **options)

    monkeypatch.setattr(liststream, "from_json", counting)
    for size in (1, 7, 64, 1000, len(raw)):
        whole.clear()
        got, stream = read(raw, size)
        assert got == items, size
        assert stream.fields == {k: v for k, v in LIST.items() if k != "items"}, size
        assert whole, size  # the faster path was taken


def test_items_come_out_as_soon_as_they_are_complete() -> None:
    raw = json.dumps(LIST).encode()
    second = raw.index(b'{"metadata": {"name": "p1"')
    stream = ListStream()
    assert stream.feed(raw[: second + 5]) == [LIST["items"][0]]


def test_fields_after_the_items_and_an_empty_or_null_list() -> None:
    raw = b'{"items": [], "metadata": {"resourceVersion": "9"}}'
    assert read(raw, 3)[0] == []
    assert read(raw, 3)[1].fields["metadata"] == {"resourceVersion": "9"}
    assert read(b'{"items": null, "kind": "PodList"}', 5)[1].fields["kind"] == "PodList"


@pytest.mark.parametrize(
    "raw",
    [b'{"items": [{"a": 1}', b'{"items": [{"a": 1}] ', b'{"items": [{"a": }]}', b'{"a": 1 '],
)
def test_a_cut_or_malformed_answer_is_an_error_at_its_end(raw: bytes) -> None:
    stream = ListStream()
    stream.feed(raw)  # the rest could still come
    with pytest.raises(ValueError, match="the list"):
        stream.close()


class Response:
    """An unread HTTP answer, as kubernetes_asyncio gives it with _preload_content=False."""

    def __init__(self, raw: bytes, chunk: int) -> None:
        self.raw, self.chunk, self.closed = raw, chunk, False
        self.content = self

    async def iter_any(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.raw), self.chunk):
            yield self.raw[start : start + self.chunk]

    def close(self) -> None:
        self.closed = True


class FakeCore:
    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def list_pod_for_all_namespaces(self, **options: Any) -> dict[str, Any]:
        self.asked.append(options)
        return options


class StreamedLists(Lists):
    def __init__(self, raw: bytes) -> None:
        self.core = FakeCore()
        self.raw = raw
        self.responses: list[Response] = []

    async def call_raw(self, what: str, coro: Any) -> Any:
        self.responses.append(Response(self.raw, 100))
        return self.responses[-1]


async def test_a_list_is_one_request_to_the_watch_cache_read_as_it_arrives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listing, "BLOCK", 300)  # the answer is a few such blocks
    lists = StreamedLists(json.dumps(LIST).encode())
    batches = [batch async for batch in lists.list_pages("pods")]
    assert len(lists.core.asked) == 1
    asked = lists.core.asked[0]
    assert asked["resource_version"] == "0"
    assert "limit" not in asked
    assert len([b for b, _ in batches if b]) > 1  # handed on in parts, not at the end
    items = [item for batch, _ in batches for item in batch]
    assert [i["metadata"]["name"] for i in items] == [f"p{i}" for i in range(12)]
    assert all(item["kind"] == "Pod" for item in items)
    assert batches[-1][1] == "4711"
    assert lists.responses[0].closed
    assert await lists.list_with_version("pods") == (items, "4711")


async def test_a_list_cut_on_the_way_is_a_call_without_answer() -> None:
    lists = StreamedLists(json.dumps(LIST).encode()[:-40])
    with pytest.raises(KubeError) as caught:
        await lists.list_with_version("pods")
    assert caught.value.status == 0
    assert "list pods" in str(caught.value)
    assert lists.responses[0].closed
