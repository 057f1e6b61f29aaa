"""How the default test run is spread over two pytest-xdist workers (``scripts/test.sh`` runs ``pytest -n 2
--dist loadscope --no-loadscope-reorder``).

Work is handed out module by module (a module's fixtures, a Spark session or a built wheel, are made
once), except that the chaos runs of ``CHAOS_MODULES`` are one unit, collected first: one worker runs
them one after another from the start while the other works through the rest, so two chaos runs never
share the machine and the longest lane starts at once. A plain ``pytest`` runs the same tests in one
process, chaos first.

(The lanes are a scheduler of our own rather than ``--dist loadgroup``: loadgroup renames node ids, which
pytest 9.2 no longer lets it do, so its groups are silently ignored: pytest-xdist issue 1386.)
"""

from __future__ import annotations

from typing import Any

import pytest

CHAOS_MODULES = frozenset(
    {
        "tests/integration/test_chaos.py",
        "tests/integration/test_chaos_plants_storage.py",
    }
)
CHAOS_LANE = "chaos"


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _module(item.nodeid) not in CHAOS_MODULES)  # stable: the rest in order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it installed, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadscope":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadScopeScheduling

    class ChaosLane(LoadScopeScheduling):
        """Load by module, the chaos modules one unit."""

        def _split_scope(self, nodeid: str) -> str:
            module = _module(nodeid)
            return CHAOS_LANE if module in CHAOS_MODULES else module

    return ChaosLane(config, log)
