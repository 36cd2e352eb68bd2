"""YAML documents as `yaml.load_all(text, Loader=yaml.CSafeLoader)` gives them, faster.

A big simulator input (a 100k-pod burst) spends most of its loading time in PyYAML's
node objects and its Python constructor, not in libyaml's parser. `load_all` gives the
very same objects (and, for bad input, raises the very same errors) by one of three ways,
the first that takes the whole text:

1. *Flat text*: every document a block mapping at column 0 whose lines are `key: value`,
   the values plain or double-quoted scalars or flow collections on one line in the
   canonical spelling `{a: b, c: [d, "e"]}`; the scalars printable ASCII with no
   escapes and no `,:[]{}` (in plain ones, no other character YAML gives a meaning);
   lines `---`, blank or comments besides. This is what our generators write. A regex
   checks the whole text; each plain scalar becomes the JSON of the value PyYAML gives
   it (mostly by `str.replace` over the whole text, not a Python call per scalar) and each
   line's value is read by the json module's C scanner, which also checks that it is
   exactly one value (the brackets match within the line).
2. *Events*: libyaml's parser events turned into dicts, lists and scalars by a loop of
   ours, without node objects. A text with an anchor, an alias, an explicit tag, a
   collection as a mapping key or a plain scalar of a tag other than str, int, float,
   bool, null or timestamp (`<<` merge keys, `=`) is not taken.
3. PyYAML's own loader, for everything else and for every error: whatever the first two
   do not take exactly, or fail on, is loaded (and raises) the way it always was.

Plain scalars are resolved and constructed by a CSafeLoader's own resolver and
constructors (once per distinct value), so their tags and values are PyYAML's.
"""

from __future__ import annotations

import datetime
import functools
import json
import json.scanner
import math
import re
from collections.abc import Callable
from typing import Any, cast

import yaml

from quotree import collector

__all__ = ["load_all"]

#: The scalar tags whose values we build (each immutable, so one value serves every use).
_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp")
)
_IMMUTABLE = (str, int, float, bool, type(None), datetime.date)
_PLAIN_IMPLICIT = (True, False)


class _NotTaken(Exception):
    """The text holds something this way does not build exactly: the next way loads it."""


def load_all(text: str) -> list[Any]:
    """Every document of `text`, as `list(yaml.load_all(text, Loader=yaml.CSafeLoader))`."""
    # The cyclic garbage collector is off while loading (collector.py). Any cycle left
    # behind (an alias's) is found once it is back on.
    with collector.paused():
        if _standard_loader():
            for way in (_flat_documents, _event_documents):
                try:
                    return way(text)
                except Exception:  # not taken, or anything else: PyYAML's loader decides
                    pass
        return list(yaml.load_all(text, Loader=yaml.CSafeLoader))


def _standard_loader() -> bool:
    """CSafeLoader builds strings, mappings and sequences as it came (nobody registered
    other constructors for them on it) and no tag depends on where a node is."""
    constructors = yaml.CSafeLoader.yaml_constructors
    safe = yaml.constructor.SafeConstructor
    return not yaml.CSafeLoader.yaml_path_resolvers and all(
        constructors.get(f"tag:yaml.org,2002:{tag}") is built
        for tag, built in (
            ("str", safe.construct_yaml_str),
            ("map", safe.construct_yaml_map),
            ("seq", safe.construct_yaml_seq),
        )
    )


class _Scalars:
    """Plain scalars resolved and built as a CSafeLoader does, each distinct one once."""

    def __init__(self, loader: yaml.CSafeLoader) -> None:
        self._loader = loader
        self._resolve: Callable[[type, str, tuple[bool, bool]], str] = loader.resolve
        self.values: dict[str, Any] = {}
        self.json: dict[str, str] = {}
        #: What the JSON constants the plain scalars became stand for (`.nan` is one object).
        self.constants: dict[str, float] = {}
        resolvers = loader.yaml_implicit_resolvers
        #: The first characters an implicit resolver looks at (None: every one).
        self.first_characters = (
            None if None in resolvers else "".join(sorted(key for key in resolvers if key))
        )

    def value(self, text: str) -> Any:
        """The value of the plain scalar `text`."""
        try:
            return self.values[text]
        except KeyError:
            pass
        loader = self._loader
        tag = self._resolve(yaml.ScalarNode, text, _PLAIN_IMPLICIT)
        constructor = loader.yaml_constructors.get(tag)
        if tag not in _TAGS or constructor is None:
            raise _NotTaken(tag)
        value = constructor(loader, yaml.ScalarNode(tag, text))
        if not isinstance(value, _IMMUTABLE):
            raise _NotTaken(tag)
        self.values[text] = value
        return value

    def as_json(self, text: str) -> str:
        """The JSON text of the plain scalar `text`'s value (the json module reads it back)."""
        value = self.value(text)
        kind = type(value)
        if kind is str:
            found = f'"{value}"'  # the flat text's scalars need no escapes
        elif kind is bool:
            found = "true" if value else "false"
        elif value is None:
            found = "null"
        elif kind is int:
            found = str(value)
        elif kind is float:
            if math.isnan(value):
                found = "NaN"
            elif math.isinf(value):
                found = "Infinity" if value > 0 else "-Infinity"
            else:
                found = repr(value)  # the shortest text that reads back as this float
            if found != repr(value):
                self.constants[found] = value
        else:
            raise _NotTaken(text)  # a timestamp: no JSON for it
        self.json[text] = found
        return found


# --- 1. flat text ---------------------------------------------------------------------

# Scalars: printable ASCII without escapes and without any character that means something
# to YAML or separates JSON (quotes, brackets, `,`, `:`, `#` in plain ones, `&`, `*`, `!`,
# ...); at most 1,000 characters, so that a key is always within libyaml's 1,024
# characters of its `:`.
_DOUBLE = r'"[ !#-+\--9;-Z^-z|~]{0,1000}"'
_WORD = r"A-Za-z0-9_./+-"
_PLAIN = rf"(?:[A-Za-z0-9_.][{_WORD}]{{0,999}}|[-+][{_WORD}]{{1,999}})(?![{_WORD}])"
# A key at column 0 starts with neither `-` nor `.` (no `---` or `...` there) nor `+`.
_KEY = rf"(?:[A-Za-z0-9_][{_WORD}]{{0,999}}(?![{_WORD}])|{_DOUBLE})"
# A line's value: items separated by `, ` or `: `, each some opening brackets, at most one
# scalar, some closing brackets; no other spaces. The json scanner then checks that they
# make one value.
_ITEM = rf"[\[{{]*+(?:{_DOUBLE}|{_PLAIN})?[\]}}]*+"
_VALUE = rf"(?=[\[{{\"{_WORD}]){_ITEM}(?:(?:, |: ){_ITEM})*+"
_LINE = rf"(?:{_KEY}:(?: {_VALUE})?|---|#[ -~]*+|)"
_FLAT = re.compile(rf"(?:{_LINE}\n)*+{_LINE}")
_COMMENT = re.compile(r"(?m)^#.*")
# In a flat text every one of these characters is a separator (none is in a scalar).
_SEPARATORS = "\n{}[],:"
# Where the text is marked, a plain scalar is `\x03scalar\x02`.
_START, _END = "\x03", "\x02"


def _flat_documents(text: str) -> list[Any]:
    if _FLAT.fullmatch(text) is None:
        raise _NotTaken("not a flat text")
    loader = yaml.CSafeLoader("")
    try:
        scalars = _Scalars(loader)
        lines = _flat_json(text, scalars).split("\n")
    finally:
        loader.dispose()
    decoder = json.JSONDecoder(parse_constant=scalars.constants.__getitem__)
    # One JSON value at an index (the stub wants a scanner where any decoder does).
    scan = json.scanner.make_scanner(cast(Any, decoder))
    documents: list[Any] = []
    document: dict[Any, Any] | None = None
    started = False  # a document is open: after `---`, or at the first key of the text
    for line in lines:
        if not line:
            continue
        if line == '"---"':  # a line that is `---` (a key's line has a `:`)
            if started:
                documents.append(document)
            document, started = None, True
            continue
        key, end = scan(line, 0)
        if document is None:
            document, started = {}, True
        if end == len(line) - 1 and line[end] == ":":
            document[key] = None  # `key:` and nothing after it
            continue
        if line[end : end + 2] != ": ":
            raise _NotTaken(line)
        value, end = scan(line, end + 2)
        if end != len(line):
            raise _NotTaken(line)  # more than one value: YAML reads it otherwise, or not at all
        document[key] = value
    if started:
        documents.append(document)
    return documents


def _flat_json(text: str, scalars: _Scalars) -> str:
    """A flat text with each plain scalar replaced by its value's JSON, comments blanked.

    All by `str.replace` (C loops, no object per scalar) but for the plain scalars whose
    first character has an implicit resolver (`1`, `true`, `null`, `name`): each separator
    is marked, so a plain scalar is what lies between `\\x03` and `\\x02`."""
    if text.startswith("#") or "\n#" in text:
        text = _COMMENT.sub("", text)
    marked = _START + text + _END
    for separator in _SEPARATORS:
        marked = marked.replace(separator, _END + separator + _START)
    marked = marked.replace(_START + " ", " " + _START)  # the space of `, ` and `: `
    marked = marked.replace(_START + _END, "")  # nothing between two separators
    marked = marked.replace(_START + '"', '"').replace('"' + _END, '"')  # already JSON
    # The plain scalars an implicit resolver looks at: resolved once each; only those that
    # are not strings (`1`, `true`; not `name`) are replaced here, the rest quoted below.
    candidates = _resolvable(scalars.first_characters).findall(marked)
    known = scalars.json
    special = "".join(
        {
            token[0]
            for token in set(candidates)
            if (known.get(token) or scalars.as_json(token)) != f'"{token}"'
        }
    )
    if special:
        marked = _resolvable(special).sub(lambda match: known[match[1]], marked)
    return marked.replace(_START, '"').replace(_END, '"')  # the rest are strings


@functools.lru_cache(maxsize=64)
def _resolvable(first_characters: str | None) -> re.Pattern[str]:
    """The marked plain scalars an implicit resolver may give a tag other than str."""
    if first_characters is None:  # a resolver for every first character
        return re.compile(f"{_START}([^{_END}]*){_END}")
    return re.compile(f"{_START}([{re.escape(first_characters)}][^{_END}]*){_END}")


# --- 2. parser events -----------------------------------------------------------------

_AWAITING_KEY = object()
_MISSING = object()
_IN_SEQUENCE = object()


def _event_documents(text: str) -> list[Any]:
    loader = yaml.CSafeLoader(text)
    try:
        get = loader.get_event
        scalars = _Scalars(loader)
        documents = []
        get()  # the stream's start
        while type(get()) is yaml.DocumentStartEvent:
            documents.append(_event_document(get, scalars))
            get()  # the document's end
        return documents
    finally:
        loader.dispose()


def _event_document(get: Callable[[], Any], scalars: _Scalars) -> Any:
    """One document's value, from its first event to its last (iteratively: any depth)."""
    values = scalars.values
    open_: list[Any] = []  # the collections being filled, innermost last
    slots: list[Any] = []  # for each: its pending key, _AWAITING_KEY or _IN_SEQUENCE
    scalar_event, mapping_start = yaml.ScalarEvent, yaml.MappingStartEvent
    sequence_start = yaml.SequenceStartEvent
    while True:
        event = get()
        kind = type(event)
        if kind is scalar_event:
            if event.tag is not None or event.anchor is not None:
                raise _NotTaken("a tag or an anchor")
            value = event.value
            if event.implicit[0]:  # plain: its tag is resolved from its text
                found = values.get(value, _MISSING)
                value = scalars.value(value) if found is _MISSING else found
            if not open_:
                return value
            slot = slots[-1]
            if slot is _AWAITING_KEY:
                slots[-1] = value
            elif slot is _IN_SEQUENCE:
                open_[-1].append(value)
            else:
                open_[-1][slot] = value
                slots[-1] = _AWAITING_KEY
        elif kind is mapping_start or kind is sequence_start:
            if event.tag is not None or event.anchor is not None:
                raise _NotTaken("a tag or an anchor")
            collection: Any = {} if kind is mapping_start else []
            if open_:
                slot = slots[-1]
                if slot is _AWAITING_KEY:
                    raise _NotTaken("a collection as a key")  # unhashable: PyYAML's error
                if slot is _IN_SEQUENCE:
                    open_[-1].append(collection)
                else:
                    open_[-1][slot] = collection
                    slots[-1] = _AWAITING_KEY
            open_.append(collection)
            slots.append(_AWAITING_KEY if kind is mapping_start else _IN_SEQUENCE)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            collection = open_.pop()
            slots.pop()
            if not open_:
                return collection
        else:
            raise _NotTaken(kind.__name__)  # an alias
