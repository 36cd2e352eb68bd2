"""The test tree itself. pytest imports test modules by basename (no packages), so two
test files with one name in different folders stop the whole run at collection. And the
objects tests build come from one set of builders, so they read the same in every test."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_basename_of_its_own() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        where[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a basename (rename one): {clashes}"


#: The shared builders: tests/unit/builders.py (the engine's values), tests/unit/objects.py
#: (objects as the API sends them) and, for the e2e tests, tests/e2e/kube_helpers.py.
BUILDER_MODULES = {"unit/builders.py", "unit/objects.py", "e2e/kube_helpers.py"}
BUILDER_NAMES = {"cohort", "quota", "pod", "node", "eq", "coh", "cohort_config", "quota_config"}


def test_builders_are_defined_once() -> None:
    # A test module that needs another default passes a keyword argument (or adds one to
    # the shared builder) instead of writing its own copy.
    copies = []
    for path in sorted(TESTS.rglob("*.py")):
        where = str(path.relative_to(TESTS))
        if where in BUILDER_MODULES:
            continue
        for item in ast.walk(ast.parse(path.read_text(), filename=where)):
            if isinstance(item, ast.FunctionDef) and item.name in BUILDER_NAMES:
                copies.append(f"{where}:{item.lineno} def {item.name}")
    assert not copies, f"use the builders of {sorted(BUILDER_MODULES)} instead: {copies}"
