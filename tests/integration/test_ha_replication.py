"""HA replication over real loopback TCP, without the controller (docs/reference-behaviour.md §10, §11,
§13–§15).

Two or three in-process nodes (``ha_nodes.Node``: real commit logs, epoch files, HA server and
client); the test plays the ReplicasManager through the broker hooks.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from mqha.autoswitch_ha.events import HandshakeRequest
from mqha.autoswitch_ha.frames import encode_frame
from mqha.broker.protocol import PutStatus, ReadRequest
from mqha.epoch.file import EpochFile
from tests.helpers.processes import free_port
from tests.helpers.run_async import run_async
from tests.integration.ha_nodes import Node, eventually, same_log

pytestmark = pytest.mark.integration


async def pair(tmp_path: Path, **overrides: Any) -> tuple[Node, Node]:
    a = await Node.start(tmp_path / "a", 1, **overrides)
    b = await Node.start(tmp_path / "b", 2, **overrides)
    return a, b


async def stop(*nodes: Node) -> None:
    for node in nodes:
        await node.stop()


def confirmed_set(node: Node) -> frozenset[int]:
    """The SyncStateSet the (fake) controller confirmed to ``node``."""
    return node.ha.keeper.local_set()


def wait_closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the peer closed ``sock`` (EOF or reset) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@run_async()
async def test_slave_replicates_byte_identically_and_joins_the_sync_state_set(tmp_path: Path) -> None:
    a, b = await pair(tmp_path, allAckInSyncStateSet=True)
    try:
        assert await a.become_master(1)
        for _ in range(20):  # ~200 KB before the slave exists: it starts from the master's min offset
            assert (await a.put(10)).status is PutStatus.PUT_OK
        assert await b.follow(a, 1)
        await eventually(lambda: confirmed_set(a) == {1, 2}, message="slave joins the SyncStateSet")
        assert a.controller.proposals[0] == {1, 2}
        # allAckInSyncStateSet: every acked put is on the slave when the reply comes back.
        for i in range(30):  # crosses a 256 KiB segment boundary (blank marker replicated too)
            outcome = await a.put(10, tag=f"r{i}-")
            assert outcome.status is PutStatus.PUT_OK
            assert b.store.max_offset >= outcome.appended[-1].offset + outcome.appended[-1].size
        assert len(a.segment_bytes()) >= 2
        await eventually(
            lambda: b.ha.gate.confirm_offset() == a.store.max_offset, message="slave confirm offset"
        )
        assert same_log(a, b)
        assert b.store.epochs.pairs() == a.store.epochs.pairs() == [(1, 0)]
        status = a.ha.status.runtime_info()
        assert status["master"] and status["inSyncSlaveNums"] == 1
        assert status["haConnectionInfo"][0]["slaveAckOffset"] == a.store.max_offset
        assert b.ha.status.runtime_info()["haClientRuntimeInfo"]["isActivated"]
    finally:
        await stop(a, b)
    # Same files on disk after a clean close, epoch files included.
    saved = [EpochFile(node.config["storePathEpochFile"]).load() for node in (a, b)]
    assert saved[0] == saved[1]


@run_async()
async def test_catch_up_writes_many_batches_per_receive_across_segments(tmp_path: Path) -> None:
    """4 KiB batches: one receive holds dozens, written with one call per segment and ACKed once."""
    a, b = await pair(tmp_path, haTransferBatchSize=4096)
    try:
        assert await a.become_master(1)
        for i in range(150):  # ~1.5 MB: six 256 KiB segments, each closed by a blank marker
            assert (await a.put(10, tag=f"c{i}-")).status is PutStatus.PUT_OK
        assert await b.follow(a, 1)
        await eventually(lambda: b.store.max_offset == a.store.max_offset, message="slave catches up")
        assert len(a.segment_bytes()) >= 6 and same_log(a, b)
        await eventually(
            lambda: a.ha.status.runtime_info()["haConnectionInfo"][0]["slaveAckOffset"] == a.store.max_offset,
            message="the master has the slave's ack of everything",
        )
    finally:
        await stop(a, b)


@run_async()
async def test_divergent_tail_is_truncated_on_handshake_spec_13_case_b(tmp_path: Path) -> None:
    a, b = await pair(tmp_path)
    try:
        assert await a.become_master(1)
        await a.put(50)
        assert await b.follow(a, 1)
        await eventually(lambda: same_log(a, b), message="initial catch-up")
        common = a.store.max_offset
        # The slave loses its link; the master writes a tail nobody else has.
        await b.ha.client.stop()
        await a.put(20, tag="lost-")
        lost_end = a.store.max_offset
        assert lost_end > common
        # Failover: b becomes master of epoch 2 and writes; a comes back as its slave.
        assert await b.become_master(2)
        assert b.store.epochs.pairs() == [(1, 0), (2, common)]
        await b.put(5, tag="new-")
        assert await a.follow(b, 2)
        await eventually(lambda: same_log(a, b), message="old master truncated and caught up")
        assert a.store.epochs.pairs() == [(1, 0), (2, common)]
        await a.access.flush_for_reads()  # as the server does before a read
        messages, _, _ = a.access.read(ReadRequest(common, 100))
        assert all(m.body.startswith(b"new-") for m in messages)
        # The truncation of the epoch-1 tail [common, lost_end) was durable before the new data.
        assert a.store.stored_confirm_offset <= b.store.max_offset
    finally:
        await stop(a, b)


@run_async()
async def test_garbage_on_the_ha_port_closes_only_that_connection(tmp_path: Path) -> None:
    a, b = await pair(tmp_path, allAckInSyncStateSet=True)
    try:
        assert await a.become_master(1)
        assert await b.follow(a, 1)
        await eventually(lambda: confirmed_set(a) == {1, 2})
        host, port = a.ha_address.split(":")
        garbage_inputs = (
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"\x00\x00\x00\x07" + b"\xff" * 40,
            b"\x01" * 3,
        )
        for garbage in garbage_inputs:
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(garbage)
                if len(garbage) >= 12:
                    assert await asyncio.to_thread(wait_closed_by_peer, sock), garbage
        # The real slave never noticed: acked puts still reach it.
        outcome = await a.put(5)
        assert outcome.status is PutStatus.PUT_OK
        assert b.store.max_offset == a.store.max_offset
        assert a.ha.keeper.sync_state_set() == {1, 2}
    finally:
        await stop(a, b)


@run_async()
async def test_handshakes_from_unknown_or_impossible_broker_ids_are_refused(tmp_path: Path) -> None:
    a = await Node.start(tmp_path / "a", 1, is_known_broker=lambda broker_id: broker_id in (1, 2, 3))
    b = await Node.start(tmp_path / "b", 2)
    try:
        assert await a.become_master(1)
        host, port = a.ha_address.split(":")
        bad = [
            encode_frame(HandshakeRequest(slave_id=99)),  # not registered in the broker set
            encode_frame(HandshakeRequest(slave_id=1)),  # the master's own id
            struct.pack(">ihhq", 1, 0, 0, 0),  # id 0 is not a controller id: corrupt frame
            struct.pack(">ihhq", 1, 7, 0, 2),  # flag field out of range
        ]
        for frame in bad:
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(frame)
                assert await asyncio.to_thread(wait_closed_by_peer, sock), frame
        assert await b.follow(a, 1)  # a registered slave is still welcome
        await a.put(3)
        await eventually(lambda: same_log(a, b))
        assert a.ha.status.runtime_info()["haConnectionInfo"][0]["slaveBrokerId"] == 2
    finally:
        await stop(a, b)


@run_async()
async def test_a_slave_is_refused_by_a_broker_that_is_not_master(tmp_path: Path) -> None:
    a, b = await pair(tmp_path)
    try:
        assert await b.follow(a, 1)  # a has no role yet
        await asyncio.sleep(0.3)
        assert not b.ha.client.is_connected
        assert await a.become_master(1)
        await a.put(2)
        await eventually(lambda: same_log(a, b), message="connects once a is master")
    finally:
        await stop(a, b)


@run_async()
async def test_connection_loss_proposes_a_shrink_and_puts_time_out_until_confirmed(tmp_path: Path) -> None:
    a, b = await pair(tmp_path, allAckInSyncStateSet=True, slaveTimeout=300)
    try:
        assert await a.become_master(1)
        assert await b.follow(a, 1)
        await eventually(lambda: confirmed_set(a) == {1, 2})
        a.controller.down = True  # the controller cannot confirm the shrink
        await b.ha.client.stop()
        await eventually(lambda: frozenset({1}) in a.controller.proposals, message="shrink proposed at once")
        # Union semantics while the change is in flight (docs/reference-behaviour.md §10.1): the put still
        # needs slave 2.
        outcome = await a.put(1)
        assert outcome.status is PutStatus.FLUSH_SLAVE_TIMEOUT and outcome.appended
        # The controller confirms the shrink: puts succeed on the master alone.
        a.runtime.apply_sync_state_set(frozenset({1}), 99)
        assert (await a.put(1)).status is PutStatus.PUT_OK
    finally:
        await stop(a, b)


@run_async()
async def test_in_sync_replicas_not_enough_writes_nothing_spec_15(tmp_path: Path) -> None:
    a, b = await pair(tmp_path, minInSyncReplicas=2, inSyncReplicas=2, slaveTimeout=500)
    try:
        assert await a.become_master(1)
        before = a.store.max_offset
        outcome = await a.put(3)
        assert outcome.status is PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH and not outcome.appended
        assert a.store.max_offset == before
        assert await b.follow(a, 1)
        await eventually(lambda: confirmed_set(a) == {1, 2})
        outcome = await a.put(3)  # numeric mode: master + one slave ack
        assert outcome.status is PutStatus.PUT_OK
        assert b.store.max_offset == a.store.max_offset
    finally:
        await stop(a, b)


@run_async()
async def test_reads_stop_at_the_confirm_offset_and_it_survives_a_restart_spec_14(tmp_path: Path) -> None:
    a, b = await pair(tmp_path, allAckInSyncStateSet=True, slaveTimeout=200)
    try:
        assert await a.become_master(1)
        assert await b.follow(a, 1)
        await eventually(lambda: confirmed_set(a) == {1, 2})
        await a.put(5)
        confirmed = a.ha.gate.confirm_offset()
        assert confirmed == a.store.max_offset
        a.controller.down = True
        await b.ha.client.stop()  # unreplicated from here on
        await a.put(5)
        assert a.store.max_offset > confirmed
        assert a.ha.gate.confirm_offset() == confirmed  # a member without a live connection holds it
        request = ReadRequest(0, 1000)
        await a.access.flush_for_reads()  # as the server does before a read
        messages, next_offset, limit = a.access.read(request)
        assert (limit, next_offset, len(messages)) == (confirmed, confirmed, 5)
        a.store.save_confirm_offset(a.ha.gate.confirm_offset())
    finally:
        await stop(a, b)
    again = await Node.start(tmp_path / "a", 1, allAckInSyncStateSet=True)
    try:
        assert again.store.stored_confirm_offset == confirmed  # a restart exposes nothing more
        again.runtime.set_fenced(False)
        request = ReadRequest(0, 1000)
        assert len(again.access.read(request)[0]) == 5
    finally:
        await again.stop()


@run_async()
async def test_three_replicas_double_failover_keeps_every_acked_message(tmp_path: Path) -> None:
    a = await Node.start(tmp_path / "a", 1, allAckInSyncStateSet=True)
    b = await Node.start(tmp_path / "b", 2, allAckInSyncStateSet=True)
    c = await Node.start(tmp_path / "c", 3, allAckInSyncStateSet=True)
    acked: dict[int, bytes] = {}

    async def produce(node: Node, count: int, tag: str) -> None:
        for i in range(count):
            outcome = await node.put(1, size=200, tag=f"{tag}{i}-")
            if outcome.status is PutStatus.PUT_OK:
                acked[outcome.appended[0].offset] = f"{tag}{i}-".encode()

    try:
        assert await a.become_master(1)
        assert await b.follow(a, 1) and await c.follow(a, 1)
        await eventually(lambda: confirmed_set(a) == {1, 2, 3})
        await produce(a, 30, "a")
        # a dies; b (in the SyncStateSet) takes over with epoch 2, c follows b.
        await a.stop()
        assert await b.become_master(2, frozenset({2, 3}))
        assert await c.follow(b, 2)
        await produce(b, 30, "b")
        await eventually(lambda: same_log(b, c))
        # b dies; c takes over with epoch 3; a restarts and follows c.
        await b.stop()
        assert await c.become_master(3, frozenset({3}))
        await produce(c, 10, "c")
        a = await Node.start(tmp_path / "a", 1, allAckInSyncStateSet=True)
        assert await a.follow(c, 3)
        await eventually(lambda: same_log(a, c), message="old master catches up two epochs")
        assert a.store.epochs.pairs() == c.store.epochs.pairs()
        assert len(c.store.epochs.pairs()) == 3
        # a's first ack report reaches c after the bytes: until then a member that has not reported
        # holds the confirm offset back (docs/architecture.md §7, the simulator's seed 418).
        await eventually(
            lambda: c.ha.gate.confirm_offset() == c.store.max_offset, message="c's confirm offset"
        )
        request = ReadRequest(0, 1024)
        await c.access.flush_for_reads()  # as the server does before a read
        messages = {m.offset: m.body for m in c.access.read(request)[0]}
        for offset, tag in acked.items():
            assert messages[offset].startswith(tag), offset
        assert len(acked) == 70
    finally:
        for node in (a, c):
            await node.stop()


@run_async()
async def test_a_slave_that_stops_reading_is_dropped_after_the_housekeeping_interval(tmp_path: Path) -> None:
    # A frozen slave (SIGSTOP) fills the socket buffers: the master's send must not wait forever.
    a = await Node.start(tmp_path / "a", 1, haHousekeepingInterval=1000)
    try:
        assert await a.become_master(1)
        for _ in range(40):
            await a.put(100, size=4000)  # ~16 MB: more than the loopback buffers hold
        host, port = a.ha_address.split(":")
        sock = socket.create_connection((host, int(port)), timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(encode_frame(HandshakeRequest(slave_id=2)) + struct.pack(">iq", 2, 0))
        await eventually(lambda: a.ha.status.runtime_info()["haConnectionInfo"], message="link up")
        await eventually(
            lambda: not a.ha.status.runtime_info()["haConnectionInfo"], timeout=8, message="link dropped"
        )
        assert (await a.put(1)).status is PutStatus.PUT_OK
        sock.close()
    finally:
        await a.stop()


@run_async()
async def test_membership_follows_the_controller_leader_and_gates_handshakes(tmp_path: Path) -> None:
    from aiohttp import web

    from mqha.broker.membership import BrokerSetMembers

    leader_port = free_port()

    async def follower(request: web.Request) -> web.Response:
        body = {
            "code": 2007,
            "codeName": "CONTROLLER_NOT_LEADER",
            "leaderAddress": f"127.0.0.1:{leader_port}",
        }
        return web.json_response(body, status=421)

    async def leader(request: web.Request) -> web.Response:
        replica = {"brokerName": request.query["brokerName"], "brokerAddress": "x", "alive": True}
        table = {
            "masterBrokerId": 1,
            "inSyncReplicas": [{**replica, "brokerId": 1}, {**replica, "brokerId": 2}],
            "notInSyncReplicas": [{**replica, "brokerId": 5}],
        }
        return web.json_response({"code": 0, "replicasInfoTable": {request.query["brokerName"]: table}})

    runners = []
    follower_port = free_port()
    for handler, port in ((follower, follower_port), (leader, leader_port)):
        app = web.Application()
        app.router.add_get("/v1/sync-state-data", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
    members = BrokerSetMembers([f"127.0.0.1:{free_port()}", f"127.0.0.1:{follower_port}"], "broker-a")
    try:
        assert members.is_known(9)  # never learned: fail open (controllers may be down)
        await members.refresh()
        assert members.known == {1, 2, 5}
        assert members.is_known(5) and not members.is_known(9)
    finally:
        await members.stop()
        for runner in runners:
            await runner.cleanup()


@run_async()
async def test_a_master_restarted_into_its_own_epoch_keeps_the_epoch_start(tmp_path: Path) -> None:
    # The controller had not noticed the restart and names the broker master of the same epoch again:
    # what it wrote in that epoch stays inside the epoch's entry (re-starting the entry at the log end
    # left [0, end) outside every entry, and no slave could find a common point with it).
    a = await Node.start(tmp_path / "a", 1)
    try:
        assert await a.become_master(2)
        assert (await a.put(5)).status is PutStatus.PUT_OK
        end = a.store.max_offset
    finally:
        await a.stop()
    again = await Node.start(tmp_path / "a", 1)
    try:
        assert await again.become_master(2)
        assert again.store.max_offset == end and again.store.epochs.pairs() == [(2, 0)]
    finally:
        await again.stop()
