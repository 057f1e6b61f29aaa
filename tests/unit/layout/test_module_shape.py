"""Module, function and class shape (docs/architecture.md §11): code is cut by meaning, not by length.

Modules stay under a generous cap (a sign two jobs share a file), functions stay short (the unit a
reader holds in mind), and every class names its one job.

Read with ``ast`` only, so no module is imported (and no optional extra is needed) to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted((ROOT / "mqha").rglob("*.py"))
MAX_LINES = 700
MAX_FUNCTION_LINES = 70
MAX_SUMMARY = 110  # ruff's line length: a job said in one line a reader takes in at a glance

# Pure data catalogues may be longer: a table reads best whole. Path (from the repository root) -> why.
LONG_CATALOGUES: dict[str, str] = {}


# Functions allowed to be longer. "path:qualified name" -> why. An entry that no longer applies fails.
LONG_FUNCTIONS: dict[str, str] = {
    "mqha/analysis/spark_checks.py:offset_pass": "one Spark plan, read top to bottom",
    "mqha/analysis/synthetic.py:write_synthetic": "one scripted history, step by step",
    "mqha/bench/controller_report.py:controller_report": "one report's lines in print order",
    "mqha/broker/__main__.py:Broker.__init__": "the broker's parts wired in start order",
    "mqha/broker/commitlog/scanning.py:scan_units": "the record checks in the on-disk order of §9.1",
    "mqha/chaos/cli.py:dispatch": "one table of subcommands",
    "mqha/chaos/verdict.py:judge": "the verdict's checks in report order",
    "mqha/chaos/verdict.py:_client_lines": "the client report's lines in print order",
    "mqha/cli.py:main": "the argument table of the mqha command",
    "mqha/cluster/commands.py:add_subcommands": "the argument table of mqha cluster",
    "mqha/controller/openapi.py:_operations": "the OpenAPI catalogue, one entry per route",
}


def _functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, line count) of every function and method in the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                found.append((name, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _classes(path: Path) -> list[ast.ClassDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def _summary_problem(node: ast.ClassDef) -> str | None:
    """Why the first line of the class's docstring does not name a job, or None when it does."""
    doc = ast.get_docstring(node)
    if not doc or not doc.strip():
        return "has no docstring"
    first = doc.strip().splitlines()[0].strip()
    if not first.endswith("."):
        return f"docstring's first line is not one sentence ending in a period: {first!r}"
    if len(first) > MAX_SUMMARY:
        return f"docstring's first line is {len(first)} characters (at most {MAX_SUMMARY}): {first!r}"
    if first.startswith("docs/"):
        return f"docstring's first line opens with a citation instead of the job: {first!r}"
    if len(first.split()) < 3:
        return f"docstring's first line is too short to name a job: {first!r}"
    return None


def test_the_package_has_modules() -> None:
    assert len(MODULES) > 50


def test_the_allow_list_names_existing_long_modules() -> None:
    """An allow-list entry whose module shrank or vanished is dropped, so the list stays honest."""
    for name, why in LONG_CATALOGUES.items():
        path = ROOT / name
        assert path.exists(), f"{name} is allowed to be long but does not exist"
        assert why.strip(), f"{name} is allowed to be long without a reason"
        assert len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES, f"{name} is short now"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_is_over_the_line_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if _name(path) in LONG_CATALOGUES:
        return
    assert lines <= MAX_LINES, (
        f"{_name(path)} has {lines} lines (at most {MAX_LINES}): split it by job, "
        "or list it in LONG_CATALOGUES if it is a pure data catalogue"
    )


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_every_class_names_its_job_in_its_docstring(path: Path) -> None:
    problems = [
        f"{_name(path)}:{node.lineno} class {node.name} {problem}"
        for node in _classes(path)
        if (problem := _summary_problem(node)) is not None
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_function_is_over_the_line_limit(path: Path) -> None:
    long = [
        f"{_name(path)}:{name} has {lines} lines (at most {MAX_FUNCTION_LINES})"
        for name, lines in _functions(path)
        if lines > MAX_FUNCTION_LINES and f"{_name(path)}:{name}" not in LONG_FUNCTIONS
    ]
    assert not long, "\n".join(long) + ": split it by step, or name it in LONG_FUNCTIONS with why"


def test_the_long_function_list_names_existing_long_functions() -> None:
    lengths = {f"{_name(path)}:{name}": lines for path in MODULES for name, lines in _functions(path)}
    for key in LONG_FUNCTIONS:
        assert lengths.get(key, 0) > MAX_FUNCTION_LINES, f"{key} is in LONG_FUNCTIONS but is short or gone"
