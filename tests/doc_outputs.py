"""Command output shown in README.md and docs/**/*.md, kept equal to what the commands print.

In those files a fenced block with no language is command output, and the line before it
names the command in a marker comment:

    <!-- output: quotree simulate examples/koordinator-runtime.yaml -->
    <fence>
    cluster (capacity: example.com/unit 100)
    ...
    <fence>

- `output:` commands run without a cluster (`quotree ...`, the venv's console script):
  tests/unit/test_docs_outputs.py runs each one and compares, and `make docs`
  (`python -m tests.doc_outputs`) rewrites the blocks from the real output.
- `output (e2e):` commands need the local control plane: tests/e2e/test_demo_outputs.py
  (`make run`'s demo) and tests/e2e/test_startup_failures.py (the missing CRDs' line)
  produce them and compare (with the tokens that change from run to run normalised, see
  there); `QUOTREE_UPDATE_DOCS=1` makes them rewrite them (E2E_UPDATE is the command).

A block whose first line is `$ COMMAND` shows the command as typed; the output starts on
the next line. Lines are compared and written without trailing spaces.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
MARKER = re.compile(r"^<!-- output(?P<e2e> \(e2e\))?: (?P<command>.+?) -->$")
FENCE = "```"
#: Offline commands run with a fixed terminal width, so argparse's help wraps the same way.
COLUMNS = "100"
#: Rewrites the `output (e2e):` blocks (the control plane up, or started by the tests).
E2E_UPDATE = (
    "QUOTREE_UPDATE_DOCS=1 .venv/bin/pytest -q tests/e2e/test_demo_outputs.py "
    'tests/e2e/test_startup_failures.py -k "demo or missing_crds"'
)


def doc_files() -> list[Path]:
    """README.md and every page under docs/, the files whose outputs are checked."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One marked output block: where it is, which command makes it, what it shows."""

    path: Path
    line: int  # 1-based line of the marker
    command: str
    e2e: bool
    prompt: bool  # the block starts with `$ COMMAND`
    shown: str  # the output shown (without the prompt line)

    def where(self) -> str:
        return f"{_name(self.path)}:{self.line}"


def _name(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


class DocFormatError(ValueError):
    """A marker without a block, or an output block without a marker."""


def parse(path: Path) -> list[Block]:
    """Every marked block of a file; raises DocFormatError naming the line of a bad one."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    name = _name(path)
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith(FENCE):
            if line.startswith("<!-- output") and not MARKER.match(line):
                raise DocFormatError(f"{name}:{i + 1}: a marker reads <!-- output: COMMAND -->")
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(FENCE)), None)
        if end is None:
            raise DocFormatError(f"{name}:{i + 1}: a fenced block that is never closed")
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        if line == FENCE and marker is None:
            raise DocFormatError(
                f"{name}:{i + 1}: a fenced block with no language is command output and "
                "needs a marker line before it (<!-- output: COMMAND -->); give other blocks "
                "a language (```text, ```sh)"
            )
        if marker is not None:
            if line != FENCE:
                raise DocFormatError(f"{name}:{i + 1}: an output block has no language")
            body = lines[i + 1 : end]
            command = marker["command"]
            prompt = bool(body) and body[0] == f"$ {command}"
            shown = "\n".join(body[1:] if prompt else body)
            blocks.append(Block(path, i, command, bool(marker["e2e"]), prompt, shown))
        i = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in parse(path)]


def clean(text: str) -> str:
    """Trailing spaces and trailing blank lines off, as the docs keep them."""
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def run_offline(command: str) -> str:
    """Run an offline `quotree ...` command from the repository root; its standard output."""
    argv = shlex.split(command)
    if Path(argv[0]).name != "quotree":
        raise DocFormatError(f"{command!r}: only `quotree ...` commands run offline")
    env = dict(os.environ, COLUMNS=COLUMNS)
    done = subprocess.run(
        [str(VENV_BIN / "quotree"), *argv[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"{command}: exit {done.returncode}\n{done.stderr}")
    return clean(done.stdout)


def rewrite(outputs: dict[tuple[Path, int], str]) -> list[str]:
    """Put new output into the blocks keyed by (file, marker line); returns what changed."""
    changed: list[str] = []
    for path in sorted({path for path, _ in outputs}):
        blocks = {b.line: b for b in parse(path)}
        lines = path.read_text().splitlines()
        here = len(changed)
        # Bottom-up, so earlier line numbers stay valid. The marker is on 1-based line n,
        # the opening fence at index n, the block's first line at index n + 1.
        for line in sorted((n for (p, n) in outputs if p == path), reverse=True):
            block = blocks[line]
            new = clean(outputs[(path, line)])
            if new == block.shown:
                continue
            end = next(j for j in range(line + 1, len(lines)) if lines[j].startswith(FENCE))
            body = ([f"$ {block.command}"] if block.prompt else []) + new.splitlines()
            lines[line + 1 : end] = body
            changed.append(block.where())
        if len(changed) > here:
            path.write_text("\n".join(lines) + "\n")
    return changed


def check_live(command: str, actual: str, normalise: Callable[[str], str] = str) -> None:
    """Compare what an e2e test produced with every block marked `output (e2e): command`.

    `normalise` is applied to both sides (tokens that change from run to run). With
    QUOTREE_UPDATE_DOCS=1 the blocks are rewritten with `actual` instead."""
    blocks = [b for b in all_blocks() if b.e2e and b.command == command]
    assert blocks, f"no doc block is marked <!-- output (e2e): {command} -->"
    actual = clean(actual)
    if os.environ.get("QUOTREE_UPDATE_DOCS") == "1":
        rewrite({(b.path, b.line): actual for b in blocks})
        return
    for block in blocks:
        shown, real = normalise(block.shown), normalise(actual)
        diff = "\n".join(
            difflib.unified_diff(shown.splitlines(), real.splitlines(), "docs", "real", lineterm="")
        )
        assert shown == real, (
            f"{block.where()}: the output of `{command}` differs (normalised; "
            f"QUOTREE_UPDATE_DOCS=1 rewrites it):\n{diff}"
        )


def main() -> int:
    """`make docs`: rewrite every offline output block from the real output."""
    try:
        blocks = [b for b in all_blocks() if not b.e2e]
        outputs = {(b.path, b.line): run_offline(b.command) for b in blocks}
    except (DocFormatError, AssertionError) as exc:
        print(f"make docs: {exc}", file=sys.stderr)
        return 1
    changed = rewrite(outputs)
    for where in changed:
        print(f"rewritten: {where}")
    print(f"{len(blocks)} output blocks checked, {len(changed)} rewritten")
    e2e = [b.where() for b in all_blocks() if b.e2e]
    if e2e:
        print(f"{len(e2e)} blocks need the local control plane: {E2E_UPDATE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
