"""Issue 26 item 2, with real processes: brokers whose stores sit on small tmpfs mounts, filled up.

* a master whose disk fills answers puts with 503 ``SERVICE_NOT_AVAILABLE`` and a remark saying the
  disk is full (never a 500), keeps serving reads, reports it (status, metrics), and takes puts again
  once space is freed; nothing acknowledged is lost;
* a slave whose disk is full does not crash: it reports it, stops storing (so the master drops it from
  the SyncStateSet), and after the space is freed catches up and rejoins.

Root only (tmpfs mounts; CI runs as root): skipped with the reason otherwise. Every mount is unmounted
in a ``finally`` after the processes are stopped; every process is stopped by pid; waits are bounded.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqha.broker.commitlog import CommitLog, MessageDraft
from mqha.cluster.tmpfs import DiskFiller, cannot_mount, tmpfs
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(cannot_mount() is not None, reason=str(cannot_mount())),
]

STORE_MIB = 24
SETTINGS = {
    **BROKER_TEST_SETTINGS,
    "cleanResourceInterval": "200",  # the full-disk state is measured at most this often
    # Retention must not free the disk by deleting the acknowledged messages these tests read back
    # (above diskSpaceCleanForciblyRatio it would, as RocketMQ does): here only freeing space does.
    "cleanFileForciblyEnable": "false",
    "slaveTimeout": "1000",
    "haMaxTimeSlaveNotCatchup": "2000",
}
BODY = "x" * 30_000
_counter = itertools.count()


@dataclass
class Setup:
    group: ProcessGroup
    controllers: ControllerCluster
    brokers: list[Broker]

    @property
    def controller_addr(self) -> str:
        return ";".join(n.address for n in self.controllers.nodes)


@contextlib.contextmanager
def brokers_on_tmpfs(tmp_path: Path, count: int) -> Iterator[Setup]:
    with contextlib.ExitStack() as mounts:
        brokers = [Broker(f"b{i}", tmp_path / f"b{i}", SETTINGS) for i in range(count)]
        for broker in brokers:
            mounts.enter_context(tmpfs(broker.base / "store", STORE_MIB))
        with ProcessGroup() as group:  # processes stop before the mounts go
            controllers = ControllerCluster(group, tmp_path / "controllers", size=1)
            controllers.start()
            controllers.leader(timeout=10)
            yield Setup(group, controllers, brokers)


def unexpected_tracebacks(broker: Broker) -> list[str]:
    """Tracebacks in the broker's log other than the history recorder's (its database shares the full
    file system; it logs a batch it could not write and goes on)."""
    lines = (broker.base / "broker.log").read_text().splitlines()
    return [
        lines[i - 1]
        for i, line in enumerate(lines)
        if line.startswith("Traceback") and "history:" not in lines[i - 1]
    ]


def put(broker: Broker, count: int = 8) -> tuple[int, dict[str, Any]]:
    return broker.put([f"{next(_counter)}-{BODY}" for _ in range(count)])


def disk_metrics(broker: Broker) -> dict[str, float]:
    values = {}
    for line in broker.metrics_text().splitlines():
        if line.startswith(("mqha_broker_disk_full{", "mqha_broker_disk_used_ratio{")):
            name, value = line.split("{", 1)[0], line.rsplit(" ", 1)[1]
            values[name] = float(value)
    return values


def test_a_full_master_refuses_puts_with_503_serves_reads_and_recovers(tmp_path: Path) -> None:
    with brokers_on_tmpfs(tmp_path, 1) as setup:
        (master,) = setup.brokers
        master.start(setup.group, setup.controller_addr)
        wait_until(lambda: (master.try_status() or {}).get("role") == "MASTER", 20, message="master")
        filler = DiskFiller(master.base / "store")
        filler.fill(leave_bytes=6 << 20)  # ~75 % used: a few segments more and the disk is full
        acked: dict[int, str] = {}
        codes = []
        refusal: dict[str, Any] = {}
        for _ in range(200):
            code, reply = put(master)
            codes.append(code)
            if code == 200:
                acked.update((r["offset"], r["msgId"]) for r in reply["results"])
                continue
            refusal = reply
            break
        assert 500 not in codes, codes
        assert codes[-1] == 503, (codes, refusal)
        assert refusal["status"] == "SERVICE_NOT_AVAILABLE", refusal
        assert refusal["codeName"] == "SERVICE_NOT_AVAILABLE", refusal
        assert "disk" in refusal["remark"] and "diskSpaceWarningLevelRatio" in refusal["remark"], refusal
        assert len(acked) > 0
        # Refused again while full; nothing written by a refusal.
        top = master.status()["maxOffset"]
        code, reply = put(master)
        assert code == 503 and reply["status"] == "SERVICE_NOT_AVAILABLE", reply
        status = master.status()
        assert status["maxOffset"] == top
        assert status["diskFull"] is True and status["diskUsedRatio"] > 0.85, status
        metrics = disk_metrics(master)
        assert metrics["mqha_broker_disk_full"] == 1.0 and metrics["mqha_broker_disk_used_ratio"] > 0.85
        # Reads go on; every acknowledged message is there.
        read = {offset: msg_id for offset, msg_id, _ in master.read_all()}
        assert {o: read.get(o) for o in acked} == acked

        assert filler.free()
        code, reply = wait_until(
            lambda: r if (r := put(master))[0] == 200 else None, 10, interval=0.1, message="a put accepted"
        )
        assert reply["status"] == "PUT_OK", reply
        assert master.status()["diskFull"] is False
        assert disk_metrics(master)["mqha_broker_disk_full"] == 0.0

        # Above diskSpaceWarningLevelRatio with room left: refused by the ratio, before any ENOSPC.
        filler.fill(leave_bytes=(STORE_MIB << 20) // 20)  # 95 % used
        code, reply = wait_until(
            lambda: r if (r := put(master, 1))[0] != 200 else None, 5, interval=0.1, message="a refusal"
        )
        assert code == 503 and reply["status"] == "SERVICE_NOT_AVAILABLE", reply
        assert "diskSpaceWarningLevelRatio 90%" in reply["remark"], reply
        assert "no space left" not in reply["remark"], reply
        assert filler.free()
        wait_until(lambda: put(master, 1)[0] == 200, 5, interval=0.1, message="accepted again")
        assert master.proc is not None and master.proc.is_running()
    assert not unexpected_tracebacks(master)


def test_a_slave_with_a_full_disk_leaves_the_sync_state_set_and_rejoins_once_freed(tmp_path: Path) -> None:
    with brokers_on_tmpfs(tmp_path, 2) as setup:
        first, second = setup.brokers
        first.start(setup.group, setup.controller_addr)
        wait_until(lambda: (first.try_status() or {}).get("role") == "MASTER", 20, message="master")
        second.start(setup.group, setup.controller_addr)
        wait_until(lambda: len(first.status()["localSyncStateSet"]) == 2, 30, message="SyncStateSet of 2")
        slave_id = second.status()["controllerBrokerId"]
        assert put(first)[0] == 200

        filler = DiskFiller(second.base / "store")
        filler.fill()
        wait_until(lambda: second.status()["diskFull"], 5, interval=0.1, message="slave reports a full disk")
        assert disk_metrics(second)["mqha_broker_disk_full"] == 1.0
        # The master writes on: the slave cannot store past its preallocated files, falls behind and is
        # dropped from the SyncStateSet; puts are acknowledged by the master alone from then on.
        acked = 0
        for _ in range(400):
            code, reply = put(first)
            assert code == 200, reply
            acked += reply["status"] == "PUT_OK"
            if slave_id not in first.status()["syncStateSet"] and first.status()["maxOffset"] > 8 << 20:
                break
        assert slave_id not in first.status()["syncStateSet"], first.status()
        assert second.proc is not None and second.proc.is_running()
        assert second.status()["maxOffset"] < first.status()["maxOffset"]

        assert filler.free()
        top = first.status()["maxOffset"]
        wait_until(
            lambda: second.status()["maxOffset"] >= top, 30, interval=0.1, message="the slave caught up"
        )
        wait_until(
            lambda: slave_id in first.status()["syncStateSet"], 30, interval=0.1, message="slave rejoined"
        )
        assert second.status()["diskFull"] is False
        code, reply = put(first)
        assert code == 200 and reply["status"] == "PUT_OK", reply
    assert not unexpected_tracebacks(second)


def test_an_append_that_meets_a_full_disk_raises_enospc_and_leaves_the_log_valid(tmp_path: Path) -> None:
    """Segments are preallocated: a full tmpfs shows up as ``ENOSPC`` when the next segment is created
    (never a SIGBUS through the map); a batch that needed it stores nothing; recovery is clean."""
    segment = 1 << 20
    with tmpfs(tmp_path / "disk", 4):
        directory = tmp_path / "disk" / "commitlog"
        body = b"y" * 60_000
        with CommitLog.open(str(directory), segment) as log:
            stored = [r.offset for r in log.append_batch([MessageDraft("t", body)] * 8)]  # ~480 KiB
            filler = DiskFiller(tmp_path / "disk")
            filler.fill()
            log._spare.wait()  # the spare's preallocation (started at half a segment) failed or finished
            (directory / "spare.segment").unlink(missing_ok=True)  # no spare: the roll-over must allocate
            filler.fill()
            # Small appends are copied into the map: the preallocated pages take them (no SIGBUS).
            stored += [r.offset for r in log.append_batch([MessageDraft("t", b"s" * 100)] * 20)]
            stored += [
                r.offset for r in log.append_batch([MessageDraft("t", body)] * 7)
            ]  # still in segment 0
            top = log.max_offset
            with pytest.raises(OSError) as raised:
                log.append_batch([MessageDraft("t", body)] * 4)  # crosses into segment 1: no room
            assert raised.value.errno == errno.ENOSPC
            assert log.max_offset == top
            assert sorted(os.listdir(directory)) == ["00000000000000000000", "checkpoint"]
            assert [m.offset for m in log.read_messages(0, 100, log.max_offset)[0]] == stored
            assert filler.free()
            stored += [r.offset for r in log.append_batch([MessageDraft("t", body)] * 4)]
        with CommitLog.open(str(directory), segment) as log:
            assert log.recovery.clean
            assert [m.offset for m in log.read_messages(0, 100, log.max_offset)[0]] == stored
