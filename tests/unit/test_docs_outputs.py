"""The command output shown in README.md and docs/**/*.md is the real output (tests/doc_outputs.py).

The offline commands run here and are compared with their blocks; the blocks that need
the local control plane must be produced by an e2e test that names their command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import doc_outputs
from tests.doc_outputs import Block, DocFormatError, all_blocks, parse, rewrite, run_offline

E2E = doc_outputs.REPO / "tests" / "e2e"
#: The e2e tests that produce the blocks marked `output (e2e)`.
LIVE_PRODUCERS = (E2E / "test_demo_outputs.py", E2E / "test_startup_failures.py")

BLOCKS = all_blocks()
OFFLINE = [b for b in BLOCKS if not b.e2e]
LIVE = [b for b in BLOCKS if b.e2e]
FENCE = "```"


def test_the_docs_show_output_blocks_of_both_kinds() -> None:
    # The README's simulate table is offline; `make run`'s transcript needs the cluster.
    assert any(b.command.startswith("quotree simulate ") for b in OFFLINE)
    assert any(b.command == "make run" for b in LIVE)


@pytest.mark.parametrize("block", OFFLINE, ids=Block.where)
def test_an_offline_block_shows_what_its_command_prints(block: Block) -> None:
    assert block.shown == run_offline(block.command), (
        f"{block.where()}: the output of `{block.command}` changed; `make docs` rewrites it"
    )


@pytest.mark.parametrize("block", LIVE, ids=Block.where)
def test_a_live_block_is_produced_by_an_e2e_test(block: Block) -> None:
    named = [p.name for p in LIVE_PRODUCERS if f'"{block.command}"' in p.read_text()]
    assert named, (
        f"{block.where()}: no e2e test ({', '.join(p.name for p in LIVE_PRODUCERS)}) "
        f"produces `{block.command}`"
    )


def test_an_output_block_without_a_marker_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"# t\n\nText.\n\n{FENCE}\nsome output\n{FENCE}\n")
    with pytest.raises(DocFormatError, match=r"doc\.md:5: a fenced block with no language"):
        parse(doc)


def test_blocks_with_a_language_need_no_marker(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"{FENCE}sh\nmake run\n{FENCE}\n\n{FENCE}text\nlayout\n{FENCE}\n")
    assert parse(doc) == []


def test_a_misspelt_marker_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- output quotree --help -->\n{FENCE}\nx\n{FENCE}\n")
    with pytest.raises(DocFormatError, match=r"doc\.md:1: a marker reads"):
        parse(doc)


def test_rewrite_replaces_only_the_output_and_keeps_the_prompt_line(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Before.\n\n"
        f"<!-- output (e2e): kubectl quotree tree -->\n{FENCE}\n$ kubectl quotree tree\nold\n"
        f"{FENCE}\n\nBetween.\n\n"
        f"<!-- output: quotree --version -->\n{FENCE}\nold 1\nold 2\n{FENCE}\nAfter.\n"
    )
    first, second = parse(doc)
    assert (first.prompt, first.shown, first.e2e) == (True, "old", True)
    assert (second.prompt, second.shown, second.e2e) == (False, "old 1\nold 2", False)

    changed = rewrite({(doc, first.line): "new a\nnew b   \n\n", (doc, second.line): "new"})

    assert set(changed) == {f"{doc}:{first.line}", f"{doc}:{second.line}"}
    assert doc.read_text() == (
        "Before.\n\n"
        f"<!-- output (e2e): kubectl quotree tree -->\n{FENCE}\n$ kubectl quotree tree\n"
        f"new a\nnew b\n{FENCE}\n\nBetween.\n\n"
        f"<!-- output: quotree --version -->\n{FENCE}\nnew\n{FENCE}\nAfter.\n"
    )
    assert rewrite({(doc, first.line): "new a\nnew b"}) == []  # nothing to change


def test_only_quotree_commands_run_offline() -> None:
    with pytest.raises(DocFormatError, match=r"only `quotree \.\.\.` commands run offline"):
        run_offline("kubectl get pods")
