"""The `quotree` command. Errors are one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from quotree.report import legend
from quotree.simulate import (
    Simulation,
    SimulationError,
    load_documents,
    render_json,
    render_table,
    simulate,
    simulate_documents,
)

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
        description="Preview what quotree would decide for these objects, without a cluster.",
        epilog=legend(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim.add_argument("files", nargs="*", metavar="FILE", help="multi-document YAML files")
    sim.add_argument(
        "-o",
        "--output",
        choices=("json", "table"),
        default="table",
        help="table: the tree for a person to read (the default, columns below); "
        "json: the stable report for programs",
    )
    sim.add_argument(
        "--from-cluster",
        action="store_true",
        help="start from the live cluster's Nodes, Cohorts, ElasticQuotas and Pods (read with "
        "kubectl, as `kubectl quotree what-if` does); FILEs come after them",
    )
    return parser


def _from_cluster(files: Sequence[str]) -> Simulation:
    """The live cluster (then FILEs) through the simulator: the kubectl plugin's input path.

    The cluster is read by the plugin's shell (it runs kubectl); the engine stays pure.
    """
    from quotree_kubectl.cluster import (  # noqa: PLC0415 (a shell, only for this flag)
        ClusterState,
        Kubectl,
        PluginError,
        live_documents,
    )

    extra = list(load_documents(files))
    try:
        live = live_documents(ClusterState.read(Kubectl()))
    except PluginError as exc:
        raise SimulationError(str(exc)) from None
    return simulate_documents([*live, *extra])


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.files and not args.from_cluster:
        parser.error("simulate needs FILEs or --from-cluster")
    try:
        result = _from_cluster(args.files) if args.from_cluster else simulate(args.files)
        text = render_json(result) if args.output == "json" else render_table(result)
    except SimulationError as exc:
        print(f"quotree: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # users never see a traceback
        if os.environ.get("QUOTREE_DEBUG"):
            raise
        print(f"quotree: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(text)
    if args.output == "json":
        for warning in result.warnings:
            print(f"quotree: warning: {warning}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
