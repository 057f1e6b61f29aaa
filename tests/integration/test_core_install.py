"""The distribution as a user installs it (docs/architecture.md §2): built from the tree as a wheel,
it holds one top-level package, ``mqha``; a core install (no extras) in a fresh virtualenv has no
PySpark, stays small, and its commands work outside the repository."""

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE_INSTALL_LIMIT_MB = 150
COMMANDS = ("mqcontroller", "mqbroker", "mqadmin", "mqha", "mqproxy")


def _run(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def _tree_size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)], out
    )
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("mqha-*.whl")
    return found


def test_the_wheel_installs_only_mqha_at_the_top_level(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"mqha"}, sorted(top_level)
    assert "mqha/controller/console/index.html" in names  # the console's static files ship
    assert any(n.startswith("mqha/broker/commitlog/_native") and n.endswith(".so") for n in names)
    assert not any(n.startswith(("mqha/tests", "tests/", "docs/")) for n in names)


@pytest.mark.integration
def test_a_core_install_is_lean_and_works_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    installed = _run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], tmp_path
    )
    assert installed.returncode == 0, installed.stderr
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    assert not (site / "pyspark").exists(), "pyspark belongs to the analysis extra"
    size = _tree_size_mb(env_dir)
    assert size <= CORE_INSTALL_LIMIT_MB, f"core install is {size:.0f} MB"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in COMMANDS:
        result = _run([str(env_dir / "bin" / command), "--help"], elsewhere, timeout=60)
        assert result.returncode == 0, f"{command} --help: {result.stderr}"
    version = _run([str(env_dir / "bin" / "mqha"), "--version"], elsewhere, timeout=60)
    assert version.stdout.strip().startswith("mqha "), version.stdout + version.stderr
    imported = _run(
        [str(python), "-c", "import mqha, mqha.controller, mqha.broker; print(mqha.__file__)"], elsewhere
    )
    assert imported.returncode == 0 and str(site) in imported.stdout, imported.stdout + imported.stderr
    missing = _run([str(env_dir / "bin" / "mqha"), "analyze", str(elsewhere)], elsewhere, timeout=60)
    assert missing.returncode == 2
    assert missing.stderr.strip() == "mqha analyze: install mqha[analysis] for Spark (or use --engine python)"
