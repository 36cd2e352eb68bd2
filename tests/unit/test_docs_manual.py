"""The docs read as a manual: their links resolve, their pages can be read in one sitting,
and neither they nor the code cite the project's issue tracker.

- Every relative link of README.md and docs/**/*.md (`[text](target)`, images too, outside
  code) names a file or folder that exists, and its `#anchor`, if any, a heading of that
  page (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens, `-1`, `-2`
  for repeats).
- No page of docs/ (nor README.md) is over 400 lines, and bench/RESULTS.md is under 300:
  a longer page is split by topic (docs/design/ is the example), its history moved apart.
- No file of the code or the docs cites an issue by its number: a comment or a page says
  the fact, not which ticket asked for it (the tracker is not part of the repository).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGE_LINES = 400
RESULTS_LINES = 300
#: Where code and docs live (the issue-number check reads every text file under them).
CODE_AND_DOCS = (
    "quotree",
    "operator",
    "webhooks",
    "plugin",
    "tests",
    "bench",
    "hack",
    "docs",
    "README.md",
    "charts",
    "manifests",
)
#: The word for a tracker's ticket, then a number, as the unit test below spells out
#: (the pattern is built in two pieces so that this file does not match itself).
ISSUE_NUMBER = re.compile("iss" + r"ues?\s*#?\d", re.IGNORECASE)

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines of a Markdown text outside fenced code, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (before the `-1`, `-2` of repeats)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a link may name in the page at `path`."""
    found: set[str] = set()
    seen: Counter[str] = Counter()
    for _, line in prose_lines(path.read_text()):
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    return frozenset(found)


def links(path: Path) -> list[tuple[int, str]]:
    """The link targets of a page, with their lines, code spans and blocks left out."""
    out = []
    for number, line in prose_lines(path.read_text()):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            out.append((number, target))
    return out


def broken(page: Path, target: str) -> str | None:
    """Why the link `target` of `page` does not resolve (None: it does)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
        return None  # http:, https:, mailto: are not this test's
    where, _, anchor = target.partition("#")
    file = (page.parent / where).resolve() if where else page
    if not file.exists():
        return f"no such file {where}"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"no heading #{anchor} in {where or page.name}"
    return None


def test_every_relative_link_and_anchor_resolves() -> None:
    bad = []
    for page in DOCS:
        for number, target in links(page):
            why = broken(page, target)
            if why:
                bad.append(f"{page.relative_to(ROOT)}:{number}: ({target}) {why}")
    assert not bad, "broken links:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("## `make run`", "make-run"),
        ("## Several trees (forests)", "several-trees-forests"),
        (
            "### Example 1 (the Koordinator proposal's example, completed)",
            "example-1-the-koordinator-proposals-example-completed",
        ),
        ("## Runtime: how a parent's total is shared", "runtime-how-a-parents-total-is-shared"),
        ("## Maintenance mode (MCAD's)", "maintenance-mode-mcads"),
        ("## quotree_admissions_total", "quotree_admissions_total"),
    ],
)
def test_anchors_are_githubs(heading: str, anchor: str) -> None:
    assert slug(HEADING.match(heading).group(2)) == anchor  # type: ignore[union-attr]


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    other = tmp_path / "other.md"
    other.write_text("# Other\n\n## A part\n\n## A part\n")
    page.write_text(
        "[ok](other.md#a-part) [repeat](other.md#a-part-1) [here](#top)\n"
        "[gone](missing.md) [no anchor](other.md#nowhere) `[code](missing.md)`\n"
        "```\n[fenced](missing.md)\n```\n# Top\n"
    )
    found = {target: broken(page, target) for _, target in links(page)}
    assert found["other.md#a-part"] is None
    assert found["other.md#a-part-1"] is None
    assert found["#top"] is None
    assert found["missing.md"] == "no such file missing.md"
    assert "no heading #nowhere" in str(found["other.md#nowhere"])
    assert len(found) == 5  # the code span's and the fenced block's links are not links


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_page_is_over_400_lines(page: Path) -> None:
    lines = len(page.read_text().splitlines())
    assert lines <= PAGE_LINES, (
        f"{page.relative_to(ROOT)} has {lines} lines, over {PAGE_LINES}: split it by topic "
        "(or move its history apart)"
    )


def test_bench_results_is_under_300_lines() -> None:
    results = ROOT / "bench" / "RESULTS.md"
    lines = len(results.read_text().splitlines())
    assert lines < RESULTS_LINES, (
        f"bench/RESULTS.md has {lines} lines, not under {RESULTS_LINES}: keep the current "
        "figures there and move older sections to bench/history/"
    )


def text_files() -> list[Path]:
    files = []
    for name in CODE_AND_DOCS:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in candidates:
            if "__pycache__" in path.parts:
                continue
            files.append(path)
    return files


def test_no_code_or_doc_cites_an_issue_number() -> None:
    cited = []
    for path in text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue  # binary test data, images
        for number, line in enumerate(text.splitlines(), 1):
            if ISSUE_NUMBER.search(line):
                cited.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not cited, "say the fact, not the issue that asked for it:\n" + "\n".join(cited)


def test_the_issue_pattern_finds_the_usual_spellings() -> None:
    word = "iss" + "ue"  # in pieces, as the pattern is
    for text in (f"see {word} 12", f"({word.title()} #3)", f"{word}s 9 and 12", f"{word}12"):
        assert ISSUE_NUMBER.search(text), text
    for text in (f"an {word} with 2 pods", f"{word}d 3 times", f"the {word}"):
        assert not ISSUE_NUMBER.search(text), text
