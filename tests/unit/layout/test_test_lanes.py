"""The default run's chaos lane (``tests/conftest.py``) names test modules that exist: a renamed chaos
module would otherwise leave the lane silently, and its runs could share the machine with another."""

from pathlib import Path

from tests.conftest import CHAOS_MODULES

ROOT = Path(__file__).resolve().parents[3]


def test_the_chaos_lane_names_existing_test_modules() -> None:
    assert CHAOS_MODULES
    assert all((ROOT / module).is_file() for module in CHAOS_MODULES), sorted(CHAOS_MODULES)
    assert sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_chaos*.py")) == sorted(
        CHAOS_MODULES | {"tests/integration/test_chaos_controller_store.py"}
    )  # every chaos-run module is in the lane (the controller-store one runs fakes, no chaos run)
