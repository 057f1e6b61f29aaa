"""The ``clock`` fault's offset files and node environments (mqha.chaos.clock_faults)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from mqha.chaos.clock_faults import ClockFaults
from mqha.chaos.packet_filter import SHIM_DIR, shim_env
from mqha.chaos.schedule import CLOCK, JUMP, MASTER, FaultStep
from mqha.chaos.shim.sitecustomize import SOURCE_ENV, WALL_CLOCK_ENV


def test_every_node_reads_its_own_offset_and_keeps_the_source_address_shim(tmp_path: Path) -> None:
    node_env = {"n0": shim_env("127.0.0.10", base={"PYTHONPATH": "/elsewhere"})}
    cluster = SimpleNamespace(
        controllers=[SimpleNamespace(name="n0")],
        brokers=[SimpleNamespace(name="broker-a-0")],
        node_env=node_env,
    )
    clocks = ClockFaults(cluster, tmp_path)  # type: ignore[arg-type]
    controller = node_env["n0"]
    assert controller[SOURCE_ENV] == "127.0.0.10" and controller[WALL_CLOCK_ENV] == clocks.path("n0")
    assert controller["PYTHONPATH"].split(os.pathsep) == [str(SHIM_DIR), "/elsewhere"]  # the shim dir once
    assert node_env["broker-a-0"][WALL_CLOCK_ENV] == clocks.path("broker-a-0")
    assert Path(clocks.path("broker-a-0")).read_text() == "0\n"

    step = FaultStep(1, CLOCK, MASTER, 5.0, 1.0, links=JUMP, fraction=83 * 3600.0)
    clocks.hit(step, ["broker-a-0"])
    assert Path(clocks.path("broker-a-0")).read_text() == f"{83 * 3600 * 1000}\n"
    clocks.heal(["broker-a-0"])
    assert Path(clocks.path("broker-a-0")).read_text() == "0\n"
