"""Reading the simulator's input the way `kubectl apply -f` reads it.

A path is a file, a directory (its `.yaml`, `.yml` and `.json` files, sorted by
name; with `recursive`, its sub-directories' too) or `-` for standard input.
Text is UTF-8, or UTF-16 / UTF-8 with a byte order mark (kubectl reads those
too); anything else (a binary file) is one line naming the file. Each
document comes with where it came from, `FILE document N` (`item M` for the
items of a `List`), which every later error line starts with.
"""

from __future__ import annotations

import codecs
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from quotree import fast_yaml

__all__ = ["EXTENSIONS", "STDIN", "InputError", "load_documents", "manifest_files"]

#: The path that stands for standard input.
STDIN = "-"
#: The files of a directory that are read (kubectl's list).
EXTENSIONS = (".json", ".yaml", ".yml")

# libyaml's loader when PyYAML has it: ten times faster on a 100k-pod burst. With it,
# `fast_yaml` gives the same objects and errors several times faster still (it builds them
# without PyYAML's nodes); without it, PyYAML's pure-Python loader, as it always was.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FAST = _LOADER is not yaml.SafeLoader  # libyaml is there: fast_yaml builds on it

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class InputError(Exception):
    """Input that cannot be read: one line that names the file (and document)."""


def manifest_files(path: str | Path, *, recursive: bool = False) -> list[Path]:
    """The files `path` stands for: itself, or a directory's manifests sorted by name."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    found: list[Path] = []
    for entry in sorted(path.iterdir(), key=lambda p: p.name):
        if entry.is_dir():
            if recursive:
                found.extend(manifest_files(entry, recursive=True))
        elif entry.suffix in EXTENSIONS:
            found.append(entry)
    if not found and not recursive:
        wanted = ", ".join(EXTENSIONS)
        raise InputError(f"{path}: a directory with no {wanted} files (sub-directories need -R)")
    return found


def _decode(data: bytes, where: str) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                break
    else:
        if b"\x00" not in data:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                pass
    raise InputError(f"{where}: not a YAML or JSON text file (UTF-8, or UTF-16 with a BOM)")


def _read(path: str, stdin: BinaryIO | None) -> str:
    if path == STDIN:
        data = (stdin or sys.stdin.buffer).read()
        return _decode(data, "standard input")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _decode(data, path)


def _documents(text: str, where: str) -> list[Any]:
    if text.lstrip().startswith("{"):
        # A JSON file (kubectl's decoder looks at the first character too): read as JSON,
        # which YAML is not quite (e.g. escaped characters beyond the BMP).
        try:
            return [json.loads(text)]
        except (ValueError, RecursionError):
            pass  # YAML in flow style, or not valid at all: YAML says which
    try:
        if _FAST:
            return fast_yaml.load_all(text)
        return list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InputError(f"{where}{line}: {problem}") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply") from None


def _short(value: object) -> str:
    return repr(value)[:40].replace("\n", "\\n")


def load_documents(
    paths: Iterable[str | Path], *, recursive: bool = False, stdin: BinaryIO | None = None
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every document of the paths, in order, with where it came from (List kinds opened)."""
    for given in paths:
        files = [STDIN] if str(given) == STDIN else manifest_files(given, recursive=recursive)
        for file in files:
            where = "standard input" if file == STDIN else str(file)
            documents = _documents(_read(str(file), stdin), where)
            for index, doc in enumerate(documents, start=1):
                if doc is None:
                    continue
                origin = f"{where} document {index}"
                if not isinstance(doc, Mapping):
                    raise InputError(f"{origin}: expected a Kubernetes object, got {_short(doc)}")
                if doc.get("kind") != "List":
                    yield origin, doc
                    continue
                items = doc.get("items")
                if not isinstance(items, list | None):
                    raise InputError(f"{origin}: List items must be a list, not {_short(items)}")
                for number, item in enumerate(items or (), start=1):
                    if not isinstance(item, Mapping):
                        raise InputError(f"{origin} item {number}: expected a Kubernetes object")
                    yield f"{origin} item {number}", item
