"""Issue 25 items 3 and 5 over real loopback TCP and HTTP (in-process nodes, ``ha_nodes``):

* a slave whose whole log shares nothing with its new master (the master lost its whole tail and was
  elected anyway) serves no stale message at any moment: reads are refused, with the reason, until the
  handshake has emptied it and it re-synced from the master; then it serves the master's messages;
* a member that comes back as another process (a new incarnation) does not ack as its old self: the
  master takes it out of the SyncStateSet and puts wait for it until it rejoined as the new process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mqha.broker.protocol import PutStatus
from mqha.replicas_manager.hooks import MasterInfo
from tests.helpers.processes import free_port
from tests.helpers.run_async import run_async
from tests.integration.ha_nodes import Node, eventually, same_log

pytestmark = pytest.mark.integration


async def read(session: aiohttp.ClientSession, node: Node, offset: int = 0) -> tuple[int, dict[str, Any]]:
    async with session.get(f"{node.url}/v1/messages?offset={offset}&maxMessages=1000") as response:
        return response.status, await response.json(content_type=None)


def bodies(node: Node) -> dict[int, str]:
    """offset → body of every message in ``node``'s log."""
    log = node.store.log
    messages, _ = log.read_messages(0, 10_000, log.max_offset)
    return {m.offset: m.body.decode() for m in messages}


@run_async()
async def test_a_slave_with_no_consistent_point_serves_nothing_stale_and_resyncs(tmp_path: Path) -> None:
    old = await Node.start(tmp_path / "old", 1, allAckInSyncStateSet=True)
    slave = await Node.start(tmp_path / "slave", 2, http=True, allAckInSyncStateSet=True)
    new = await Node.start(tmp_path / "new", 3, allAckInSyncStateSet=True)
    try:
        async with aiohttp.ClientSession() as session:
            assert await old.become_master(1)
            assert await slave.follow(old, 1)
            await eventually(lambda: old.ha.keeper.local_set() == {1, 2})
            assert (await old.put(10, tag="old-")).status is PutStatus.PUT_OK
            await eventually(lambda: slave.ha.gate.confirm_offset() == old.store.max_offset)
            status, body = await read(session, slave)
            assert status == 200 and len(body["messages"]) == 10

            # The old master is gone with its whole log; a replica that never had any of it is elected
            # (epoch 2 from offset 0) and reuses the offsets for other messages.
            await slave.ha.client.stop()
            assert await new.become_master(2, frozenset({3}))
            assert (await new.put(4, tag="new-")).status is PutStatus.PUT_OK
            reused = bodies(new)
            assert set(reused) & set(bodies(slave))

            assert await slave.follow(new, 2)
            # From the role change on, a read answers the master's messages or nothing, never the old
            # ones at the reused offsets.
            served: list[int] = []
            refusals: set[str] = set()
            for _ in range(2000):
                status, body = await read(session, slave)
                if status == 200:
                    for m in body["messages"]:
                        assert reused.get(m["offset"]) == m["body"], f"stale message at {m['offset']}"
                    served.append(len(body["messages"]))
                else:
                    assert status == 503, body
                    refusals.add(body["remark"])
                if same_log(slave, new) and served and served[-1] == len(reused):
                    break
                await asyncio.sleep(0.005)
            assert same_log(slave, new), "the slave did not re-sync from the new master"
            assert served[-1] == len(reused)
            assert all("replica not" in r for r in refusals), refusals
            assert slave.http is not None
            views = slave.http.views.status()
            assert views["readRefusal"] is None
            assert slave.store.epochs.pairs() == new.store.epochs.pairs()
    finally:
        for node in (old, slave, new):
            await node.stop()


@run_async()
async def test_a_slave_reads_nothing_until_verified_and_says_why(tmp_path: Path) -> None:
    master = await Node.start(tmp_path / "m", 1)
    slave = await Node.start(tmp_path / "s", 2, http=True)
    try:
        async with aiohttp.ClientSession() as session:
            assert await master.become_master(1)
            await master.put(3)
            # The master's HA port cannot be reached (nothing listens there): no handshake, no reads.
            info = MasterInfo(1, f"127.0.0.1:{master.config['listenPort']}", f"127.0.0.1:{free_port()}")
            assert await slave.runtime.change_to_slave(info, 1)
            slave.runtime.set_fenced(False)
            status, body = await read(session, slave)
            assert status == 503 and "not yet verified" in body["remark"], body
            assert slave.http is not None
            assert "not yet verified" in slave.http.views.status()["readRefusal"]
    finally:
        for node in (master, slave):
            await node.stop()


@run_async()
async def test_a_member_back_as_another_process_does_not_ack_as_its_old_self(tmp_path: Path) -> None:
    master = await Node.start(tmp_path / "m", 1, allAckInSyncStateSet=True, slaveTimeout=300)
    slave = await Node.start(tmp_path / "s", 2, allAckInSyncStateSet=True)
    try:
        assert await master.become_master(1)
        assert await slave.follow(master, 1)
        await eventually(lambda: master.ha.keeper.local_set() == {1, 2})
        first = slave.ha.incarnation
        assert master.ha.slave_incarnations() == {2: first}
        assert master.ha.keeper.bound() == {2: first}
        assert (await master.put(2)).status is PutStatus.PUT_OK

        # The controller confirms nothing from here on; the slave restarts as a new process on its store.
        master.controller.down = True
        await slave.stop()
        slave = await Node.start(tmp_path / "s", 2, allAckInSyncStateSet=True)
        second = slave.ha.incarnation
        assert second != first
        assert await slave.follow(master, 1)
        await eventually(lambda: master.ha.links.incarnations() == {2: second})
        await eventually(lambda: same_log(master, slave))
        # The master still vouches for the process it saw catch up, not for the new one.
        assert master.ha.slave_incarnations() == {2: first}
        # The new process holds everything, but it is not the member the controller confirmed: its acks
        # do not count, the master proposes the set without it, and a put is not acknowledged.
        outcome = await master.put(1)
        assert outcome.status is PutStatus.FLUSH_SLAVE_TIMEOUT, outcome
        assert slave.store.max_offset == master.store.max_offset  # it did store it
        assert frozenset({1}) in master.controller.proposals
        assert master.ha.gate.counted_acks() == {}

        # The controller confirms the set without it; it rejoins as the new process.
        master.controller.down = False
        master.controller.epoch += 1
        master.runtime.apply_sync_state_set(frozenset({1}), master.controller.epoch)
        await eventually(lambda: master.ha.keeper.local_set() == {1, 2}, message="rejoins as itself")
        assert master.ha.keeper.bound() == {2: second}
        assert master.ha.slave_incarnations() == {2: second}
        assert (await master.put(1)).status is PutStatus.PUT_OK
    finally:
        for node in (master, slave):
            await node.stop()
