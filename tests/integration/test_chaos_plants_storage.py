"""The storage nemeses have teeth: a short ``mqha chaos`` run with a planted bug fails, naming what broke.

One planted bug per storage fault kind (``mqha.testing.planted_bugs``): ``disk-wipe`` (``wiped-voter``),
``power-loss`` (``ack-before-fsync``) and ``disk-full`` (``full-disk-put-ok``). The disk-wipe run has
exactly the arguments of its clean twin in ``tests/integration/test_chaos.py``
(``test_disk_wipes_bring_controllers_back_as_voters_and_the_run_passes``), which passes without the
bug; the other two tests run their own twins.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.cluster.tmpfs import cannot_mount
from tests.integration.test_chaos import _chaos

pytestmark = pytest.mark.integration


def _lost(out: str) -> int:
    return int(out.split(" lost ", 1)[1].split(maxsplit=1)[0])


@pytest.mark.slow  # the default run keeps one of its kind; scripts/test.sh -m slow runs it
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


# A race: the periodic flush still runs, and a cut takes acknowledged messages only when it lands before
# the flush of their bytes. Caught in the helper's runs (239 lost); on a quiet CI machine the cuts took 11
# unacknowledged messages and nothing acknowledged. So with the slow runs, as answer-before-commit.
@pytest.mark.slow
def test_a_sync_flush_broker_that_acknowledges_before_its_fsync_is_caught(tmp_path: Path) -> None:
    # Seed 8, SYNC_FLUSH: the whole group loses power twice (then one broker). With the bug the brokers
    # acknowledge before their fsync, so each whole-group cut takes acknowledged messages that no disk
    # held (the first one, early in the run, only a few; the second hundreds). The controller declares
    # the range, but under SYNC_FLUSH an acknowledged message was fsynced first: a loss all the same.
    # The same run without the bug loses nothing.
    base = ("--duration", "30", "--faults", "power-loss", "--seed", "8", "--flush-disk-type", "SYNC_FLUSH")
    code, out, _ = _chaos(tmp_path / "planted", *base, "--plant", "ack-before-fsync")
    assert code == 1, out
    assert "(2 of whole groups)" in out, out
    assert _lost(out) > 0 and "declared-lost 0" in out, out
    assert "lost_ack               FAIL" in out
    assert "verdict: FAIL" in out
    code, out, _ = _chaos(tmp_path / "clean", *base)
    assert code == 0, out
    assert " lost 0 " in out and "declared-lost 0" in out and "verdict: PASS" in out


@pytest.mark.slow  # the default run keeps one of its kind; scripts/test.sh -m slow runs it
@pytest.mark.skipif(cannot_mount() is not None, reason=str(cannot_mount()))
def test_a_master_that_answers_put_ok_on_a_full_disk_is_caught(tmp_path: Path) -> None:
    # Seed 6: the master of the moment filled first, for 8.9 s (then broker-a-1). With the bug each put
    # its full disk refuses is answered PUT_OK at the offset it would have had; other messages take
    # those offsets once it is freed. The same run without the bug loses nothing.
    base = ("--duration", "20", "--faults", "disk-full", "--seed", "6", "--store-tmpfs-mib", "128")
    code, out, _ = _chaos(tmp_path / "planted", *base, "--plant", "full-disk-put-ok")
    assert code == 1, out
    assert "diskFull=True used=100%, master" in out, out  # the master's puts were refused
    assert _lost(out) > 0, out
    assert "lost_ack               FAIL" in out
    assert "verdict: FAIL" in out
    code, out, _ = _chaos(tmp_path / "clean", *base)
    assert code == 0, out
    assert out.count("(until ENOSPC)") == 2 and " lost 0 " in out and "verdict: PASS" in out


# Two 20 s runs with cluster start-ups and the history check: about two minutes, so with the slow runs.
# The behaviour itself is in the default lane: tests/integration/test_commitlog_scrub.py.
@pytest.mark.slow
def test_a_broker_that_never_repairs_a_damaged_record_is_caught(tmp_path: Path) -> None:
    # Seed 1: bits flipped in older segments of the master of the moment, running and then stopped (the
    # first step finds a single segment). With the bug the damage is found and reported but never
    # repaired: the broker stays degraded and the run fails, naming it. Without it every flip is repaired.
    base = ("--duration", "20", "--faults", "bitflip", "--seed", "1")
    code, out, _ = _chaos(tmp_path / "planted", *base, "--plant", "no-repair")
    assert code == 1, out
    assert "NOT REPAIRED: " in out and "damaged commit-log record not repaired" in out, out
    assert "verdict: FAIL" in out
    code, out, _ = _chaos(tmp_path / "clean", *base)
    assert code == 0, out
    assert "bit flips: " in out and "every one repaired" in out and "NOT FOUND" not in out, out
    assert " lost 0 " in out and "verdict: PASS" in out


# Two runs of a minute: with the slow ones (the clone's refusal itself is in the default run,
# tests/integration/test_broker_identity.py).
@pytest.mark.slow
def test_a_controller_that_takes_a_second_process_under_one_id_is_caught(tmp_path: Path) -> None:
    # Seed 1: a copy of the master's store starts beside it (issue 45 finding 1, the master-id variant).
    # The controllers refuse it and it stops on its own; with the bug they take it, it runs under the
    # master's id until the heal stops it, and the run fails naming it.
    base = ("--duration", "10", "--faults", "clone", "--seed", "1")
    code, out, _ = _chaos(tmp_path / "planted", *base, "--plant", "any-claim-stands")
    assert code == 1, out
    assert "store ran" in out and "without being refused" in out and "verdict: FAIL" in out
    code, out, _ = _chaos(tmp_path / "clean", *base)
    assert code == 0, out
    assert "clones: 1 started, 1 refused and stopped" in out and "verdict: PASS" in out
