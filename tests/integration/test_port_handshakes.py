"""Issue 45 finding 9 with real processes: unknown connections to the Raft and HA ports are closed promptly.

A peer that connects and never names itself (Raft: its node id, or the key exchange with a password;
HA: the HANDSHAKE, or the proof with authentication) is closed within a few seconds. Before, the Raft
port kept such connections forever and the HA port for ``haHousekeepingInterval`` (20 s). The HA
master's memory after 500 such connections came and went is measured too (the issue saw ~73 KB each
retained).

Past a cap on such not-yet-known connections (``controllerRaftMaxPendingConnections``,
``haMaxPendingConnections``; small here) a new one is closed at once, and the peers already connected
keep replicating through a flood of a few hundred.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import RAFT_PORT_OFFSET, ControllerCluster, register_broker
from tests.integration.controller_cluster import Node as Controller

pytestmark = pytest.mark.integration

CLOSED_WITHIN_S = 8.0
"""Raft: 2 s after the connection opened; HA: 5 s (the proof's timeout); plus a tick and a loaded machine."""


RETAINED_PER_CONNECTION = 24 * 1024
"""What the HA master's RSS may keep per silent connection once it is gone (it was ~73 KB)."""


PENDING_CAP = 16
FLOOD = 300
FD_SLACK = 8
SETTLE_S = 1.5
"""Files a process may open meanwhile for its own work (a segment, a log, an HTTP answer)."""


@dataclass
class Cluster:
    controllers: ControllerCluster
    controller: Controller
    master: Broker
    slave: Broker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("handshakes")
    with ProcessGroup() as group:
        controllers = ControllerCluster(
            group, base / "controllers", settings={"controllerRaftMaxPendingConnections": str(PENDING_CAP)}
        )
        controllers.start()
        controller = controllers.leader(timeout=10)
        # haHousekeepingInterval at its default: before, a silent HA peer was held that long (20 s)
        settings = {
            **BROKER_TEST_SETTINGS,
            "haHousekeepingInterval": "20000",
            "haMaxPendingConnections": str(PENDING_CAP),
        }
        addresses = ";".join(n.address for n in controllers.nodes)
        master = Broker("b0", base / "b0", settings)
        master.start(group, addresses)
        wait_until(lambda: (master.try_status() or {}).get("role") == "MASTER", 20, message="master")
        slave = Broker("b1", base / "b1", settings)
        slave.start(group, addresses)
        wait_until(lambda: len(master.status()["syncStateSet"]) == 2, 30, message="the slave in sync")
        yield Cluster(controllers, controller, master, slave)


def _silent(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.setblocking(False)
        socks.append(sock)
    return socks


def _wait_all_closed(socks: list[socket.socket], within_s: float) -> float:
    """Seconds until the server closed all ``socks`` (which send nothing); fails past ``within_s``."""
    started = time.monotonic()
    open_ = list(socks)
    while open_ and time.monotonic() - started < within_s:
        still = []
        for sock in open_:
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                still.append(sock)
                continue
            except OSError:
                continue  # reset: closed
            if data:  # a challenge (HA with authentication): keep listening
                still.append(sock)
        open_ = still
        time.sleep(0.1)
    for sock in socks:
        sock.close()
    assert not open_, f"{len(open_)} of {len(socks)} silent connections still open after {within_s} s"
    return time.monotonic() - started


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_the_raft_port_closes_a_peer_that_never_names_itself(cluster: Cluster) -> None:
    socks = _silent(cluster.controller.port + RAFT_PORT_OFFSET, PENDING_CAP)
    took = _wait_all_closed(socks, CLOSED_WITHIN_S)
    print(f"\nraft: {PENDING_CAP} silent connections closed within {took:.1f} s")
    assert cluster.controller.get("/healthz")[0] == 200


def test_the_ha_port_closes_a_peer_that_never_sends_its_handshake(cluster: Cluster) -> None:
    master = cluster.master
    assert master.proc is not None
    before = _rss(master.proc.pid)
    socks = _silent(master.ha_port, 500)
    peak = _rss(master.proc.pid)
    took = _wait_all_closed(socks, CLOSED_WITHIN_S)
    time.sleep(0.5)
    after = _rss(master.proc.pid)
    each = (after - before) / 500
    print(
        f"\nha: 500 silent connections closed within {took:.1f} s; master RSS {before / 2**20:.1f} MB -> "
        f"{peak / 2**20:.1f} MB open -> {after / 2**20:.1f} MB after ({each / 1024:.1f} KB each)"
    )
    assert each < RETAINED_PER_CONNECTION, each
    assert master.try_status() is not None


def _connect_all(port: int, count: int, within_s: float = 15.0) -> list[socket.socket]:
    """``count`` connections to ``port`` opened at once (non-blocking: a full accept queue delays each
    by SYN retries, which one after the other would take tens of seconds); waits until each is made
    or refused."""
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        socks.append(sock)
    waiting, deadline = list(socks), time.monotonic() + within_s
    while waiting and time.monotonic() < deadline:
        _, writable, _ = select.select([], waiting, [], 0.1)
        waiting = [sock for sock in waiting if sock not in writable]
    return socks


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _flood(pid: int, port: int, *, peak: bool) -> list[socket.socket]:
    """``FLOOD`` silent connections to ``port`` of process ``pid``, which holds at most ``PENDING_CAP``
    of them (the rest are closed at once, not after the 2-5 s a silent peer may take): its open file
    descriptors grow by at most that many (and a little slack for its own files).

    ``peak``: the most seen while the flood comes (the Raft port accepts one connection per poll, so
    before the cap the ones it held piled up during the flood: +36 to +59); else the count within
    ``SETTLE_S`` after it (asyncio accepts a burst of sockets before their callbacks run, so its peak
    counts sockets about to be closed; before the cap all 300 were still held then)."""
    baseline = _fds(pid)
    seen = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            seen[0] = max(seen[0], _fds(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        socks = _connect_all(port, FLOOD)
    finally:
        done.set()
        sampler.join()
    if peak:
        held = seen[0]
    else:  # the loop may lag on a loaded machine; before the cap they were held for 5 s
        deadline = time.monotonic() + SETTLE_S
        while (held := _fds(pid)) - baseline > PENDING_CAP + FD_SLACK and time.monotonic() < deadline:
            time.sleep(0.05)
    print(
        f"\n{FLOOD} silent connections to port {port}: fds {baseline} -> {held} "
        f"({'peak' if peak else 'after'})"
    )
    assert held - baseline <= PENDING_CAP + FD_SLACK, (baseline, held)
    return socks


def test_a_flood_of_silent_raft_connections_is_capped_and_the_members_still_replicate(
    cluster: Cluster,
) -> None:
    leader = cluster.controllers.leader(timeout=10)
    assert leader.proc is not None
    socks = _flood(leader.proc.pid, leader.port + RAFT_PORT_OFFSET, peak=True)
    try:
        register_broker(leader, "flooded")  # two committed writes through the flooded leader
        cluster.controllers.wait_same_state(cluster.controllers.nodes, timeout=10)
    finally:
        for sock in socks:
            sock.close()


def test_a_flood_of_silent_ha_connections_is_capped_and_the_slave_still_replicates(cluster: Cluster) -> None:
    master, slave = cluster.master, cluster.slave
    assert master.proc is not None
    socks = _flood(master.proc.pid, master.ha_port, peak=False)
    try:
        status, reply = master.put([f"during-flood-{i}" for i in range(20)])
        assert status == 200 and all(r["status"] == "PUT_OK" for r in reply["results"]), reply
        target = master.status()["maxOffset"]
        wait_until(lambda: slave.status()["maxOffset"] >= target, 10, message="the slave has every message")
        assert len(master.status()["syncStateSet"]) == 2
    finally:
        for sock in socks:
            sock.close()
