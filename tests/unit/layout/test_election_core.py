"""No election decision outside the election core (docs/architecture.md §3.2, issue 48).

``mqha.controller.election`` decides when to elect, whom, and what an attempt leaves behind. The
controller's shells (every controller module the ``cores`` contract of .importlinter does not list)
only gather inputs and carry out effects, so in them:

- no call of the functions that choose (whom to elect, the verdict of an attempt, the watermark);
- no condition on the facts the rule reads (start reports, waits, watermarks, losses, fences);
- no condition that asks whether the master is alive (the inactive-master rule).

Read with ``ast`` only; the arguments of a call are not conditions (handing a fact to the core is
gathering it).
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CONTROLLER = ROOT / "mqha" / "controller"
CORE = CONTROLLER / "election"

CHOOSERS = frozenset(
    {"elect", "attempt_verdict", "election_watermark", "_by_count", "rank_key", "found", "asker"}
)
FACTS = frozenset(
    {
        "lossy",
        "lossy_recovery",
        "clean_shutdown",
        "confirm_offset_before_recovery",
        "known_master_epoch",
        "waiting",
        "waiting_for",
        "reports",
        "watermark",
        "acked_watermark",
        "eligible_replicas",
        "lost",
    }
)
# Uses that decide nothing about elections. "path:function:fact" -> why. An entry that no longer
# applies fails.
ALLOWED: dict[str, str] = {
    "mqha/controller/liveness_watch.py:LivenessWatch._on_new_incarnation:lossy": (
        "a lossy start is logged loudly (§3.2); nothing is decided"
    ),
}


def _cores() -> set[Path]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    names = config["importlinter:contract:cores"]["source_modules"].split()
    return {ROOT / (name.replace(".", "/") + ".py") for name in names}


def _shells() -> list[Path]:
    cores = _cores()
    return [
        path
        for path in sorted(CONTROLLER.rglob("*.py"))
        if path not in cores and CORE not in path.parents and path.name != "__init__.py"
    ]


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _conditions(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """(qualified name of the enclosing function, condition) of every test in the module."""
    found: list[tuple[str, ast.expr]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{where}.{child.name}" if where else child.name
            if isinstance(child, ast.If | ast.IfExp | ast.While):
                found.append((inner, child.test))
            elif isinstance(child, ast.BoolOp | ast.Compare):
                found.append((inner, child))
            elif isinstance(child, ast.comprehension):
                found.extend((inner, test) for test in child.ifs)
            visit(child, inner)

    visit(tree, "")
    return found


def _judges_master_liveness(condition: ast.expr) -> bool:
    """An ``is_alive(..., <the master>)`` call in a condition: the inactive-master rule."""
    for node in ast.walk(condition):
        if isinstance(node, ast.Call) and _called(node) == "is_alive":
            for arg in node.args:
                for part in ast.walk(arg):
                    named = part.attr if isinstance(part, ast.Attribute) else getattr(part, "id", "")
                    if "master" in named:
                        return True
    return False


def _names_outside_calls(expr: ast.expr) -> set[str]:
    """The attribute names an expression tests (``x.lossy``; a local variable may be named anything), and
    the names of the calls in it, skipping their arguments."""
    names: set[str] = set()
    stack: list[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            stack.append(node.func)
            continue
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _problems(path: Path, used: set[str]) -> list[str]:
    name = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in CHOOSERS:
            problems.append(f"{name}:{node.lineno}: calls {_called(node)}(), a choice of the election core")
    for where, condition in _conditions(tree):
        text = ast.unparse(condition)[:80]
        for fact in sorted(_names_outside_calls(condition) & FACTS):
            if f"{name}:{where}:{fact}" in ALLOWED:
                used.add(f"{name}:{where}:{fact}")
                continue
            problems.append(f"{name}:{condition.lineno}: decides on {fact!r}: {text}")
        if _judges_master_liveness(condition):
            problems.append(f"{name}:{condition.lineno}: judges the master by its liveness: {text}")
    return problems


def test_the_shells_leave_every_election_decision_to_the_core() -> None:
    used: set[str] = set()
    problems = sorted({problem for path in _shells() for problem in _problems(path, used)})
    assert not problems, "\n".join(problems)
    assert set(ALLOWED) == used, f"stale ALLOWED entries: {sorted(set(ALLOWED) - used)}"


def test_the_check_bites() -> None:
    planted = ast.parse(
        "def record(group, liveness, info, policy):\n"
        "    if info.lossy_recovery and group.master_broker_id == info.broker_id:\n"
        "        return policy.elect(group, liveness)\n"
        "    return group.master_broker_id is not None and not liveness.is_alive(group.master_broker_id)\n"
    )
    path = CONTROLLER / "planted.py"
    original = Path.read_text
    try:
        Path.read_text = lambda self, *a, **k: (
            ast.unparse(planted) if self == path else original(self, *a, **k)
        )  # type: ignore[method-assign]
        problems = _problems(path, set())
    finally:
        Path.read_text = original  # type: ignore[method-assign]
    assert any("calls elect()" in p for p in problems)
    assert any("decides on 'lossy_recovery'" in p for p in problems)
    assert any("judges the master by its liveness" in p for p in problems)


def test_the_shells_are_found() -> None:
    names = {path.name for path in _shells()}
    assert {"write_path.py", "liveness_watch.py", "sessions.py"} <= names
    assert "operations.py" not in names and "whom.py" not in names
