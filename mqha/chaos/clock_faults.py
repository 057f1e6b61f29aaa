"""The ``clock`` fault of a chaos run: one process's wall clock stepped or skewed, then put back. SHELL.

With ``clock`` among a run's kinds every node starts with the wall-clock shim (``shim/sitecustomize.py``)
reading its offset from ``<run dir>/clocks/<node>`` (0 until a step). A step writes the target's offset
(``FaultStep.fraction`` seconds), the heal writes 0 again: a jump forward and, at the heal, one back.
The brokers of such a run delete in every hour and pass every second (``CLOCK_SETTINGS``), so a jump
past ``fileReservedTime`` reaches retention while it holds: retention must delete nothing for it
(docs/architecture.md §4.2), and the verdict fails a run in which it deleted acknowledged messages
younger than ``fileReservedTime`` (``RunFacts.retention_young``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mqha.chaos.schedule import FaultStep
from mqha.chaos.wall_clock import set_offset, wall_clock_env
from mqha.cluster.local import LocalCluster

CLOCK_SETTINGS = {
    "deleteWhen": ";".join(f"{hour:02d}" for hour in range(24)),
    "cleanResourceInterval": "1000",
    "mappedFileSizeCommitLog": str(64 * 1024),
    "maxMessageSize": str(16 * 1024),
}
"""Broker keys of a run with clock steps: retention may act in every hour and passes every second, and
small segments are sealed within seconds of traffic (only sealed segments can go)."""


class ClockFaults:
    """The offset files of a run's nodes; ``hit`` moves the targets' wall clocks, ``heal`` puts them back."""

    def __init__(self, cluster: LocalCluster, run_dir: Path) -> None:
        self.directory = run_dir / "clocks"
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for node in [*cluster.controllers, *cluster.brokers]:
            path = self.path(node.name)
            set_offset(path, 0)
            env = cluster.node_env.setdefault(node.name, {})
            env.update(wall_clock_env(path, base=env if "PYTHONPATH" in env else None))

    def path(self, node: str) -> str:
        return str(self.directory / node)

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> None:
        for node in nodes:
            set_offset(self.path(node), round(step.fraction * 1000))

    def heal(self, nodes: Sequence[str]) -> None:
        for node in nodes:
            set_offset(self.path(node), 0)
