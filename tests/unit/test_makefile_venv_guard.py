"""`make` never installs this tree into a venv outside it (Makefile, the install step).

Running `make lint BIN=<another tree's venv>/bin` from a second worktree used to re-run
`pip install -e .` there, which pointed that venv's quotree at the second worktree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Not inside the `make test` that runs this: its flags and variables would reach the make here.
ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"}
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the Makefile with a pyproject.toml newer than any install stamp."""
    if shutil.which("make") is None:
        pytest.fail("make is needed (the README's commands use it)")
    here = tmp_path / "tree"
    here.mkdir()
    shutil.copy(REPO / "Makefile", here / "Makefile")
    (here / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return here


def _make(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=tree,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_venv_outside_the_tree_is_refused_in_one_line(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / ".venv" / "bin"
    real = _make(tree, "venv", f"BIN={other}")
    assert real.returncode != 0
    assert f"make: BIN={other} is outside this tree" in real.stderr
    assert "STAMP=<an existing file>" in real.stderr
    assert not (tmp_path / "other").exists()  # nothing was made or installed there


def test_the_trees_own_venv_is_installed_as_before(tree: Path) -> None:
    done = _make(tree, "-n", "venv")  # what it would run: nothing is installed
    assert done.returncode == 0, done.stderr
    assert "pip install --quiet -e '.[dev]'" in done.stdout
