"""The layer rules of docs/architecture.md §2, as import-linter contracts (.importlinter).

The contracts hold on the tree, and they bite: a copy of the package with one planted import that
breaks a rule fails the check, naming the rule.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(ROOT / ".importlinter")],
        cwd=cwd,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_tree_keeps_every_contract() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("controller/state.py", "from mqha.analysis import invariants", "No runtime package imports"),
        ("autoswitch_ha/frames.py", "import asyncio", "Cores never import shells"),
        ("epoch/history.py", "from mqha.epoch import file", "Cores never import shells"),
        ("codes.py", "from mqha.controller import state", "The kernel imports nothing of ours"),
        (
            "client/producer.py",
            "from mqha.testing import planted_bugs",
            "Only the broker's and the controller's process wiring",
        ),
        ("epoch/codec.py", "from mqha.broker import protocol", "Layers"),
    ],
)
def test_a_planted_violation_breaks_its_contract(
    tmp_path: Path, module: str, planted: str, contract: str
) -> None:
    shutil.copytree(ROOT / "mqha", tmp_path / "mqha", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    target = tmp_path / "mqha" / module
    target.write_text(target.read_text() + f"\n{planted}  # planted by the test\n")
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    assert any(line.startswith(contract) for line in broken), result.stdout
    assert str(Path(module).with_suffix("")).replace("/", ".") in result.stdout
