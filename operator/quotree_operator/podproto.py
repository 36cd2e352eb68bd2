"""A pod list in the API server's protobuf encoding, read item by item (pure, no I/O).

Why a module of its own: the start-up pod list (pod_reader.py) is the operator's longest
wait before it can admit, and its pace was set by the helper's parse of 100 MB of JSON.
Written as protobuf, the same 30,000 pods take the API server about half the time and
come in 57 MB; protobuf says each field's length before it, so the reader passes over
what it does not need (managed fields, volumes, statuses of containers) without looking
inside, and reads the list in about half the CPU of JSON (bench/RESULTS.md).

`ProtoListStream` takes the answer's bytes as they arrive and hands out each pod as a body
of the same shape as its JSON form, holding only the fields that `pod_entries.pod_entry`
reads (`pod_facts` and the actuator's checks). Where a field is left out of that body,
the JSON form has it too and nothing reads it. The field numbers are those of
k8s.io/api's core/v1 and k8s.io/apimachinery's meta/v1 `generated.proto`, which are
stable across releases (protobuf's own rule). The answer is the envelope every protobuf
answer of the API server has (`k8s\\0` and a `runtime.Unknown` whose `raw` is the
PodList). Malformed input raises `ValueError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

__all__ = ["MEDIA_TYPE", "ProtoListStream", "pod_body"]

#: What to ask for in `Accept`, and what the answer's `Content-Type` is.
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
_LENGTH_DELIMITED = 2
_Body = dict[str, Any]


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """The varint at `i`, and where the next field begins."""
    byte = buf[i]
    if byte < 0x80:
        return byte, i + 1
    value, shift = byte & 0x7F, 7
    while True:
        i += 1
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7


def _fields(buf: bytes, i: int, end: int) -> Iterator[tuple[int, int, int]]:
    """Each field between `i` and `end` as (number, start, end) for a length-delimited
    one, (number, value, -1) for a varint; fixed-width fields are passed over. (Keys,
    lengths and numbers under 128, nearly all of them, are read here without a call.)"""
    while i < end:
        key = buf[i]
        i += 1
        if key >= 0x80:
            key, i = _varint(buf, i - 1)
        wire = key & 7
        if wire == _LENGTH_DELIMITED:
            size = buf[i]
            i += 1
            if size >= 0x80:
                size, i = _varint(buf, i - 1)
            if i + size > end:
                raise ValueError(f"protobuf field runs past its message at byte {end}")
            yield key >> 3, i, i + size
            i += size
        elif wire == 0:
            value = buf[i]
            i += 1
            if value >= 0x80:
                value, i = _varint(buf, i - 1)
            yield key >> 3, value, -1
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"protobuf wire type {wire} at byte {i}")
    if i != end:
        raise ValueError(f"protobuf field runs past its message at byte {end}")


def _text(buf: bytes, start: int, end: int) -> str:
    return buf[start:end].decode()


def _quantity(buf: bytes, start: int, end: int) -> str:
    """A resource.Quantity: its one field is the string the JSON form shows."""
    for number, a, b in _fields(buf, start, end):
        if number == 1:
            return _text(buf, a, b)
    return "0"


def _signed(_buf: bytes, value: int, _end: int) -> int:
    """A varint field of type int32 or int64 (a negative one is written 64 bits wide)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _seconds(buf: bytes, start: int, end: int) -> datetime:
    """A meta/v1 Time (the JSON form keeps whole seconds only, and so does this)."""
    seconds = 0
    for number, value, _ in _fields(buf, start, end):
        if number == 1:
            seconds = _signed(buf, value, -1)
    return datetime.fromtimestamp(seconds, UTC)


def _bool(_buf: bytes, value: int, _end: int) -> bool:
    return bool(value)


_Reader = Callable[[bytes, int, int], Any]
#: How a field is kept in the body: one value, a list of them, or a map's entries.
_ONE, _MANY, _MAP = "one", "many", "map"
#: A message: its field numbers to the JSON name, the value's reader and how it is kept.
_Table = dict[int, tuple[str, _Reader, str]]


def _entry(reader: _Reader) -> _Reader:
    """The reader of a map's entry (key 1, value 2) as a (key, value) pair."""

    def read(buf: bytes, start: int, end: int) -> tuple[str, Any]:
        key, value = "", ""
        for number, a, b in _fields(buf, start, end):
            if number == 1:
                key = _text(buf, a, b)
            elif number == 2:
                value = reader(buf, a, b)
        return key, value

    return read


def _message(table: _Table) -> _Reader:
    """The reader of a message with these fields (the others are passed over)."""
    fields = {
        number: (name, _entry(reader) if kept is _MAP else reader, kept)
        for number, (name, reader, kept) in table.items()
    }

    def read(buf: bytes, start: int, end: int) -> _Body:
        body: _Body = {}
        for number, a, b in _fields(buf, start, end):
            field = fields.get(number)
            if field is None:
                continue
            name, reader, kept = field
            if kept is _ONE:
                body[name] = reader(buf, a, b)
            elif kept is _MANY:
                body.setdefault(name, []).append(reader(buf, a, b))
            else:
                key, value = reader(buf, a, b)
                body.setdefault(name, {})[key] = value
        return body

    return read


# The fields the operator reads, by the numbers of k8s.io/api core/v1 and
# k8s.io/apimachinery meta/v1 generated.proto.
_OWNER = _message(
    {
        1: ("kind", _text, _ONE),
        3: ("name", _text, _ONE),
        4: ("uid", _text, _ONE),
        5: ("apiVersion", _text, _ONE),
        6: ("controller", _bool, _ONE),
    }
)
_METADATA = _message(
    {
        1: ("name", _text, _ONE),
        2: ("generateName", _text, _ONE),
        3: ("namespace", _text, _ONE),
        5: ("uid", _text, _ONE),
        6: ("resourceVersion", _text, _ONE),
        8: ("creationTimestamp", _seconds, _ONE),
        9: ("deletionTimestamp", _seconds, _ONE),
        11: ("labels", _text, _MAP),
        12: ("annotations", _text, _MAP),
        13: ("ownerReferences", _OWNER, _MANY),
    }
)
_RESOURCES = _message({1: ("limits", _quantity, _MAP), 2: ("requests", _quantity, _MAP)})
_CONTAINER = _message(
    {
        1: ("name", _text, _ONE),
        8: ("resources", _RESOURCES, _ONE),
        24: ("restartPolicy", _text, _ONE),
    }
)
_REQUIREMENT = _message(
    {1: ("key", _text, _ONE), 2: ("operator", _text, _ONE), 3: ("values", _text, _MANY)}
)
_TERM = _message({1: ("matchExpressions", _REQUIREMENT, _MANY)})
_SELECTOR = _message({1: ("nodeSelectorTerms", _TERM, _MANY)})
_NODE_AFFINITY = _message({1: ("requiredDuringSchedulingIgnoredDuringExecution", _SELECTOR, _ONE)})
_AFFINITY = _message({1: ("nodeAffinity", _NODE_AFFINITY, _ONE)})
_SPEC = _message(
    {
        2: ("containers", _CONTAINER, _MANY),
        7: ("nodeSelector", _text, _MAP),
        10: ("nodeName", _text, _ONE),
        18: ("affinity", _AFFINITY, _ONE),
        20: ("initContainers", _CONTAINER, _MANY),
        25: ("priority", _signed, _ONE),
        31: ("preemptionPolicy", _text, _ONE),
        32: ("overhead", _quantity, _MAP),
        38: ("schedulingGates", _message({1: ("name", _text, _ONE)}), _MANY),
        43: ("schedulingGroup", _message({1: ("podGroupName", _text, _ONE)}), _ONE),
    }
)
_POD = _message(
    {
        1: ("metadata", _METADATA, _ONE),
        2: ("spec", _SPEC, _ONE),
        3: ("status", _message({1: ("phase", _text, _ONE)}), _ONE),
    }
)
_LIST_META = _message({2: ("resourceVersion", _text, _ONE), 3: ("continue", _text, _ONE)})


def _whole(reader: _Reader, buf: bytes, start: int, end: int) -> _Body:
    """`reader` over one message from `start` to `end`; a cut message is a ValueError."""
    if end > len(buf):
        raise ValueError(f"protobuf message of {end - start} bytes cut at {len(buf) - start}")
    try:
        body: _Body = reader(buf, start, end)
    except IndexError:  # a varint cut by the message's end
        raise ValueError(f"protobuf message cut inside a number before byte {end}") from None
    return body


def pod_body(buf: bytes, start: int = 0, end: int | None = None) -> _Body:
    """One core/v1 Pod message as the body `pod_entry` reads (its JSON form, in part)."""
    return _whole(_POD, buf, start, len(buf) if end is None else end)


class _More(Exception):
    """The bytes so far end inside a field."""


def _head(buf: bytes, i: int) -> tuple[int, int, int]:
    """A field's number, its length (or -1 for a varint) and where its content begins."""
    try:
        key, i = _varint(buf, i)
        if key & 7 == _LENGTH_DELIMITED:
            size, i = _varint(buf, i)
            return key >> 3, size, i
        if key & 7 == 0:
            _, after = _varint(buf, i)
            return key >> 3, -1, after
    except IndexError:
        raise _More from None
    raise ValueError(f"protobuf answer: wire type {key & 7} in a list's envelope")


class ProtoListStream:
    """Feed it the answer's bytes (`feed`), then `close()`; both return the pods (as
    `pod_body` reads them) that became complete. `fields` holds the list's `metadata`
    (`resourceVersion`, `continue`) once read, as `liststream.ListStream` does."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self._rest = b""
        self._magic = False
        #: Bytes of the PodList still to read once inside it (None: not there yet).
        self._left: int | None = None
        self._listed = False

    def feed(self, chunk: bytes) -> list[_Body]:
        buf = self._rest + chunk if self._rest else chunk
        if not self._magic:
            if len(buf) < len(_MAGIC):
                self._rest = buf
                return []
            if buf[: len(_MAGIC)] != _MAGIC:
                raise ValueError("not a protobuf answer (no k8s envelope)")
            self._magic = True
            buf = buf[len(_MAGIC) :]
        pods: list[_Body] = []
        i = 0
        try:
            while i < len(buf):
                number, size, start = _head(buf, i)
                if self._left is None and number == 2 and size >= 0:
                    if self._listed:
                        raise ValueError("protobuf answer: two lists in one envelope")
                    self._left, self._listed, i = size or None, True, start
                    continue
                end = start if size < 0 else start + size
                if end > len(buf):
                    break
                if self._left is not None:
                    self._take(number, buf, start, end, pods)
                    self._left -= end - i
                    if self._left < 0:
                        raise ValueError("protobuf answer: an item runs past its list")
                    if self._left == 0:
                        self._left = None
                i = end
        except _More:
            pass
        self._rest = buf[i:]
        return pods

    def _take(self, number: int, buf: bytes, start: int, end: int, pods: list[_Body]) -> None:
        if number == 2:
            pods.append(pod_body(buf, start, end))
        elif number == 1:  # ListMeta (an empty `continue` is left out, as in JSON)
            meta = _whole(_LIST_META, buf, start, end)
            self.fields["metadata"] = {key: value for key, value in meta.items() if value}

    def close(self) -> list[_Body]:
        if self._rest or self._left is not None or not self._listed:
            raise ValueError("the protobuf answer ended before its list did")
        return []
