"""Step or skew one process's wall clock (the ``MQHA_CHAOS_WALL_CLOCK_FILE`` part of ``shim/``). SHELL.

``wall_clock_env(path)`` is the environment that makes a Python process read its wall-clock offset from
``path``; ``set_offset(path, ms)`` writes a new offset, which that process takes within
``WALL_CLOCK_REREAD_S`` (a jump). The monotonic clock stays real: see ``shim/sitecustomize.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mqha.chaos.packet_filter import SHIM_DIR
from mqha.chaos.shim.sitecustomize import WALL_CLOCK_ENV, WALL_CLOCK_REREAD_S
from mqha.durable import write_atomically

__all__ = ["WALL_CLOCK_REREAD_S", "set_offset", "wall_clock_env"]


def wall_clock_env(path: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment that gives a Python process the wall-clock offset held in ``path``."""
    python_path = (base or os.environ).get("PYTHONPATH", "")
    parts = [str(SHIM_DIR)] + [p for p in python_path.split(os.pathsep) if p and p != str(SHIM_DIR)]
    return {"PYTHONPATH": os.pathsep.join(parts), WALL_CLOCK_ENV: path}


def set_offset(path: str, offset_ms: int) -> None:
    """Make the processes reading ``path`` run ``offset_ms`` ahead of the machine (negative: behind)."""
    write_atomically(path, f"{int(offset_ms)}\n")
