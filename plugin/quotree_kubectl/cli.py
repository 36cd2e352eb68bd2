"""`kubectl-quotree`: kubectl runs it as `kubectl quotree ...` (any `kubectl-*` on PATH).

    kubectl quotree tree [-o table|wide|json]
    kubectl quotree why POD -n NAMESPACE
    kubectl quotree what-if FILE [FILE ...]

Global flags `--context` and `--kubeconfig` are passed on to kubectl. Errors are one line
on stderr and exit code 1 (bad input, no cluster) or 2 (an internal error); never a
traceback.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence

from quotree.report import BAR_COLUMNS, render_tree
from quotree.simulate import SimulationError, load_documents
from quotree_kubectl.cluster import ClusterState, Kubectl, PluginError
from quotree_kubectl.tree_view import pending_reasons, tree_report
from quotree_kubectl.what_if import render_what_if, what_if
from quotree_kubectl.why import why

__all__ = ["main"]

#: Width of the usage bars of `tree` (cells) when the terminal is wide enough, or `-o wide`.
BAR_WIDTH = 20
#: Columns the table takes without bars (render_tree's fixed layout).
TABLE_COLUMNS = 98


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl quotree",
        description="quotree's quota tree in the live cluster (read-only).",
    )
    parser.add_argument("--context", help="the kubeconfig context to use")
    parser.add_argument("--kubeconfig", help="path to the kubeconfig file")
    commands = parser.add_subparsers(dest="command", required=True)
    tree = commands.add_parser("tree", help="the quota tree from the Cohorts' and quotas' status")
    tree.add_argument("-o", "--output", choices=("table", "wide", "json"), default="table")
    why_cmd = commands.add_parser("why", help="why a pod waits, and what would let it in")
    why_cmd.add_argument("pod", metavar="POD")
    why_cmd.add_argument("-n", "--namespace", default="default")
    whatif = commands.add_parser(
        "what-if",
        help="the live tree with proposed Cohorts, ElasticQuotas or Nodes (nothing written)",
    )
    whatif.add_argument("files", nargs="+", metavar="FILE")
    whatif.add_argument("-o", "--output", choices=("table", "json"), default="table")
    return parser


def _kubectl(args: argparse.Namespace) -> Kubectl:
    flags = []
    if args.context:
        flags += ["--context", args.context]
    if args.kubeconfig:
        flags += ["--kubeconfig", args.kubeconfig]
    return Kubectl(flags)


def _reasons(kubectl: Kubectl, state: ClusterState) -> dict[str, str]:
    gated = any(
        g.get("name") == "quotree.io/admission"
        for p in state.pods
        for g in (p.get("spec") or {}).get("schedulingGates") or ()
    )
    if not gated:
        return {}
    events = kubectl.get_json("events", "--all-namespaces", "--field-selector", "reason=Pending")
    return pending_reasons(events.get("items") or [])


def _bar_width(output: str) -> int:
    if output == "wide":
        return BAR_WIDTH
    if not sys.stdout.isatty():
        return 0
    columns = shutil.get_terminal_size((80, 24)).columns
    return BAR_WIDTH if columns >= TABLE_COLUMNS + BAR_WIDTH + BAR_COLUMNS else 0


def run(args: argparse.Namespace) -> str:
    kubectl = _kubectl(args)
    if args.command == "what-if":
        import json  # noqa: PLC0415

        proposed = list(load_documents(args.files))  # read the files before the cluster
        result = what_if(ClusterState.read(kubectl), proposed)
        if args.output == "json":
            return json.dumps(
                {
                    "refused": result.refused,
                    "warnings": result.warnings,
                    "applied": result.applied,
                    "before": result.before,
                    "after": result.after,
                },
                indent=2,
            )
        return render_what_if(result)
    state = ClusterState.read(kubectl)
    if args.command == "tree":
        report = tree_report(state, _reasons(kubectl, state))
        if args.output == "json":
            import json  # noqa: PLC0415

            return json.dumps(report, indent=2)
        return render_tree(report, bar_width=_bar_width(args.output))
    return why(state, args.namespace, args.pod, _reasons(kubectl, state))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        text = run(args)
    except (PluginError, SimulationError) as exc:
        print(f"kubectl quotree: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # users never see a traceback
        if os.environ.get("QUOTREE_DEBUG"):
            raise
        print(f"kubectl quotree: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
