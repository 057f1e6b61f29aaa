"""RocketMQ 5's official Java (rocketmq-client-java 5.0.8) and Go (golang/v5 5.1.2) clients, unmodified,
through mqproxy into a real cluster (3 controllers, one group of 3 replicas): one short round trip
each, 100 sends then a SimpleConsumer (and for Java a PushConsumer) that gets every acknowledged one.

The Go client always dials TLS (it skips verifying the certificate and has no option to dial plain
gRPC), as RocketMQ's proxy serves TLS by default; so it talks to a second mqproxy with ``tlsEnable``.

The failover variants (marker ``interop``, ``scripts/interop.sh clients-failover``): a steady producer
and the consumers run while the group's master is SIGKILLed; no send fails, and every acknowledged
sequence number is consumed by each consumer kind (Java SimpleConsumer and PushConsumer, Go
SimpleConsumer), duplicates allowed; and consumers draining a backlog of 2,000 ride through a kill too.

The drivers are ours (``interop/java-client``, ``interop/go-client``), built from Maven Central and the
Go module proxy by ``scripts/setup.sh`` (or on first use). The reference RocketMQ cluster runs with
``scripts/interop.sh``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ManagedProcess, ProcessGroup
from tests.helpers.proxy_harness import GROUP, lines, start_proxy, wait_done
from tests.helpers.rocketmq_client import go_client, java_client
from tests.helpers.tls_certs import TestCA

pytestmark = pytest.mark.integration

COUNT = 100


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    run_dir = tmp_path_factory.mktemp("java-go-cluster")
    with LocalCluster(run_dir, controllers=3, groups=1, replicas=3) as local:
        local.wait_ready(90)
        yield local
    assert local.running_pids() == []


@pytest.fixture(scope="module")
def proxies(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two mqproxies in front of one cluster: plain gRPC, and gRPC over TLS."""
    tls = TestCA(tmp_path_factory.mktemp("ca")).node("mqproxy")
    served = {key: value for key, value in tls.settings().items() if not key.startswith("tls.client.")}
    tls_settings = "".join(f"{key}={value}\n" for key, value in served.items())
    with ProcessGroup() as group:
        plain = start_proxy(group, cluster, tmp_path_factory.mktemp("proxy"))[1]
        secure = start_proxy(group, cluster, tmp_path_factory.mktemp("proxy-tls"), tls_settings)[1]
        yield plain, secure


def _run(command: list[str], home: Path, timeout: float) -> list[dict[str, Any]]:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=home, env=env, check=False
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events and events[-1].get("done"), f"no result (exit {done.returncode}): {done.stderr[-2000:]}"
    return events


def _round_trip(client: list[str], proxy: str, topic: str, tmp_path: Path, consumers: list[str]) -> None:
    sent = _run([*client, "produce", proxy, topic, str(COUNT), "4", "1024"], tmp_path, 180)
    acked = {event["seq"] for event in sent if event.get("ok") is True}
    assert sent[-1] == {"done": True, "ok": COUNT, "failed": 0}, [e for e in sent if e.get("ok") is False][:3]
    assert acked == set(range(COUNT))
    for kind in consumers:
        got = _run([*client, kind, proxy, topic, f"{topic}-{kind}", str(COUNT), "90"], tmp_path, 180)
        assert {event["seq"] for event in got if "seq" in event} >= acked, kind


def test_the_official_java_client_produces_and_consumes(proxies: tuple[str, str], tmp_path: Path) -> None:
    _round_trip(java_client(), proxies[0], "JavaRoundTrip", tmp_path, ["simple", "push"])


def test_the_official_go_client_produces_and_consumes_over_tls(
    proxies: tuple[str, str], tmp_path: Path
) -> None:
    _round_trip(go_client(), proxies[1], "GoRoundTrip", tmp_path, ["simple"])


FAILOVER_COUNT = 800
SEND_INTERVAL_MS = 10
KILL_AFTER_ACKS = 200


def _start(group: ProcessGroup, command: list[str], run_dir: Path, name: str) -> ManagedProcess:
    """A driver started, once it printed that its client is up."""
    env = {"HOME": str(run_dir), "MQ_SEND_INTERVAL_MS": str(SEND_INTERVAL_MS)}
    process = group.start(command, log_path=run_dir / f"{name}.out", env=env, cwd=run_dir)
    deadline = time.monotonic() + 120
    while not any(line.get("started") for line in lines(process)):
        assert process.is_running() and time.monotonic() < deadline, process.log_tail()
        time.sleep(0.05)
    return process


def _acked_seqs(process: ManagedProcess) -> set[int]:
    return {line["seq"] for line in lines(process) if line.get("ok") is True}


def _ack_timing(sends: list[dict[str, Any]], killed_at: float) -> str:
    """The largest gap between acks, and when the first ack after the kill came."""
    acks = sorted(line["t"] for line in sends if line["ok"] is True)
    after = [t for t in acks if t > killed_at]
    first = f"{after[0] - killed_at:.3f} s" if after else "never"
    gap = max(b - a for a, b in itertools.pairwise(acks))
    return (
        f"largest gap between acks {gap:.3f} s, first ack after the kill {first}, {len(after)} acks after it"
    )


def _consumed(
    results: dict[str, tuple[dict[str, Any], ManagedProcess]], acked: set[int]
) -> dict[str, list[int]]:
    """Prints what each consumer got; the acknowledged sequence numbers each one lost."""
    lost_by_kind = {}
    for kind, (done, process) in results.items():
        got = _consumed_seqs(process)
        lost_by_kind[kind] = sorted(acked - set(got))
        print(
            f"  {kind}: {len(got)} consumed, {len(set(got))} distinct, lost {len(lost_by_kind[kind])}, "
            f"duplicated {len(got) - len(set(got))}; summary {done}"
        )
    return lost_by_kind


def _failover(
    cluster: LocalCluster,
    client: list[str],
    proxy: str,
    topic: str,
    consumers: list[str],
    *,
    senders: int,
    run_dir: Path,
) -> None:
    """Consumers and a steady producer run while the master is SIGKILLed; then the checks and figures."""
    master = cluster.master(GROUP, timeout=30)
    assert master is not None
    count = str(FAILOVER_COUNT)
    with ProcessGroup() as group:
        # One client at a time: JVMs starting together on 2 busy cores miss the client's 3 s deadlines.
        running = {
            kind: _start(group, [*client, kind, proxy, topic, f"{topic}-{kind}", count, "300"], run_dir, kind)
            for kind in consumers
        }
        producer = _start(
            group,
            [*client, "produce", proxy, topic, count, str(senders), "1024"],
            run_dir,
            "produce",
        )
        deadline = time.monotonic() + 120
        while len(_acked_seqs(producer)) < KILL_AFTER_ACKS:
            assert producer.is_running() and time.monotonic() < deadline, producer.log_tail()
            time.sleep(0.02)
        killed_at = time.time()
        cluster.kill(master)
        summary = wait_done(producer, timeout=240)
        sends = [line for line in lines(producer) if "seq" in line]
        acked = _acked_seqs(producer)
        results = {kind: (wait_done(process, timeout=360), process) for kind, process in running.items()}
    failures = [line for line in sends if line["ok"] is False]
    after_kill = [line["t"] for line in sends if line["ok"] is True and line["t"] > killed_at]
    print(
        f"\n{client[0].rsplit('/', 1)[-1]} failover {topic}, {senders} senders: {len(sends)} sends, "
        f"{len(failures)} failed, {len(acked)} acked, {_ack_timing(sends, killed_at)}"
    )
    lost_by_kind = _consumed(results, acked)
    cluster.start_node(master, timeout=60)  # leave the group whole for whatever runs next
    cluster.wait_ready(90, groups=[GROUP])
    assert summary["failed"] == 0 and not failures, failures[:5]
    assert acked == set(range(FAILOVER_COUNT))
    assert len(after_kill) >= 100  # the kill landed mid-stream
    assert all(not lost for lost in lost_by_kind.values()), {k: v[:10] for k, v in lost_by_kind.items()}


@pytest.mark.interop
@pytest.mark.timeout(900)
@pytest.mark.parametrize("senders", [1, 16])
def test_the_java_client_rides_through_a_master_kill(
    cluster: LocalCluster, proxies: tuple[str, str], senders: int, tmp_path: Path
) -> None:
    topic, consumers = f"JavaFailover{senders}", ["simple", "push"]
    _failover(cluster, java_client(), proxies[0], topic, consumers, senders=senders, run_dir=tmp_path)


@pytest.mark.interop
@pytest.mark.timeout(900)
@pytest.mark.parametrize("senders", [1, 16])
def test_the_go_client_rides_through_a_master_kill(
    cluster: LocalCluster, proxies: tuple[str, str], senders: int, tmp_path: Path
) -> None:
    topic = f"GoFailover{senders}"
    _failover(cluster, go_client(), proxies[1], topic, ["simple"], senders=senders, run_dir=tmp_path)


BACKLOG = 2000
KILL_AFTER_CONSUMED = 300


@pytest.mark.interop
@pytest.mark.timeout(900)
@pytest.mark.parametrize("language", ["java", "go"])
def test_consumers_draining_a_backlog_ride_through_a_master_kill(
    cluster: LocalCluster, proxies: tuple[str, str], language: str, tmp_path: Path
) -> None:
    """2,000 messages first; the master is SIGKILLed once each consumer got 300 of them."""
    client, proxy, consumers = (
        (java_client(), proxies[0], ["simple", "push"])
        if language == "java"
        else (go_client(), proxies[1], ["simple"])
    )
    topic, count = f"Backlog-{language}", str(BACKLOG)
    sent = _run([*client, "produce", proxy, topic, count, "16", "1024"], tmp_path, 300)
    assert sent[-1] == {"done": True, "ok": BACKLOG, "failed": 0}
    master = cluster.master(GROUP, timeout=30)
    assert master is not None
    with ProcessGroup() as group:
        running = {
            kind: _start(
                group, [*client, kind, proxy, topic, f"{topic}-{kind}", count, "300"], tmp_path, kind
            )
            for kind in consumers
        }
        deadline = time.monotonic() + 240
        while min(len(_consumed_seqs(process)) for process in running.values()) < KILL_AFTER_CONSUMED:
            assert time.monotonic() < deadline, {kind: p.log_tail() for kind, p in running.items()}
            time.sleep(0.02)
        print(f"\n{language} backlog of {BACKLOG}: killed after {_consumed_counts(running)} consumed")
        cluster.kill(master)
        results = {kind: (wait_done(process, timeout=360), process) for kind, process in running.items()}
    lost_by_kind = _consumed(results, set(range(BACKLOG)))
    cluster.start_node(master, timeout=60)
    cluster.wait_ready(90, groups=[GROUP])
    assert all(not lost for lost in lost_by_kind.values()), {k: v[:10] for k, v in lost_by_kind.items()}


def _consumed_seqs(process: ManagedProcess) -> list[int]:
    return [line["seq"] for line in lines(process) if "seq" in line]


def _consumed_counts(running: dict[str, ManagedProcess]) -> dict[str, int]:
    return {kind: len(_consumed_seqs(process)) for kind, process in running.items()}
