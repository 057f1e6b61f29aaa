"""Module and class shape (docs/architecture.md §11): modules stay small, every class names its one job.

Read with ``ast`` only, so no module is imported (and no optional extra is needed) to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted((ROOT / "mqha").rglob("*.py"))
MAX_LINES = 500
MAX_SUMMARY = 110  # ruff's line length: a job said in one line a reader takes in at a glance

# Pure data catalogues may be longer: a table reads best whole. Path (from the repository root) -> why.
LONG_CATALOGUES: dict[str, str] = {
    "mqha/controller/openapi.py": "the OpenAPI catalogue: one entry per route of the controller API",
}


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
