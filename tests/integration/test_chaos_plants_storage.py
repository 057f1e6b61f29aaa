"""The storage nemeses have teeth: a short ``mqha chaos`` run with a planted bug fails, naming what broke.

One planted bug per storage fault kind (``mqha.testing.planted_bugs``): ``disk-wipe`` (``wiped-voter``),
``power-loss`` (``ack-before-fsync``) and ``disk-full`` (``full-disk-put-ok``). The disk-wipe and
disk-full runs have exactly the arguments of their clean twins in ``tests/integration/test_chaos.py``,
which pass without the bug (``test_disk_wipes_bring_controllers_back_as_voters_and_the_run_passes``,
``test_disk_full_faults_pass_without_loss_and_the_mounts_go``); the power-loss test runs its own twin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.cluster.tmpfs import cannot_mount
from tests.integration.test_chaos import _chaos

pytestmark = pytest.mark.integration


def _lost(out: str) -> int:
    return int(out.split(" lost ", 1)[1].split(maxsplit=1)[0])


def test_a_wiped_controller_that_votes_under_its_old_name_is_caught(tmp_path: Path) -> None:
    # Seed 1: n0 is wiped while n1 is killed, then n1 is wiped alone. With the bug each blank store takes
    # back the raftId its address had and votes with an empty log (issue 24's bug); the heal sees it
    # come back as a voter under the lost store's id and the run fails. (Its outcome, a rolled-back
    # decision, needs a majority without a committed entry: n2, which holds everything, stays up.)
    args = ("--duration", "20", "--faults", "disk-wipe", "--seed", "1", "--plant", "wiped-voter")
    code, out, _ = _chaos(tmp_path, *args)
    assert code == 1, out
    assert "controllers: DISAGREE: n0 came back from its disk wipe as a voter under storageId" in out
    assert "(the lost store's: " in out
    assert "verdict: FAIL" in out


def test_a_sync_flush_broker_that_acknowledges_before_its_fsync_is_caught(tmp_path: Path) -> None:
    # Seed 8, SYNC_FLUSH: the whole group loses power twice. With the bug the brokers acknowledge before
    # their fsync, so each cut takes acknowledged messages that no disk held. The controller declares
    # the range, but under SYNC_FLUSH an acknowledged message was fsynced first: a loss all the same.
    # The same run without the bug loses nothing.
    base = ("--duration", "20", "--faults", "power-loss", "--seed", "8", "--flush-disk-type", "SYNC_FLUSH")
    code, out, _ = _chaos(tmp_path / "planted", *base, "--plant", "ack-before-fsync")
    assert code == 1, out
    assert "power cuts: 2 (2 of whole groups)" in out, out
    assert _lost(out) > 0 and "declared-lost 0" in out, out
    assert "lost_ack               FAIL" in out
    assert "verdict: FAIL" in out
    code, out, _ = _chaos(tmp_path / "clean", *base)
    assert code == 0, out
    assert " lost 0 " in out and "declared-lost 0" in out and "verdict: PASS" in out


@pytest.mark.skipif(cannot_mount() is not None, reason=str(cannot_mount()))
def test_a_master_that_answers_put_ok_on_a_full_disk_is_caught(tmp_path: Path) -> None:
    # Seed 1: broker-a-0, the master, filled first. With the bug each put its full disk refuses is
    # answered PUT_OK at the offset it would have had; other messages take those offsets.
    args = ("--duration", "20", "--faults", "disk-full", "--seed", "1", "--store-tmpfs-mib", "128")
    code, out, _ = _chaos(tmp_path, *args, "--plant", "full-disk-put-ok")
    assert code == 1, out
    assert out.count("(until ENOSPC)") == 2
    assert _lost(out) > 0, out
    assert "lost_ack               FAIL" in out
    assert "verdict: FAIL" in out
