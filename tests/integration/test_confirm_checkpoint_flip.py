"""Issue 45 item 9 with real processes: a flipped bit in ``confirmOffsetCheckpoint`` is detected.

1 ``mqcontroller`` + 1 ``mqbroker`` (master) on 127.0.0.1. Messages are acknowledged, the broker is killed,
one bit of the checkpoint's confirm offset is flipped on disk, and the broker starts again. Upward
(a digit made larger, the value now beyond the log): before the fix the start was reported *lossy*
("confirmed offsets ... are gone"), a false alarm that the election rule acts on (§3.2). Downward: the
lower value was taken silently. Now both read as unreadable, -1 (docs/architecture.md §9.3): the start
is not lossy, and every acknowledged message is still served.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mqha.broker.confirm_checkpoint import ConfirmOffsetCheckpoint
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster

pytestmark = pytest.mark.integration


def flip_a_digit(path: Path, *, up: bool) -> tuple[int, int]:
    """Flip one bit of a digit of the confirm offset in the file so that the value gets larger (``up``)
    or smaller, still a valid number; returns the value before and the value the file now shows."""
    data = bytearray(path.read_bytes())
    match = re.search(rb"[0-9]+", data)
    assert match is not None, data
    value = int(match.group())
    for at in range(match.start(), match.end()):
        for bit in range(4):
            changed = data[at] ^ (1 << bit)
            leading_zero = at == match.start() and changed == ord("0")
            if ord("0") <= changed <= ord("9") and (changed > data[at]) == up and not leading_zero:
                data[at] = changed
                path.write_bytes(bytes(data))
                return value, int(data[match.start() : match.end()].decode())
    raise AssertionError(f"no one-bit flip of {value} goes {'up' if up else 'down'}")


def _one_controller_and_a_master(group: ProcessGroup, tmp_path: Path) -> tuple[str, Broker]:
    """One controller and one broker that has become master: the controller's address and the broker."""
    controllers = ControllerCluster(group, tmp_path / "controllers", size=1)
    controllers.start()
    controllers.leader(timeout=15)
    address = controllers.nodes[0].address
    broker = Broker("m", tmp_path / "m", BROKER_TEST_SETTINGS)
    broker.start(group, address)
    wait_until(lambda: broker.serving_role() == "MASTER", 20, message="the broker is master")
    return address, broker


@pytest.mark.parametrize("up", [True, False], ids=["up", "down"])
def test_a_flipped_bit_in_the_confirm_offset_checkpoint_reads_as_unknown(tmp_path: Path, up: bool) -> None:
    with ProcessGroup() as group:
        address, broker = _one_controller_and_a_master(group, tmp_path)
        acked = []
        for seq in range(0, 400, 40):  # a confirm offset with several digits, led by a 1-bit-flippable one
            code, reply = broker.put([f"m{i}-" + "y" * 200 for i in range(seq, seq + 40)])
            assert code == 200 and reply["status"] == "PUT_OK", reply
            acked += [r["offset"] for r in reply["results"]]
        broker.proc.kill()  # type: ignore[union-attr]  # the file holds the last answer's confirm offset

        confirm, flipped = flip_a_digit(tmp_path / "m" / "store" / "confirmOffsetCheckpoint", up=up)
        assert confirm > acked[-1] and (flipped > confirm) == up
        broker.start(group, address)
        wait_until(lambda: broker.serving_role() == "MASTER", 20, message="the broker is master again")
        report = broker.status()["startReport"]
        assert report["lossyRecovery"] is False, report
        assert report["confirmOffsetBeforeRecovery"] == -1, report  # detected: unknown, not the flipped value
        assert [offset for offset, _, _ in broker.read_all()] == acked


def test_a_clean_stop_keeps_the_confirm_offset_the_master_answered_with(tmp_path: Path) -> None:
    """A master's clean stop fences it first; the checkpoint written after that must still hold the
    confirm offset its last answer exposed, not the never-updated stored value (it wrote 0 on a
    one-replica master: a later lossy restart could not have been told)."""
    with ProcessGroup() as group:
        _, broker = _one_controller_and_a_master(group, tmp_path)
        for seq in range(0, 400, 40):
            code, reply = broker.put([f"m{i}-" + "y" * 200 for i in range(seq, seq + 40)])
            assert code == 200 and reply["status"] == "PUT_OK", reply
        served = broker.status()["confirmOffset"]
        assert served > 0
        assert broker.proc.stop(timeout=30) == 0  # type: ignore[union-attr]  # SIGTERM: a clean stop
        path = tmp_path / "m" / "store" / "confirmOffsetCheckpoint"
        assert ConfirmOffsetCheckpoint(str(path)).load() == served
