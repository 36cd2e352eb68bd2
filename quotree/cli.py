"""The `quotree` command. Errors are one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from quotree.report import legend
from quotree.simulate import SimulationError, render_json, render_table, simulate

__all__ = ["main", "package_version"]


def package_version() -> str:
    """The installed package's version, for `--version`."""
    try:
        return importlib.metadata.version("quotree")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quotree", description="Hierarchical elastic quotas for Kubernetes."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="one of these:"
    )
    sim = commands.add_parser(
        "simulate",
        help="run Cohort, ElasticQuota, Node and Pod YAML through the quota engine",
        description="Preview what quotree would decide for these objects, without a cluster. "
        "Kueue's, capacity scheduling's and Koordinator's quota objects are converted as "
        "`kubectl quotree import` converts them; kinds the simulator does not read are "
        "skipped. Both are noted on standard error.",
        epilog=legend(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="YAML or JSON files, directories (their .yaml, .yml and .json files, by name) "
        "or - for standard input",
    )
    sim.add_argument(
        "-o",
        "--output",
        choices=("json", "table"),
        default="table",
        help="table: the tree for a person to read (the default, columns below); "
        "json: the stable report for programs",
    )
    sim.add_argument(
        "-R", "--recursive", action="store_true", help="read directories' sub-directories too"
    )
    return parser


def emit(text: str) -> bool:
    """Print `text` to standard output; False when the reader closed the pipe first (as
    `| head` does): that is not an error, and no traceback follows at exit."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Python would flush stdout again at exit and fail the same way: point it at null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        result = simulate(args.files, recursive=args.recursive)
        text = render_json(result) if args.output == "json" else render_table(result)
    except SimulationError as exc:
        print(f"quotree: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # users never see a traceback
        if os.environ.get("QUOTREE_DEBUG"):
            raise
        print(f"quotree: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"quotree: note: {note}", file=sys.stderr)
    if not emit(text):
        return 0  # the reader has all it wanted (`| head`)
    if args.output == "json":
        for warning in result.warnings:
            print(f"quotree: warning: {warning}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
