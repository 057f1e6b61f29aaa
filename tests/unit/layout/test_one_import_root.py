"""One import root (docs/architecture.md §2): every module is ``mqha.*`` and has exactly one name."""

import importlib.util
import sys
from pathlib import Path

import pytest

import mqha

ROOT = Path(__file__).resolve().parents[3]
FORMER_TOP_LEVEL = (
    "admin_cli",
    "analysis",
    "autoswitch_ha",
    "bench",
    "broker",
    "chaos",
    "client",
    "cluster",
    "controller",
    "epoch",
    "replicas_manager",
)


def test_the_package_is_the_repository_tree() -> None:
    assert Path(mqha.__file__).resolve().parent == ROOT / "mqha"


@pytest.mark.parametrize("name", FORMER_TOP_LEVEL)
def test_no_package_is_importable_under_a_second_name(name: str) -> None:
    assert (ROOT / "mqha" / name / "__init__.py").exists()
    assert importlib.util.find_spec(name) is None, f"'{name}' is importable outside mqha"
    assert name not in sys.modules


def test_no_python_package_at_the_repository_root_but_mqha_and_tests() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages <= {"mqha", "tests"}, packages


def test_every_module_was_loaded_under_mqha() -> None:
    """Whatever the test run imported so far, nothing of ours came in under a bare name."""
    ours = [
        name
        for name, module in list(sys.modules.items())
        if (path := getattr(module, "__file__", None)) and Path(path).resolve().is_relative_to(ROOT / "mqha")
    ]
    assert ours and all(name == "mqha" or name.startswith("mqha.") for name in ours), ours


def test_an_editable_install_is_a_static_path_that_type_checkers_follow() -> None:
    """scripts/setup.sh installs mqha editable: a plain path entry (no import hook), plus PEP 561's
    marker, so mypy and pyright resolve ``mqha`` from any directory."""
    pths = [
        Path(p)
        for entry in sys.path
        for p in Path(entry).glob("__editable__.mqha-*.pth")
        if Path(entry).is_dir()
    ]
    if not pths:
        pytest.skip("mqha is not installed in editable mode here")
    assert [pth.read_text().strip() for pth in pths] == [str(ROOT)]
    assert (ROOT / "mqha" / "py.typed").exists()
