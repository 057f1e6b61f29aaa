"""The Apache RocketMQ reference cluster beside mqha (issue 47), behind the ``interop`` marker: run by
``scripts/interop.sh test``, never in the default run (it starts 8 JVMs and takes minutes).

One reference cluster (``interop/rocketmq/reference_cluster.py``) serves the module: it comes up with a
master and a SyncStateSet of 3, the official Java client round-trips 100 messages through its proxy,
a master SIGKILL under load is read back with the no-loss check ``mqha bench rocketmq`` uses (on both
sides alike), and ``down`` leaves none of its processes running.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqha.bench.rocketmq import JavaDriver, failover_run
from mqha.bench.rocketmq_sides import KILL, MqhaSide, RocketMQSide

pytestmark = [pytest.mark.interop, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQSide]:
    side = RocketMQSide(tmp_path_factory.mktemp("reference"))
    try:
        yield side
    finally:
        pids = [p.pid for p in side.layout.processes]
        side.stop()
        assert [pid for pid in pids if side.ref._alive(pid)] == []


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> JavaDriver:
    return JavaDriver(tmp_path_factory.mktemp("java"))


def test_the_group_is_up_with_a_master_and_three_in_sync(rocketmq: RocketMQSide) -> None:
    master = rocketmq.master()
    assert master.present and master.in_sync == 3
    assert master.pid in [p.pid for p in rocketmq.layout.processes if p.role == "broker"]


def test_the_java_client_round_trips_through_the_reference_proxy(
    rocketmq: RocketMQSide, java: JavaDriver
) -> None:
    rocketmq.create_topic("RoundTrip")
    sent = java.run("produce", rocketmq.endpoint, "RoundTrip", "100", "4", "1024", timeout=300)
    assert sent[-1] == {"done": True, "ok": 100, "failed": 0}
    read = java.run("drain", rocketmq.endpoint, "RoundTrip", "RoundTripReader", "5", "300", timeout=420)
    assert {e["seq"] for e in read if "seq" in e} == set(range(100))


def test_a_master_sigkill_loses_no_acknowledged_message(rocketmq: RocketMQSide, java: JavaDriver) -> None:
    run = failover_run(rocketmq, java, KILL, senders=4, kills=1, tag="Test")
    cycle = run["cycles"][0]
    print(f"RocketMQ after a master SIGKILL: {run}")
    assert cycle["new_master_s"] > 0 and run["acked"] > 0
    assert run["lost"] == 0, run


def test_mqha_loses_none_under_the_same_fault(tmp_path: Path, java: JavaDriver) -> None:
    side = MqhaSide(tmp_path)
    try:
        run = failover_run(side, java, KILL, senders=4, kills=1, tag="Test")
    finally:
        side.stop()
    print(f"mqha after a master SIGKILL: {run}")
    assert run["lost"] == 0 and run["acked"] > 0, run
    assert side.cluster.running_pids() == []
    assert os.path.isdir(tmp_path / "mqha")
