"""The help of `quotree` and `kubectl quotree`: every option and subcommand explained,
the table's columns in a legend, `--version`; and the plugin's table as simulate's."""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable, Iterator

import pytest

from quotree import cli
from quotree.report import COLUMNS, render_tree
from quotree_kubectl import cli as plugin_cli
from tests.unit.live_objects import live_cluster, quota_pod

COMMANDS: list[tuple[str, Callable[[], argparse.ArgumentParser]]] = [
    ("quotree", cli._parser),
    ("kubectl quotree", plugin_cli._parser),
]


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and its subcommands' parsers."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


@pytest.mark.parametrize(("name", "make"), COMMANDS)
def test_every_option_and_argument_has_help(
    name: str, make: Callable[[], argparse.ArgumentParser]
) -> None:
    for parser in parsers(make()):
        assert parser.description, parser.prog
        for action in parser._actions:
            assert action.help, f"{parser.prog}: {action.option_strings or action.dest}"


@pytest.mark.parametrize(
    ("main", "prog"), [(cli.main, "quotree"), (plugin_cli.main, "kubectl quotree")]
)
def test_version(
    main: Callable[[list[str]], int], prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"{prog} {importlib.metadata.version('quotree')}\n"


def help_of(
    main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize(("main", "argv"), [(cli.main, ["simulate"]), (plugin_cli.main, ["tree"])])
def test_the_help_explains_each_column_of_the_table(
    main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = help_of(main, argv, capsys)
    for title in ["RESOURCE", *(t for t, _ in COLUMNS)]:
        line = next((ln for ln in text.splitlines() if ln.split()[:1] == [title]), None)
        assert line is not None, f"{title} not explained:\n{text}"
        assert len(line.split()) > 3, line


def test_simulate_help_explains_the_output_option(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(cli.main, ["simulate"], capsys)
    assert "json: the stable report" in " ".join(text.split())
    assert "scaled 3500m" in text


def test_the_plugin_lists_its_subcommands_one_line_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_of(plugin_cli.main, [], capsys)
    lines = text.splitlines()
    for command in ("tree", "why", "what-if"):
        line = next(ln for ln in lines if ln.split()[:1] == [command])
        assert len(line.split()) > 3, line


def test_the_plugins_tree_says_what_unmanaged_pods_hold_in_the_units_written() -> None:
    state = live_cluster()
    dns = quota_pod("kube-system", "dns", "1", gated=False, created="2026-01-01T00:00:00Z")
    dns["spec"]["containers"][0]["resources"]["requests"]["memory"] = "100M"
    state.pods[3] = dns
    state.nodes[0]["status"]["allocatable"]["memory"] = "16G"
    state.quotas[0]["spec"]["min"]["memory"] = "1G"
    report = plugin_cli.tree_report(state, {})
    assert report["nodes"]["team-a"]["min"]["memory"] == "1000000000"  # the status's way
    table = plugin_cli.table_report(state, report)
    assert table["nodes"]["team-a"]["min"]["memory"] == "1G"
    assert render_tree(table).splitlines()[0] == (
        "cluster (capacity: cpu 7, memory 15900M; unmanaged pods hold cpu 1 of 8, "
        "memory 100M of 16G allocatable)"
    )
