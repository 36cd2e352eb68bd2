"""A Kubernetes list response read item by item as it arrives (pure, no I/O).

Why a module of its own: at start-up the operator lists every pod in one request served
from the API server's watch cache (listing.py), and that answer is tens of MiB of JSON.
Parsed whole, it would hold every body at once. `ListStream` takes the text as it comes
(listing.py feeds it blocks of 1 MiB) and hands out each item as soon as it is complete,
so the objects are taken in while the rest of the answer is on its way, and only the
bodies of one block are alive at a time.

Each item is parsed whole where the next one's beginning shows where it ends (the compact
answer of an API server, `ListStream._item`), with pydantic's JSON parser (pydantic_core,
which pydantic brings): at 30,000 pods it parses the list in about three quarters of the
standard library's time. The list's other fields (`metadata`, with its `resourceVersion`)
are kept as they pass.
Malformed JSON raises `ValueError` once the stream has ended (before that, an item that
does not parse yet may only be incomplete).
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from pydantic_core import from_json

__all__ = ["BLOCK", "ListStream"]

#: Bytes of an answer read before its items are taken out (listing.py, pod_reader.py).
#: Blocks this large are allocated apart from the heap and given back whole once read;
#: the network's own chunks (a few KiB) were measured to leave more memory behind
#: (bench/RESULTS.md).
BLOCK = 1 << 20

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


class _More(Exception):
    """The text so far ends before the next value does."""


class ListStream:
    """Feed it the response's bytes (`feed`), then `close()`; both return the items that
    became complete. `fields` holds the list's other top-level fields once read."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self._text = ""
        self._bytes = codecs.getincrementaldecoder("utf-8")()
        #: Where the parser is: before "{", between fields, inside "items", or done.
        self._state = "start"
        self._ended = False
        #: How each item after the first begins, with the end of the one before: `},{"`,
        #: the first item's first key, `":` (an API server writes every item's fields in
        #: one order, with no space between items).
        self._next_item: str | None = None

    def feed(self, chunk: bytes) -> list[Any]:
        self._text += self._bytes.decode(chunk)
        return self._items()

    def close(self) -> list[Any]:
        """The end of the response: the last items; ValueError if the list is incomplete."""
        self._text += self._bytes.decode(b"", final=True)
        self._ended = True
        items = self._items()
        if self._state != "done":
            raise ValueError(f"the list ends early ({self._text[:80]!r} left unread)")
        return items

    def _items(self) -> list[Any]:
        out: list[Any] = []
        pos = 0
        try:
            while self._state != "done":
                pos = self._step(pos, out)
        except _More:
            pass
        self._text = self._text[pos:]
        return out

    def _skip(self, pos: int) -> int:
        text = self._text
        while pos < len(text) and text[pos] in _SPACE:
            pos += 1
        if pos == len(text):
            if self._ended:
                raise ValueError("the list ends early")
            raise _More
        return pos

    def _value(self, pos: int) -> tuple[Any, int]:
        try:
            value, end = _DECODER.raw_decode(self._text, pos)
        except json.JSONDecodeError as exc:
            if self._ended:
                raise ValueError(f"the list is not valid JSON: {exc}") from None
            raise _More from None
        if end == len(self._text) and not self._ended and isinstance(value, (int, float)):
            raise _More  # a number may go on in the next chunk
        return value, end

    def _expect(self, pos: int, chars: str) -> tuple[str, int]:
        pos = self._skip(pos)
        char = self._text[pos]
        if char not in chars:
            raise ValueError(f"the list is not valid JSON: {char!r} where {chars!r} was expected")
        return char, pos + 1

    def _step(self, pos: int, out: list[Any]) -> int:
        """Read one thing (the opening brace, a field, an item, a separator) from `pos`;
        returns the position after it. Raises _More, leaving `pos` where it was."""
        state = self._state
        if state == "start":
            _, pos = self._expect(pos, "{")
            self._state = "field"
            return pos
        if state == "field":
            char, after = self._expect(pos, '",}')
            if char == "}":
                self._state = "done"
                return after
            if char == ",":
                return after
            key, after = self._value(after - 1)
            _, after = self._expect(after, ":")
            if key == "items":
                char, inside = self._expect(after, "[n")
                if char == "[":
                    self._state = "items"
                    return inside
            value, after = self._value(self._skip(after))
            self.fields[key] = value
            return after
        # state == "items": an item, a comma or the closing bracket
        start = self._skip(pos)
        char = self._text[start]
        if char == "]":
            self._state = "field"
            return start + 1
        if char == ",":
            return start + 1
        item, after = self._item(start)
        out.append(item)
        return after

    def _item(self, start: int) -> tuple[Any, int]:
        """The item that begins at `start`, and the position after it.

        Where the next item's beginning is found, the text up to it is parsed as one
        object (pydantic's parser, about twice as fast as the standard library's here).
        That parse only succeeds when the text is exactly the item: had the match been
        inside the item, the object would not be closed at its end. When it fails, or
        nothing matches (the last item, or the text stops within this one), the item is
        parsed in place with the standard library's decoder, which also says whether it is
        complete."""
        marker = self._next_item
        if marker is not None:
            end = self._text.find(marker, start)
            if end > start:
                try:
                    return from_json(self._text[start : end + 1], cache_strings="keys"), end + 1
                except ValueError:
                    pass
        item, after = self._value(start)
        if marker is None and isinstance(item, dict) and item:
            first = json.dumps(next(iter(item)), ensure_ascii=False)
            if self._text.startswith("{" + first + ":", start):
                self._next_item = "},{" + first + ":"
        return item, after
