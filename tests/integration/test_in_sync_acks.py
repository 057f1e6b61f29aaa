"""Issue 25 items 4 with real processes: only SyncStateSet members ack (3 ``mqcontroller`` + 3 ``mqbroker``).

* master + an ``asyncLearner`` slave with ``inSyncReplicas=2``, ``allAckInSyncStateSet=false``: puts are
  refused with IN_SYNC_REPLICAS_NOT_ENOUGH before anything is written, until a second in-sync replica
  (a normal slave) joins the SyncStateSet;
* the learner keeps acking while the in-sync slave is cut off (SIGSTOP: its replication link, and
  everything else, stands still): those puts are not acknowledged (FLUSH_SLAVE_TIMEOUT); after the
  master's SIGKILL the in-sync slave is elected and no acknowledged message is lost.

The reference counts the learner's acks (docs/reference-behaviour.md §17.18): 20 of 30 acknowledged
messages were lost that way. Every process is stopped by pid; every wait is bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import running_controllers

pytestmark = pytest.mark.integration

IN_SYNC_FREEZE = {
    "allAckInSyncStateSet": "false",
    "inSyncReplicas": "2",
    "slaveTimeout": "1000",
    # The in-sync slave stays a SyncStateSet member (and alive for the controller) through its freeze.
    "haMaxTimeSlaveNotCatchup": "15000",
    "haHousekeepingInterval": "20000",
    "controllerHeartBeatTimeoutMills": "8000",
}
"""inSyncReplicas=2 without allAck; frozen slaves stay SyncStateSet members and alive meanwhile."""
SETTINGS = {**BROKER_TEST_SETTINGS, **IN_SYNC_FREEZE}


@pytest.fixture
def group(tmp_path: Path) -> Iterator[tuple[ProcessGroup, str]]:
    with running_controllers(tmp_path / "controllers") as started:
        yield started


BIG = 32 * 1024  # bytes per message of the puts made while the in-sync slave is cut off (48 x 10 of them)


def _put(master: Broker, tag: str, acked: dict[int, str], size: int = 0) -> str:
    """Put a batch of 10; record the acknowledged ones; the batch's status."""
    bodies = [f"{tag}-{i}-" + "x" * size for i in range(10)]
    code, reply = master.put(bodies)
    assert code in (200, 503), reply
    for body, result in zip(bodies, reply.get("results", []), strict=False):
        if result["status"] == "PUT_OK":
            acked[result["offset"]] = body
    return str(reply["status"])


def _incarnations(master: Broker) -> dict[int, str | None]:
    info = master.get("/v1/ha/status")["haConnectionInfo"]
    return {c["slaveBrokerId"]: c["slaveIncarnation"] for c in info}


def _connected_slaves(master: Broker) -> int:
    return len(master.get("/v1/ha/status")["haConnectionInfo"])


def test_master_with_only_a_learner_refuses_puts_until_a_second_in_sync_replica(
    group: tuple[ProcessGroup, str], tmp_path: Path
) -> None:
    processes, controllers = group
    master = Broker("m", tmp_path / "m", SETTINGS)
    learner = Broker("l", tmp_path / "l", {**SETTINGS, "asyncLearner": "true"})
    slave = Broker("s", tmp_path / "s", SETTINGS)
    master.start(processes, controllers)
    wait_until(lambda: master.serving_role() == "MASTER", 20, message="master")
    learner.start(processes, controllers)
    wait_until(lambda: learner.serving_role() == "SLAVE", 20, message="learner follows")
    wait_until(lambda: _connected_slaves(master) == 1, 20, message="the learner's HA link")

    # Refused before anything is written, with the documented status and a remark naming the rule.
    before = master.status()["maxOffset"]
    code, reply = master.put(["refused-1", "refused-2"])
    assert code == 503 and reply["status"] == "IN_SYNC_REPLICAS_NOT_ENOUGH", reply
    assert "inSyncReplicas=2" in reply["remark"], reply
    assert "results" not in reply
    assert master.status()["maxOffset"] == before
    assert master.status()["localSyncStateSet"] == [master.status()["controllerBrokerId"]]

    # A second in-sync replica: puts are acknowledged once it is in the SyncStateSet.
    slave.start(processes, controllers)
    wait_until(lambda: len(master.status()["localSyncStateSet"]) == 2, 30, message="SyncStateSet of 2")
    acked: dict[int, str] = {}
    assert _put(master, "both", acked) == "PUT_OK"
    assert len(acked) == 10

    # Each slave process announced its incarnation (docs/architecture.md §8.5); a restarted slave is
    # another process: the master sees a new incarnation, and the slave rejoins the set as that one.
    slave_id = slave.status()["controllerBrokerId"]
    before = _incarnations(master)
    assert before[slave_id] == slave.get("/v1/ha/status")["haClientRuntimeInfo"]["incarnation"]
    assert before[learner.status()["controllerBrokerId"]] is not None
    assert slave.proc is not None
    slave.proc.kill()
    slave.start(processes, controllers)
    wait_until(
        lambda: _incarnations(master).get(slave_id) not in (None, before[slave_id]), 20, message="new process"
    )
    wait_until(lambda: len(master.status()["localSyncStateSet"]) == 2, 30, message="rejoins the set")
    assert _put(master, "again", acked) == "PUT_OK"


def test_learner_acks_never_count_and_no_acknowledged_message_is_lost_at_failover(
    group: tuple[ProcessGroup, str], tmp_path: Path
) -> None:
    processes, controllers = group
    master = Broker("m", tmp_path / "m", SETTINGS)
    slave = Broker("s", tmp_path / "s", SETTINGS)
    learner = Broker("l", tmp_path / "l", {**SETTINGS, "asyncLearner": "true"})
    master.start(processes, controllers)
    wait_until(lambda: master.serving_role() == "MASTER", 20, message="master")
    slave.start(processes, controllers)
    wait_until(lambda: len(master.status()["localSyncStateSet"]) == 2, 30, message="SyncStateSet of 2")
    learner.start(processes, controllers)
    wait_until(lambda: _connected_slaves(master) == 2, 20, message="the learner's HA link")

    acked: dict[int, str] = {}
    for n in range(2):
        assert _put(master, f"both-{n}", acked) == "PUT_OK"

    # The in-sync slave is cut off (frozen); the learner acks everything, which must not count. More
    # than the loopback buffers hold, so the frozen slave cannot have it all in its socket either.
    assert slave.proc is not None and master.proc is not None
    slave.proc.pause()
    statuses: list[str] = []
    try:
        threads = [
            threading.Thread(
                target=lambda n=n: statuses.append(_put(master, f"learner-only-{n}", acked, BIG))
            )
            for n in range(48)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        top = master.status()["maxOffset"]
        wait_until(lambda: learner.status()["maxOffset"] == top, 20, message="the learner has everything")
        master.proc.kill()
    finally:
        slave.proc.resume()

    wait_until(lambda: slave.serving_role() == "MASTER", 30, message="the in-sync slave is elected")
    wait_until(lambda: learner.serving_role() == "SLAVE", 30, message="the learner follows the new master")
    served = {offset: body for offset, _, body in slave.read_all()}
    lost = {o: b for o, b in acked.items() if served.get(o) != b}
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost (offsets {sorted(lost)[:5]}...)"
    assert statuses == ["FLUSH_SLAVE_TIMEOUT"] * 48
    assert len(acked) == 20
