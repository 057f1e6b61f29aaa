"""The chaos wall-clock shim (``mqha/chaos/shim/sitecustomize.py``): a skew at start, a jump while running,
only the wall clock moves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mqha.chaos.wall_clock import set_offset, wall_clock_env

PROBE = """
import logging, time
logging.basicConfig(format="%(asctime)s", level=logging.INFO)
real = lambda: time.clock_gettime(time.CLOCK_REALTIME)
mono = time.monotonic()
local = round((time.mktime(time.localtime()) - real()) / 10) * 10  # localtime drops the fraction
print(round(time.time() - real()), round(time.time_ns() / 1e9 - real()), local)
open(OFFSET, "w").write("-5000")
time.sleep(0.2)
print(round(time.time() - real()), round(time.monotonic() - mono, 1) < 5)
logging.info("converter works")
"""


def test_a_skew_at_start_and_a_jump_while_running_move_only_the_wall_clock(tmp_path: Path) -> None:
    offset = tmp_path / "offset"
    set_offset(str(offset), 7_200_000)
    out = subprocess.run(
        [sys.executable, "-c", f"OFFSET = {str(offset)!r}\n" + PROBE],
        env={**wall_clock_env(str(offset)), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = out.stdout.split("\n")
    assert lines[0] == "7200 7200 7200"  # time, time_ns and localtime all 2 h ahead
    assert lines[1] == "-5 True"  # the jump was taken; the monotonic clock did not move with it
    assert out.stderr.strip() and "Error" not in out.stderr  # logging's converter is the shifted localtime
