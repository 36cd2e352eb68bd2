"""The size the project keeps: no module of the engine or the shells over 400 lines, so that
each part is read in one sitting (docs/design/modules.md)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("quotree", "operator", "webhooks", "plugin")
LIMIT = 400


def test_no_module_is_over_400_lines() -> None:
    over = {
        str(path.relative_to(ROOT)): lines
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > LIMIT
    }
    assert not over, f"modules over {LIMIT} lines (split them along a seam): {over}"
