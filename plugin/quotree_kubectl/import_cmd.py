"""`kubectl quotree import [FILE ...|-]`: another quota system's objects as quotree YAML.

Reads files, directories or standard input as `kubectl apply -f` does and converts the
Kueue, capacity scheduling and Koordinator quota objects among them with the engine's
conversion (`quotree.importer`, the one `quotree simulate` uses). Standard output gets
the quotree objects, each after a comment naming its source, ready for `kubectl apply
-f -`; standard error gets one line per field that does not carry over, one line naming
what was left out, and one line per quotree rule the converted tree breaks, which makes
the exit code 1 (the objects are still written, unchanged: fixing them is the user's
choice). Nothing here talks to the cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import Any

from quotree.cli import emit
from quotree.importer import convert, importable
from quotree.manifests import InputError, load_documents

__all__ = ["add_parser", "run_import"]

PROG = "kubectl quotree"


def add_parser(commands: Any) -> None:
    """The `import` subcommand on the plugin's parser."""
    parser = commands.add_parser(
        "import",
        help="Kueue, capacity scheduling or Koordinator quota objects as quotree YAML",
        description="Convert Kueue's Cohorts, ClusterQueues, LocalQueues and "
        "ResourceFlavors, capacity scheduling's ElasticQuotas and Koordinator's "
        "ElasticQuota tree into quotree objects on standard output (each with a comment "
        "naming its source); what does not carry over, and any quotree rule the result "
        "breaks, is one line each on standard error (docs/import.md). Reads no cluster.",
    )
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="files, directories or - for standard input (the default)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="FILE",
        help="another FILE, as kubectl takes it",
    )
    parser.add_argument(
        "-R", "--recursive", action="store_true", help="read directories' sub-directories too"
    )


def _left_out(kinds: Counter[str]) -> str:
    count = sum(kinds.values())
    named = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(kinds.items()))
    objects = "object that is" if count == 1 else "objects that are"
    return (
        f"left out {count} {objects} not Kueue, capacity scheduling or Koordinator "
        f"quota objects: {named}"
    )


def run_import(args: argparse.Namespace) -> int:
    """Convert, print, report; the exit code (0, or 1 for bad input or a broken rule; 2
    for an internal error, one line as ever)."""
    try:
        return _run(args)
    except Exception as exc:  # users never see a traceback
        if os.environ.get("QUOTREE_DEBUG"):
            raise
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    paths = [*args.files, *args.filename] or ["-"]
    try:
        documents = list(load_documents(paths, recursive=args.recursive))
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    others: Counter[str] = Counter()
    for _, doc in documents:
        if not importable(doc):
            others[f"{doc.get('kind')} ({doc.get('apiVersion')})"] += 1
    conversion = convert(documents)
    if not conversion.objects:
        print(f"{PROG}: error: nothing to convert in {', '.join(paths)}", file=sys.stderr)
        return 1
    for note in conversion.notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    if others:
        print(f"{PROG}: note: {_left_out(others)}", file=sys.stderr)
    problems = conversion.problems()
    for problem in problems:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
    emit(conversion.render().rstrip("\n"))
    return 1 if problems else 0
