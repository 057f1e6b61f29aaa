"""The storage self-check (the README's demo until the cluster demo lands) passes on real files."""

import subprocess
import sys

from mqha.broker.selfcheck import run_selfcheck


def test_selfcheck_recovers_every_crash(tmp_path, capsys) -> None:
    assert run_selfcheck(str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert out.count("[ok]") == 4
    assert "self-check passed" in out


def test_mqha_selfcheck_command_exits_zero(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mqha", "selfcheck", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING mqha.broker.commitlog" in done.stderr
