"""Issue 45 item 9 with real processes: a damaged epoch file never calls good bytes divergent.

1 ``mqcontroller`` + 2 ``mqbroker`` of one set on 127.0.0.1. ``a`` is master at epoch 1 and ``b`` its
slave; ``a`` stops, ``b`` takes over at epoch 2 and more messages are acknowledged; ``a`` comes back as
``b``'s slave and catches up, so its epoch file holds [(1, 0), (2, X)]. ``a`` stops and one digit of
its entry ``2-X`` is changed on disk (the CRC no longer matches).

Before the fix ``a`` fell back to ``.bak``, the *previous* generation [(1, 0)]: its epoch-2 bytes now
looked like epoch 1, which ``b`` ends at X, so ``a`` cut everything after X as a "divergent tail"
(326,700 good bytes in the issue) and fetched it again. Now a save writes the backup with the same
content as the main file, so ``a`` takes the backup, proves it the same generation (the damaged file's
count and CRC lines match it) and starts without cutting a byte. A backup of another generation (a store
written by an older mqha) is refused: the broker stops with one line naming the file and what to do
(docs/architecture.md §9.2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.epoch.codec import encode_epoch_file
from mqha.epoch.history import EpochHistory
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster

pytestmark = pytest.mark.integration

SETTINGS = {**BROKER_TEST_SETTINGS, "allAckInSyncStateSet": "false"}  # b serves alone while a is down


def put(broker: Broker, count: int) -> None:
    for seq in range(0, count, 20):
        code, reply = broker.put([f"m{seq + i}-" + "z" * 300 for i in range(20)])
        assert code == 200 and reply["status"] == "PUT_OK", reply


def role(broker: Broker) -> str | None:
    return broker.serving_role()


def test_a_damaged_epoch_file_cuts_no_good_bytes(tmp_path: Path) -> None:
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, tmp_path / "controllers", size=1)
        controllers.start()
        controllers.leader(timeout=15)
        address = controllers.nodes[0].address
        a, b = Broker("a", tmp_path / "a", SETTINGS), Broker("b", tmp_path / "b", SETTINGS)
        a.start(group, address)
        wait_until(lambda: role(a) == "MASTER", 20, message="a is master")
        b.start(group, address)
        wait_until(lambda: role(b) == "SLAVE", 20, message="b is a slave")
        put(a, 200)
        wait_until(lambda: b.status()["maxOffset"] == a.status()["maxOffset"], 20, message="b caught up")

        a.proc.stop()  # type: ignore[union-attr]
        wait_until(lambda: role(b) == "MASTER", 30, message="b takes over")
        put(b, 400)
        a.start(group, address)
        wait_until(lambda: role(a) == "SLAVE", 30, message="a is b's slave")
        top = b.status()["maxOffset"]
        wait_until(lambda: a.status()["maxOffset"] == top, 20, message="a caught up")
        epochs = [(e["epoch"], e["startOffset"]) for e in a.get("/v1/epochs")["epochList"]]
        assert len(epochs) >= 2, epochs
        a.proc.stop()  # type: ignore[union-attr]

        main = tmp_path / "a" / "store" / "epochFileCheckpoint"
        text = main.read_text()
        last = f"{epochs[-1][0]}-{epochs[-1][1]}"
        assert last in text
        main.write_text(text.replace(last, f"{epochs[-1][0]}-{epochs[-1][1] + 1}"))  # CRC now fails
        a.start(group, address)
        wait_until(lambda: role(a) == "SLAVE", 30, message="a is b's slave again")
        assert a.status()["maxOffset"] == top
        log = (tmp_path / "a" / "broker.log").read_text()
        assert "divergent tail" not in log, log[-3000:]
        assert "using its backup" in log
        a.proc.stop()  # type: ignore[union-attr]

        # A backup of another generation (written by an older mqha: the previous content) is refused.
        good = main.read_text()
        (tmp_path / "a" / "store" / "epochFileCheckpoint.bak").write_text(
            encode_epoch_file(EpochHistory.from_pairs(epochs[:-1]))
        )
        main.write_text(good.replace(last, f"{epochs[-1][0]}-{epochs[-1][1] + 1}"))
        a.launch(group, address)
        assert a.proc is not None
        assert a.proc.wait_gone(30) and a.proc.returncode != 0
        lines = [line for line in (tmp_path / "a" / "broker.log").read_text().splitlines() if "refus" in line]
        assert lines and "epochFileCheckpoint" in lines[-1], lines
        assert b.status()["role"] == "MASTER"
