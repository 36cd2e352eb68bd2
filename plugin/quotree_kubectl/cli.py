"""`kubectl-quotree`: kubectl runs it as `kubectl quotree ...` (any `kubectl-*` on PATH).

    kubectl quotree tree [-o table|wide|json]
    kubectl quotree why POD [-n NAMESPACE]
    kubectl quotree pending [-n NAMESPACE | -A] [--quota Q | --cohort C] [-o table|json]
    kubectl quotree what-if FILE [FILE ...]
    kubectl quotree simulate [FILE ...] [-R] [-o table|json]
    kubectl quotree import [FILE ...|-] [-R]

The global flags (`-n/--namespace`, `-A/--all-namespaces`, `--context`, `--kubeconfig`)
go anywhere on the line, before or after the command, as with kubectl; without `-n` the
namespace is the kubeconfig context's (`default` when it names none). `--context` and
`--kubeconfig` are passed on to kubectl.

Exit codes: 0 done; 1 an error the user can fix (bad input, no cluster), in one line on
stderr; 2 a usage error or an internal error (never a traceback); `what-if` also 3 when the
webhook would refuse a proposed object and 4 when the proposal would evict pods
(preempted or reclaimed), so that it can gate a pipeline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quotree.cli import emit, package_version
from quotree.models import ConfigError
from quotree.podfacts import pod_facts
from quotree.quantity import add_amounts, format_quantity
from quotree.report import BAR_COLUMNS, legend, render_tree, tree_width
from quotree.simulate import (
    SimulationError,
    load_documents,
    render_json,
    render_table,
    simulate_documents,
)
from quotree.units import Units
from quotree_kubectl import import_cmd
from quotree_kubectl.cluster import ClusterState, Kubectl, PluginError, live_documents
from quotree_kubectl.pending import Selection, pending, render_pending, waiting_json
from quotree_kubectl.tree_view import pending_reasons, tree_report
from quotree_kubectl.what_if import render_what_if, what_if
from quotree_kubectl.why import why

__all__ = ["EVICTS", "REFUSED", "Answer", "main", "table_report"]

#: Width of the usage bars of `tree` (cells) when the terminal is wide enough, or `-o wide`.
BAR_WIDTH = 20


def _wrapped(text: str) -> str:
    """A description for a raw-text help page (the table's legend keeps its layout)."""
    return textwrap.fill(text, width=shutil.get_terminal_size().columns - 2)  # as argparse


def _global_flags(*, after_command: bool) -> argparse.ArgumentParser:
    """kubectl's global flags, taken before the command and after it (`after_command`: no
    defaults, so that a flag given before the command is not reset by the command's parser).
    """
    flags = argparse.ArgumentParser(add_help=False)
    unset = argparse.SUPPRESS if after_command else None
    flags.add_argument(
        "-n",
        "--namespace",
        default=unset,
        help="the namespace (default: the kubeconfig context's namespace, else default)",
    )
    flags.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        default=argparse.SUPPRESS if after_command else False,
        help="every namespace (pending)",
    )
    flags.add_argument("--context", default=unset, help="the kubeconfig context to use")
    flags.add_argument("--kubeconfig", default=unset, help="path to the kubeconfig file")
    return flags


def _command(commands: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A command's parser, taking the global flags after the command's name too."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, parents=[_global_flags(after_command=True)], **kwargs
    )
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl quotree",
        description="quotree's quota tree in the live cluster (read-only: it reads with "
        "kubectl, with your kubeconfig and context, and never writes).",
        parents=[_global_flags(after_command=False)],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="one of these:"
    )
    raw = argparse.RawDescriptionHelpFormatter
    tree = _command(
        commands,
        "tree",
        help="the quota tree from the Cohorts' and quotas' status",
        description=_wrapped(
            "The live tree as the operator last wrote it in the status of the Cohorts and "
            "ElasticQuotas, drawn as `quotree simulate` draws it, with the reasons of the "
            "pods that wait."
        ),
        epilog=legend(scaled=False),
        formatter_class=raw,
    )
    tree.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "json"),
        default="table",
        help="table: the tree (with usage bars when the terminal is wide enough); wide: "
        "always with usage bars (# used, = the rest of runtime, ! used above runtime); "
        "json: the report in the shape of `quotree simulate -o json`",
    )
    why_cmd = _command(
        commands,
        "why",
        help="why a pod waits, and what would let it in",
        description="Why a pod waits: the operator's reason, the engine's numbers along "
        "its quota's chain of Cohorts, and what would let it in (pods finishing, "
        "idle quota lent to others, a cap).",
    )
    why_cmd.add_argument("pod", metavar="POD", help="the pod's name")
    queue = _command(
        commands,
        "pending",
        help="the waiting pods and pod groups in the order quotree admits them",
        description=_wrapped(
            "The waiting units (pods and pod groups) in the order the engine takes them: "
            "their position in their ElasticQuota (priority, then the time they became "
            "complete, then name) and under each Cohort above it (as room appears under "
            "it), with their priority, age and reason. Of the namespace (-n, else the "
            "context's), or every namespace (-A); --quota and --cohort list the units under "
            "that ElasticQuota or Cohort in every namespace unless -n is given."
        ),
        formatter_class=raw,
    )
    under = queue.add_mutually_exclusive_group()
    under.add_argument("--quota", metavar="Q", help="only the units of ElasticQuota Q")
    under.add_argument("--cohort", metavar="C", help="only the units under Cohort C")
    queue.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table: one row per unit; json: the same for programs",
    )
    whatif = _command(
        commands,
        "what-if",
        help="the live tree with proposed Cohorts, ElasticQuotas or Nodes (nothing written)",
        description="Run the live cluster with proposed Cohorts, ElasticQuotas or Nodes "
        "through the engine without applying them: the rules they would break, each "
        "node's runtime before and after, and the pods that would be admitted, "
        "preempted or reclaimed. Exit code 3 when a proposed object would be refused, "
        "4 when it would evict pods, else 0.",
    )
    whatif.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="YAML files of Cohorts, ElasticQuotas and Nodes, as for kubectl apply -f",
    )
    whatif.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table: the runtimes before and after, and the pods; json: the same for programs",
    )
    sim = _command(
        commands,
        "simulate",
        help="the live cluster, then FILEs, through `quotree simulate` (nothing written)",
        description="Run the live Nodes, ResourceFlavors, Cohorts, ElasticQuotas and Pods, "
        "then the objects of FILEs, through the simulator, as `quotree simulate` runs files.",
    )
    sim.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="more objects after the live ones: files, directories or - for standard input",
    )
    sim.add_argument(
        "-R", "--recursive", action="store_true", help="read directories' sub-directories too"
    )
    sim.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table: the tree for a person to read (the default); json: the stable report",
    )
    import_cmd.add_parser(commands)
    return parser


def _simulate(kubectl: Kubectl, args: argparse.Namespace) -> str:
    """The live cluster, then FILEs, through the simulator (files read before the cluster)."""
    extra = list(load_documents(args.files, recursive=args.recursive))
    result = simulate_documents([*live_documents(ClusterState.read(kubectl)), *extra])
    for note in result.notes:  # kinds skipped, objects converted: said, not shown
        print(f"kubectl quotree: note: {note}", file=sys.stderr)
    if args.output == "json":
        return render_json(result)
    return render_table(result)


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


def _bar_width(output: str, report: Mapping[str, Any]) -> int:
    if output == "wide":
        return BAR_WIDTH
    if not sys.stdout.isatty():
        return 0
    columns = shutil.get_terminal_size((80, 24)).columns
    return BAR_WIDTH if columns >= tree_width(report) + BAR_WIDTH + BAR_COLUMNS else 0


def table_report(state: ClusterState, report: Mapping[str, Any]) -> dict[str, Any]:
    """`tree_report`'s report as the table shows it: with what unmanaged pods hold (bound,
    running pods that are not in its pods: quotree does not manage them) and quantities in
    the units they were written in."""
    held: dict[str, int] = {}
    for pod in state.pods:
        try:
            facts = pod_facts(pod)
        except (ConfigError, ValueError, TypeError, AttributeError):
            continue  # not ours to judge: the table is about the tree
        bound = facts.node_name and facts.phase not in ("Succeeded", "Failed")
        if bound and not facts.gated and facts.key not in report["pods"]:
            add_amounts(held, facts.request)
    units = Units()
    for obj in (*state.nodes, *state.flavors, *state.cohorts, *state.quotas, *state.pods):
        units.note_object(obj)
    data = dict(report)
    data["unmanaged"] = {
        r: format_quantity(held[r], r) for r in report["capacity"] if held.get(r, 0) > 0
    }
    return units.restyle_report(data)


@dataclass(frozen=True)
class Answer:
    """What a command prints, and its exit code when it is not 0."""

    text: str
    code: int = 0


#: `what-if`'s exit codes: a proposed object the webhook would refuse; pods it would evict.
REFUSED = 3
EVICTS = 4


def _namespace(kubectl: Kubectl, args: argparse.Namespace) -> str:
    """`-n`, else the kubeconfig context's namespace (kubectl's own rule)."""
    return str(args.namespace or kubectl.context_namespace())


def _what_if(kubectl: Kubectl, args: argparse.Namespace) -> Answer:
    proposed = list(load_documents(args.files))  # read the files before the cluster
    result = what_if(ClusterState.read(kubectl), proposed)
    code = REFUSED if result.refused else EVICTS if result.evicted() else 0
    if args.output == "json":
        import json  # noqa: PLC0415

        data = {
            "refused": result.refused,
            "warnings": result.warnings,
            "applied": result.applied,
            "before": result.before,
            "after": result.after,
        }
        return Answer(json.dumps(data, indent=2), code)
    return Answer(render_what_if(result), code)


def _pending(kubectl: Kubectl, args: argparse.Namespace) -> str:
    """`pending`: of -n's namespace, else of every namespace with -A, --quota or --cohort,
    else of the context's namespace."""
    if args.all_namespaces and args.namespace:
        raise PluginError("give -n NAMESPACE or -A, not both")
    everywhere = args.all_namespaces or (
        not args.namespace and (args.quota is not None or args.cohort is not None)
    )
    namespace = None if everywhere else _namespace(kubectl, args)
    units = pending(ClusterState.read(kubectl), Selection(namespace, args.quota, args.cohort))
    now = time.time()
    if args.output == "json":
        return waiting_json(units, now)
    return render_pending(units, now)


def run(args: argparse.Namespace) -> str | Answer:
    kubectl = _kubectl(args)
    if args.command == "simulate":
        return _simulate(kubectl, args)
    if args.command == "what-if":
        return _what_if(kubectl, args)
    if args.command == "why" and args.all_namespaces:
        raise PluginError("why takes one pod: give its namespace with -n, not -A")
    if args.command == "pending":
        return _pending(kubectl, args)
    state = ClusterState.read(kubectl)
    if args.command == "tree":
        report = tree_report(state, _reasons(kubectl, state))
        if args.output == "json":
            import json  # noqa: PLC0415

            return json.dumps(report, indent=2)
        table = table_report(state, report)
        return render_tree(table, bar_width=_bar_width(args.output, table))
    return why(state, _namespace(kubectl, args), args.pod, _reasons(kubectl, state))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "import":
        return import_cmd.run_import(args)  # no cluster: files in, YAML out
    try:
        out = run(args)
    except (PluginError, SimulationError) as exc:
        print(f"kubectl quotree: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # users never see a traceback
        if os.environ.get("QUOTREE_DEBUG"):
            raise
        print(f"kubectl quotree: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    answer = Answer(out) if isinstance(out, str) else out
    emit(answer.text)  # a reader that stops early (`| head`) is not an error
    return answer.code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
