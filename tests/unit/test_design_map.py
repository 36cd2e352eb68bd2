"""The design pages' map and module table name code that exists, so that they cannot drift.

The map (docs/design/map.md: each decision, and the one function that makes it) names,
in its function column, `module.name` or `module.Class.member` of the `quotree` package,
or a shell's `package.module.Class.member`. Each is imported here: a name the code no
longer has, or one written without its module, fails. The module table
(docs/design/modules.md) lists every module of `quotree/` once. Elsewhere in the docs, a
backticked `Class.member` of a class the code defines must name a member that class has.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import textwrap
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

import quotree

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "design" / "map.md"
MODULES = ROOT / "docs" / "design" / "modules.md"
DOCS = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
#: The shells' packages: their names are written in full in the map.
SHELLS = ("quotree_operator", "quotree_webhooks", "quotree_kubectl")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
CODE = re.compile(r"`([^`]+)`")


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row of `text`, headers and rules left out."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells[:2] in (["decision", "function"], ["module", "what it is for"]):
            continue
        rows.append(cells)
    return rows


def _set_in_init(cls: type, name: str) -> bool:
    """Whether `cls.__init__` (or a base's) sets `self.<name>`: an instance attribute."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or not inspect.isfunction(init):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == name
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    return True
    return False


def _member(owner: object, name: str) -> object | None:
    """`owner.name`, where an instance attribute of a class counts too; None: no such."""
    if hasattr(owner, name):
        return getattr(owner, name)
    if inspect.isclass(owner) and _set_in_init(owner, name):
        return inspect  # exists (on instances): nothing further down is looked up
    return None


def resolve(name: str) -> str | None:
    """Why the map's `name` does not name code (None: it does).

    `fit.check` is `quotree.fit.check`; `decide.Decider._only_shrank` is the method of
    `quotree.decide.Decider`; a shell's name starts with its package. A bare
    `Class.member` is refused: the map says which module to open.
    """
    parts = name.split(".")
    if parts[0] in SHELLS:
        package, module_name, rest = parts[0], parts[1], parts[2:]
        dotted = f"{package}.{module_name}"
    else:
        module_name, rest = parts[0], parts[1:]
        dotted = f"quotree.{module_name}"
    try:
        owner: object = importlib.import_module(dotted)
    except ModuleNotFoundError:
        return f"no module {dotted}"
    if not rest:
        return f"{name} names a module, not a function or class in it"
    walked = dotted
    for part in rest:
        if owner is inspect:
            return f"{walked} is an instance attribute: nothing below it is looked up"
        found = _member(owner, part)
        if found is None:
            return f"{walked} has no {part}"
        owner, walked = found, f"{walked}.{part}"
    return None


def map_names() -> list[str]:
    """Every backticked name in the map's function column."""
    rows = table_rows(MAP.read_text())
    assert rows, "the map has no rows"
    names = []
    for cells in rows:
        assert len(cells) == 2, f"a map row without two cells: {cells}"
        found = CODE.findall(cells[1])
        assert found, f"a map row that names no function: {cells[0]}"
        names.extend(found)
    return names


@pytest.mark.parametrize("name", sorted(set(map_names())))
def test_every_name_in_the_map_is_code_that_exists(name: str) -> None:
    assert DOTTED.fullmatch(name), (
        f"`{name}` in the map is not a `module.name` (write it as the code has it)"
    )
    assert resolve(name) is None, f"`{name}` in the map: {resolve(name)}"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("decide.Decider._place_on_flavor", "quotree.decide.Decider has no _place_on_flavor"),
        ("Decider.decide", "no module quotree.Decider"),
        ("fit.Seats", None),
        ("ledger.Ledger.touched", None),  # set in __init__
        ("ledger.Ledger.touched.bogus", "is an instance attribute"),
        ("quotree_operator.inputs.Inputs.admitting", None),
        ("quotree_operator.inputs.Inputs.gone", "quotree_operator.inputs.Inputs has no gone"),
        ("options.EngineOptions.holds", None),
    ],
)
def test_resolve_refuses_a_name_the_code_does_not_have(name: str, why: str | None) -> None:
    answer = resolve(name)
    if why is None:
        assert answer is None, answer
    else:
        assert answer is not None
        assert why in answer, answer


def engine_modules() -> set[str]:
    return {m.name for m in pkgutil.iter_modules(quotree.__path__) if not m.name.startswith("_")}


def test_the_module_table_lists_every_engine_module_once() -> None:
    rows = table_rows(MODULES.read_text())
    listed = [CODE.fullmatch(cells[0]) for cells in rows]
    assert all(listed), f"a module cell that is not one `name`: {[c[0] for c in rows]}"
    names = [m.group(1) for m in listed if m is not None]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"listed more than once: {twice}"
    assert set(names) == engine_modules(), (
        f"missing from the table: {sorted(engine_modules() - set(names))}; "
        f"not modules of quotree/: {sorted(set(names) - engine_modules())}"
    )
    for name in names:
        assert isinstance(importlib.import_module(f"quotree.{name}"), ModuleType)


@cache
def code_classes() -> dict[str, list[type]]:
    """Every class the engine and the shells define, by name."""
    classes: dict[str, list[type]] = {}
    for package_name in ("quotree", *SHELLS):
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package_name}.{info.name}")
            for value in vars(module).values():
                if inspect.isclass(value) and value.__module__ == module.__name__:
                    classes.setdefault(value.__name__, []).append(value)
    return classes


def test_a_class_member_named_anywhere_in_the_docs_exists() -> None:
    stale = []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for code in CODE.findall(line):
                name = re.sub(r"\(.*\)$", "", code.strip())
                if not DOTTED.fullmatch(name):
                    continue
                first, *rest = name.split(".")
                classes = code_classes().get(first)
                if not classes:
                    continue
                if not any(_walks(cls, rest) for cls in classes):
                    stale.append(f"{doc.relative_to(ROOT)}:{number}: {code}")
    assert not stale, "names the code no longer has:\n" + "\n".join(stale)


def _walks(owner: object, parts: list[str]) -> bool:
    for part in parts:
        if owner is inspect:
            return True
        found = _member(owner, part)
        if found is None:
            return False
        owner = found
    return True
