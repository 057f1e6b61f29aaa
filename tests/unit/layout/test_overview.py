"""docs/overview.md stays a short map that answers "where is X decided?" and points at files and
functions that exist."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OVERVIEW = ROOT / "docs" / "overview.md"
# every file and directory under mqha/, relative to it: "controller/election.py", "broker/commitlog"
UNDER_MQHA = {
    p.relative_to(ROOT / "mqha").as_posix()
    for p in (ROOT / "mqha").rglob("*")
    if "__pycache__" not in p.parts
}
# `a/b.py`, `a/b` (a module or a package) or `a/b/`: a path under mqha/, or its tail (`commitlog/codec.py`)
PATH = re.compile(r"`((?:[a-z_0-9]+/)+[a-z_0-9]*(?:\.(?:py|c))?)`")
OUTSIDE_MQHA = ("mqha/", "tests/", "docs/", "scripts/", "conf/", "helm/")
DECISIONS = ("election", "SyncStateSet", "truncation", "ack", "retention", "authorization")
NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?")


def test_the_overview_is_short() -> None:
    assert len(OVERVIEW.read_text().splitlines()) <= 300


def _decision_rows() -> list[str]:
    table = OVERVIEW.read_text().split("## Where each decision lives", 1)[1].split("\n## ", 1)[0]
    return [line for line in table.splitlines() if line.startswith("| ")]


def test_the_overview_says_where_each_decision_lives() -> None:
    rows = _decision_rows()
    for decision in DECISIONS:
        assert any(re.match(rf"\| \**{decision}\b", row) for row in rows), decision


def _exists(path: str) -> bool:
    names = {path.rstrip("/"), path.rstrip("/") + ".py"}
    return any(found in names or found.endswith(tuple("/" + name for name in names)) for found in UNDER_MQHA)


def test_every_path_in_the_overview_exists() -> None:
    named = set(PATH.findall(OVERVIEW.read_text()))
    missing = sorted(path for path in named if not path.startswith(OUTSIDE_MQHA) and not _exists(path))
    assert not missing, f"docs/overview.md names paths under mqha/ that do not exist: {missing}"


def _source(path: str) -> Path | None:
    """The file of a module or package named by ``path`` (or the tail of it)."""
    for candidate in (path + ".py", path + "/__init__.py", path):
        found = [f for f in UNDER_MQHA if f == candidate or f.endswith("/" + candidate)]
        if found and (ROOT / "mqha" / found[0]).is_file():
            return ROOT / "mqha" / found[0]
    return None


def _defined(source: Path) -> set[str]:
    """Top-level names of a module (functions, classes, assignments, imports) and ``Class.member``."""
    names = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    names |= {f"{node.name}.{member.name}", member.name}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return names


def test_every_function_in_the_decision_table_exists() -> None:
    """In the core and shell cells, each name after a path is defined in that module."""
    missing = []
    for row in _decision_rows()[2:]:
        for cell in row.split(" | ")[1:3]:
            source = None
            for token in re.findall(r"`([^`]+)`", cell):
                if PATH.fullmatch(f"`{token}`"):
                    source = _source(token.rstrip("/"))
                elif source and NAME.fullmatch(token) and token not in _defined(source):
                    missing.append(f"{token} in {source.relative_to(ROOT)}")
    assert not missing, f"docs/overview.md names functions that do not exist: {missing}"
