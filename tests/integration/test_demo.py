"""``mqha demo`` end to end as a user runs it, and interrupted: it must leave no process behind.

The default run uses a short demo (2 master kills, the pure-Python invariant checker); the full
default demo with PySpark runs under ``-m slow``.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def mqha_command() -> list[str]:
    script = Path(sys.executable).with_name("mqha")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mqha"]


def processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args", "-ww"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


def run_demo(run_dir: Path, *args: str, timeout: float) -> tuple[int, str]:
    proc = subprocess.Popen(
        [*mqha_command(), "demo", "--dir", str(run_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # the demo's own cleanup stops its processes
        out, _ = proc.communicate(timeout=30)
        pytest.fail(f"demo did not finish within {timeout} s:\n{out}")
    return proc.returncode, out


def check_demo_output(out: str, kills: int) -> None:
    assert "verdict: PASS" in out, out
    assert "0 lost" in out
    assert "recovery time" in out
    assert f"n={kills}" in out  # the recovery-time distribution
    assert "rejoined as SLAVE" in out
    assert "mqha analyze: OK" in out


def test_short_demo_end_to_end_leaves_no_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "demo"
    code, out = run_demo(run_dir, "--kills", "2", "--warmup", "1", "--check", "python", timeout=150)
    assert code == 0, out
    check_demo_output(out, kills=2)
    assert processes_mentioning(str(run_dir)) == []


def test_interrupted_demo_stops_everything(tmp_path: Path) -> None:
    run_dir = tmp_path / "demo"
    # Ctrl-C as at a terminal (``env --default-signal``, coreutils): a test run a shell started in the
    # background inherits SIGINT ignored, and Python then never raises KeyboardInterrupt.
    proc = subprocess.Popen(
        ["env", "--default-signal=INT", *mqha_command(), "demo", "--dir", str(run_dir), "--check", "off"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        bufsize=0,
    )
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 90
    try:
        # Ctrl-C while the stream runs, after the first kill: brokers, controllers and the workload
        # are all live at that point. Raw reads: ``select`` on a buffered reader waits for new bytes
        # while lines already read sit in its buffer.
        while "[3/7]" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk.decode(errors="replace")
        assert "[3/7]" in seen, seen
        pids = [p for p in processes_mentioning(str(run_dir)) if "mqbroker" in p or "mqcontroller" in p]
        assert len(pids) >= 5, pids
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        rest = out.decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 130, seen + rest
    assert "processes left behind: none" in rest
    assert processes_mentioning(str(run_dir)) == []


@pytest.mark.slow
def test_full_demo_with_spark(tmp_path: Path) -> None:
    run_dir = tmp_path / "demo"
    started = time.monotonic()
    code, out = run_demo(run_dir, timeout=300)
    assert code == 0, out
    check_demo_output(out, kills=5)
    assert "PySpark" in out
    assert time.monotonic() - started < 180
    assert processes_mentioning(str(run_dir)) == []
