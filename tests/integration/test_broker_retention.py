"""Issue 26 "Done when" with real processes: retention keeps two replicas on small disks serving.

3 ``mqcontroller`` + 2 ``mqbroker`` of one set on 127.0.0.1, each broker's store on its own 48 MiB
tmpfs, 1 MiB segments, RocketMQ's retention defaults except ``cleanResourceInterval`` (200 ms) and
``fileReservedTime`` (1 hour, its minimum: nothing expires during the test, so the disk ratios do the
work: above ``diskSpaceCleanForciblyRatio`` (85 %) the oldest segments go, 10 per pass,
``deleteCommitLogFilesInterval`` (100 ms) apart, i.e. at most ~10 MiB/s; the producer stays below that).
160 MiB of messages acknowledged by both replicas (``allAckInSyncStateSet``) go through; no answer is a
500; sampled disk usage stays under ``diskSpaceWarningLevelRatio`` (90 %); the newest acknowledged
messages are readable on both replicas; a read below the log start answers ``OFFSET_TOO_SMALL`` with the
log start as ``nextOffset`` (and the client's consumer continues from there); after the master is
killed the slave takes over with the newest messages and accepts puts (docs/architecture.md §4.2).

Mounting needs root (CI runs as root); otherwise the test is skipped. Every process is stopped by pid,
every mount unmounted in a ``finally``, every wait bounded.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.client.sync import SyncConsumer
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_NAME, BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster, request

pytestmark = pytest.mark.integration

DISK_BYTES = 48 * 1024 * 1024
TOTAL_BYTES = 160 * 1024 * 1024
BODY_BYTES = 16 * 1024
BATCH = 16  # messages per put: 256 KiB
RATE_BYTES_PER_S = 6 * 1024 * 1024  # below what 10 deletions per ~1.2 s free
WARNING_RATIO = 0.90
SETTINGS = {
    **BROKER_TEST_SETTINGS,
    "cleanResourceInterval": "200",
    "fileReservedTime": "1",
    "slaveTimeout": "3000",
}


@contextlib.contextmanager
def tmpfs(path: Path) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def used(path: Path) -> float:
    stat = os.statvfs(path)
    return 1.0 - stat.f_bavail / stat.f_blocks


class DiskSampler(threading.Thread):
    """Samples the used ratio of each store's file system every 20 ms; keeps the maximum."""

    def __init__(self, paths: list[Path]) -> None:
        super().__init__(daemon=True, name="disk-sampler")
        self.paths = paths
        self.peak = dict.fromkeys(map(str, paths), 0.0)
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.02):
            for path in self.paths:
                with contextlib.suppress(OSError):
                    self.peak[str(path)] = max(self.peak[str(path)], used(path))


def role(broker: Broker) -> str | None:
    status = broker.try_status()
    return None if status is None or status["fenced"] else status["role"]


def read_from(broker: Broker, offset: int, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while len(out) < count:
        code, body = request("GET", f"{broker.url}/v1/messages?offset={offset}&maxMessages=1024", timeout=5.0)
        assert code == 200 and body["code"] == 0, body
        if not body["messages"]:
            break
        out += body["messages"]
        offset = body["nextOffset"]
    return out


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for each store needs root (CI runs as root)")
    with tmpfs(tmp_path / "m" / "store") as first, tmpfs(tmp_path / "s" / "store") as second:
        yield first, second


def test_retention_keeps_two_replicas_on_small_disks_serving(
    tmp_path: Path, stores: tuple[Path, Path]
) -> None:
    started = time.monotonic()
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, tmp_path / "controllers")
        controllers.start()
        controllers.leader(timeout=10)
        addr = ";".join(n.address for n in controllers.nodes)
        master = Broker("m", tmp_path / "m", SETTINGS)  # its store is base/"store": the tmpfs
        slave = Broker("s", tmp_path / "s", SETTINGS)
        master.start(group, addr)
        wait_until(lambda: role(master) == "MASTER", 20, message="first broker is master")
        slave.start(group, addr)
        wait_until(lambda: role(slave) == "SLAVE", 20, message="second broker is a slave")
        wait_until(lambda: len(master.status()["localSyncStateSet"]) == 2, 30, message="SyncStateSet of 2")

        sampler = DiskSampler(list(stores))
        sampler.start()
        acked: list[tuple[int, str, str]] = []  # (offset, msgId, body)
        codes: dict[int, int] = {}
        sent, seq, t0 = 0, 0, time.monotonic()
        try:
            while sent < TOTAL_BYTES:
                bodies = [f"{seq + i:08d}-" + "x" * (BODY_BYTES - 9) for i in range(BATCH)]
                seq += BATCH
                code, reply = master.put(bodies)
                codes[code] = codes.get(code, 0) + 1
                assert code != 500, reply
                assert code == 200 and reply["status"] == "PUT_OK", reply
                acked += [(r["offset"], r["msgId"], b) for r, b in zip(reply["results"], bodies, strict=True)]
                sent += BATCH * BODY_BYTES
                ahead = sent / RATE_BYTES_PER_S - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            put_s = time.monotonic() - t0

            # Caught up and told so: a slave serves reads up to the confirm offset the master sends it,
            # which follows its log by a heartbeat.
            def caught_up() -> bool:
                mine = slave.status()
                return mine["confirmOffset"] == mine["maxOffset"] == master.status()["maxOffset"]

            wait_until(caught_up, 10, message="slave caught up")
        finally:
            sampler.stop_event.set()
            sampler.join(2)
        peaks = sampler.peak
        print(f"put {sent >> 20} MiB in {put_s:.1f} s; peak disk use {peaks}; HTTP codes {codes}")
        assert all(peak < WARNING_RATIO for peak in peaks.values()), peaks

        # Retention ran on both: the log starts well past 0 and the disk holds far less than was written.
        starts = {b.name: b.status()["minOffset"] for b in (master, slave)}
        assert all(start >= 64 * 1024 * 1024 for start in starts.values()), starts

        # The newest acknowledged messages are readable on both replicas.
        newest = acked[-200:]
        for broker in (master, slave):
            got = read_from(broker, newest[0][0], len(newest))
            assert [(m["offset"], m["msgId"], m["body"]) for m in got[: len(newest)]] == newest, broker.name

        # A read below the log start gets the documented status, never later data.
        for broker in (master, slave):
            code, body = request("GET", f"{broker.url}/v1/messages?offset=0&maxMessages=8", timeout=5.0)
            assert code == 200, body
            assert (body["code"], body["codeName"], body["status"]) == (
                21,
                "PULL_OFFSET_MOVED",
                "OFFSET_TOO_SMALL",
            )
            # (retention may have moved the start again since: usage can still be above 85 %)
            assert body["messages"] == [] and body["nextOffset"] == body["minOffset"] >= starts[broker.name]
        with SyncConsumer(addr, BROKER_NAME, offset=0) as consumer:
            assert consumer.poll(timeout=5) == []
            moved_to = consumer.offset
            assert moved_to >= starts[master.name] and consumer.consumer.skipped_bytes == moved_to
            first = consumer.poll(timeout=5)
            assert first and first[0].offset >= moved_to

        # Failover after retention: the slave takes over with the newest messages and accepts puts.
        assert master.proc is not None
        master.proc.kill()
        wait_until(lambda: role(slave) == "MASTER", 30, message="the slave becomes master")
        got = read_from(slave, newest[0][0], len(newest))
        assert [(m["offset"], m["msgId"], m["body"]) for m in got[: len(newest)]] == newest
        code, reply = slave.put(["after-failover"])
        assert code == 200 and reply["status"] == "PUT_OK", reply
        assert read_from(slave, reply["results"][0]["offset"], 1)[0]["body"] == "after-failover"
    print(f"test took {time.monotonic() - started:.1f} s")
