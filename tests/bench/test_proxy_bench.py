"""Benchmark (issue 29): sends through mqproxy with the official RocketMQ 5 Python client vs mqha's own
client straight to the broker, side by side in one run, 1 KiB messages, 1 and 16 concurrent senders.

One cluster (3 controllers, one group of 3 replicas, ``allAckInSyncStateSet``; both paths put into it)
and two mqproxy processes: one deployed as docs/performance.md §9 recommends, on a CPU of its own
(``proxyCpuAffinity``: the machine's last CPU; the target is read on this one), and one that may run
on any CPU, for comparison. Each phase is a closed loop for ``MQHA_PROXY_BENCH_SECONDS`` (default 10)
seconds: the official client as a subprocess from its own venv (N threads share one Producer), mqha's
client as N asyncio tasks in this process. Another row is the official client against a server that
stores nothing and answers at once (``tests/helpers/v2_null_server.py``, on the proxy's CPU): the
ceiling the client and gRPC allow by themselves. The last row is the proxy's own put client
(``mqha.proxy.puts``, the same messages) straight to the master: the put every send through the proxy
waits for. One sender is a chain of waits, so a proxy that cost nothing would take the null server's
time per send plus that put's: the run prints that bound beside the measured ratio. Each row says
what CPU each side spent per message (the client less its start, the proxy or null server, the three
brokers), because on this shared 2-core machine the paths compete for CPU.
``MQHA_PROXY_BENCH_ROUNDS`` (default 1) repeats the phases, interleaved, for the drift between minutes.
Target: the proxy path reaches at least 50 % of the direct path's messages/s.
Run: ``scripts/bench.sh tests/bench/test_proxy_bench.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqha.bench.report import format_table, median, percentile
from mqha.bench.scale import CLK_TCK, cpu_ticks
from mqha.client import Producer
from mqha.client.producer import OutgoingMessage
from mqha.cluster.local import LocalCluster
from mqha.proxy.messages import BORN_HOST, QUEUE_ID
from mqha.proxy.puts import BrokerConnections, PutProducer
from tests.helpers.processes import ProcessGroup, free_port
from tests.helpers.proxy_harness import start_proxy
from tests.helpers.rocketmq_client import SCRIPTS, client_python

pytestmark = pytest.mark.bench

GROUP = "broker-a"
SIZE = 1024
SECONDS = float(os.environ.get("MQHA_PROXY_BENCH_SECONDS", "10"))
ROUNDS = int(os.environ.get("MQHA_PROXY_BENCH_ROUNDS", "1"))
PROXY, PROXY_ANY, DIRECT, NULL, PUT = (
    "mqproxy + official Python client",
    "the same, mqproxy on any CPU",
    "mqha client direct",
    "official client -> null server",
    "the proxy's put client direct",
)


@dataclass(frozen=True)
class Rig:
    cluster: LocalCluster
    client: Path
    proxy: str
    proxy_pid: int
    proxy_any: str
    proxy_any_pid: int
    null: str
    null_pid: int
    client_start_cpu: float
    """CPU seconds of the client's start, one send and stop (a 0-second phase): taken off each phase."""


@dataclass(frozen=True)
class Phase:
    """One closed-loop phase: messages/s, latencies (ms) and CPU ms per message of each side."""

    rate: float
    latencies: list[float]
    failed: int
    client_cpu: float
    server_cpu: float | None
    brokers_cpu: float


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    run_dir = tmp_path_factory.mktemp("proxy-bench")
    client = client_python()
    with (
        LocalCluster(run_dir / "cluster", controllers=3, groups=1, replicas=3) as cluster,
        ProcessGroup() as group,
    ):
        cluster.wait_ready(90)
        cpu = str(max(os.sched_getaffinity(0)))
        # 8 queues: mqproxy's default defaultTopicQueueNums, which the bench always ran with
        (proxy, access), (proxy_any, access_any) = (
            start_proxy(group, cluster, run_dir, settings, queues=8)
            for settings in (f"proxyCpuAffinity={cpu}\n", "")
        )
        null_port = free_port()
        null = group.start(
            [sys.executable, "-m", "tests.helpers.v2_null_server", str(null_port), cpu],
            log_path=run_dir / "null.log",
        )
        null.wait_tcp("127.0.0.1", null_port, timeout=30)
        null_access = f"127.0.0.1:{null_port}"
        before = _children_cpu()
        run_client(client, null_access, 0, 1)
        start_cpu = _children_cpu() - before
        yield Rig(
            cluster, client, access, proxy.pid, access_any, proxy_any.pid, null_access, null.pid, start_cpu
        )


def cpu_seconds(pids: Sequence[int]) -> float:
    return sum(cpu_ticks(Path(f"/proc/{pid}/stat").read_text()) for pid in pids) / CLK_TCK


def broker_pids(cluster: LocalCluster) -> list[int]:
    return [pid for pid in (cluster.pid(node) for node in cluster.brokers) if pid is not None]


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def run_client(client: Path, access_point: str, seconds: float, concurrency: int) -> dict[str, Any]:
    """One closed-loop run of the official client (``python_bench.py``); its JSON result."""
    out = subprocess.run(
        [
            str(client),
            str(SCRIPTS / "python_bench.py"),
            access_point,
            "Bench",
            str(seconds),
            str(concurrency),
            str(SIZE),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def official(rig: Rig, access_point: str, server_pid: int, concurrency: int) -> Phase:
    brokers = broker_pids(rig.cluster)
    server_before, brokers_before = cpu_seconds([server_pid]), cpu_seconds(brokers)
    children_before = _children_cpu()
    result = run_client(rig.client, access_point, SECONDS, concurrency)
    sent = max(1, result["sent"])
    client_cpu = max(0.0, _children_cpu() - children_before - rig.client_start_cpu)
    return Phase(
        result["sent"] / result["seconds"],
        result["latencies_ms"],
        result["failed"],
        client_cpu * 1000 / sent,
        (cpu_seconds([server_pid]) - server_before) * 1000 / sent,
        (cpu_seconds(brokers) - brokers_before) * 1000 / sent,
    )


def direct(rig: Rig, concurrency: int) -> Phase:
    """mqha's own client straight to the broker."""

    def make() -> Producer:
        return Producer(rig.cluster.controller_addresses, GROUP)

    body = b"x" * SIZE
    return closed_loop(rig, concurrency, make, lambda producer: producer.send("Bench", body))


def proxy_put(rig: Rig, concurrency: int) -> Phase:
    """The proxy's own put client (``PutProducer`` over ``BrokerConnections``) straight to the master,
    with the fields the proxy puts for an official client's send (msgId, born timestamp and host, queue)."""
    sent = iter(range(1 << 62))
    body = b"x" * SIZE

    @contextlib.asynccontextmanager
    async def make() -> AsyncIterator[Producer]:
        connections = BrokerConnections()
        try:
            async with PutProducer(
                rig.cluster.controller_addresses, GROUP, connect_timeout=0.25, connections=connections
            ) as producer:
                yield producer
        finally:
            await connections.close()

    def message() -> OutgoingMessage:
        return OutgoingMessage(
            "Bench",
            body,
            properties={BORN_HOST: "127.0.0.1", QUEUE_ID: "0"},
            msg_id=f"BENCH{next(sent):027d}",
            born_timestamp=int(time.time() * 1000),
        )

    async def send(producer: Producer) -> Any:
        return (await producer.send_each([message()]))[0]

    return closed_loop(rig, concurrency, make, send)


def closed_loop(
    rig: Rig,
    concurrency: int,
    make: Callable[[], contextlib.AbstractAsyncContextManager[Producer]],
    send: Callable[[Producer], Awaitable[Any]],
) -> Phase:
    """``concurrency`` asyncio senders in this process, each sending with ``send`` back to back for
    ``SECONDS`` through one producer from ``make``."""

    async def run() -> tuple[float, list[float], int]:
        latencies: list[float] = []
        failed = 0
        async with make() as producer:
            await send(producer)  # route and connection before the clock starts
            stop_at = time.monotonic() + SECONDS

            async def sender() -> None:
                nonlocal failed
                while time.monotonic() < stop_at:
                    started = time.perf_counter()
                    result = await send(producer)
                    if result.ok:
                        latencies.append((time.perf_counter() - started) * 1000)
                    else:
                        failed += 1

            began = time.monotonic()
            await asyncio.gather(*(sender() for _ in range(concurrency)))
            return len(latencies) / (time.monotonic() - began), latencies, failed

    brokers = broker_pids(rig.cluster)
    own_before, brokers_before = time.process_time(), cpu_seconds(brokers)
    rate, latencies, failed = asyncio.run(run())
    sent = max(1, len(latencies))
    own, brokers_cpu = time.process_time() - own_before, cpu_seconds(brokers) - brokers_before
    return Phase(rate, latencies, failed, own * 1000 / sent, None, brokers_cpu * 1000 / sent)


def row(name: str, concurrency: int, phase: Phase) -> list[str]:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return [
        name,
        str(concurrency),
        f"{phase.rate:.0f}",
        ms(percentile(phase.latencies, 0.5)),
        ms(percentile(phase.latencies, 0.99)),
        ms(phase.client_cpu),
        ms(phase.server_cpu),
        ms(phase.brokers_cpu),
    ]


def test_proxy_path_vs_direct_path(rig: Rig) -> None:
    rows = []
    ratios: dict[int, list[float]] = {1: [], 16: []}
    ratios_any: dict[int, list[float]] = {1: [], 16: []}
    bounds: list[float] = []
    load = [os.getloadavg()[0]]
    for _ in range(ROUNDS):
        for concurrency, measured in ratios.items():
            proxied = official(rig, rig.proxy, rig.proxy_pid, concurrency)
            straight = direct(rig, concurrency)
            proxied_any = official(rig, rig.proxy_any, rig.proxy_any_pid, concurrency)
            ceiling = official(rig, rig.null, rig.null_pid, concurrency)
            put = proxy_put(rig, concurrency)
            assert not (
                proxied.failed or straight.failed or proxied_any.failed or ceiling.failed or put.failed
            )
            measured.append(proxied.rate / straight.rate)
            ratios_any[concurrency].append(proxied_any.rate / straight.rate)
            if concurrency == 1:  # a chain of waits: the null server's time per send plus the put's
                bounds.append(1 / (1 / ceiling.rate + 1 / put.rate) / straight.rate)
            rows += [
                row(PROXY, concurrency, proxied),
                row(DIRECT, concurrency, straight),
                row(PROXY_ANY, concurrency, proxied_any),
                row(NULL, concurrency, ceiling),
                row(PUT, concurrency, put),
            ]
            load.append(os.getloadavg()[0])
    print()
    print(
        format_table(
            f"1 KiB sends, {SECONDS:g} s per phase (allAckInSyncStateSet, 3 replicas); CPU in ms per "
            f"message; 1-minute load average {min(load):.1f}..{max(load):.1f} on {os.cpu_count()} CPUs",
            [
                "path",
                "senders",
                "msgs/s",
                "p50 ms",
                "p99 ms",
                "client CPU",
                "proxy/server CPU",
                "brokers CPU",
            ],
            rows,
        )
    )
    for label, table in (("proxy / direct msgs/s", ratios), ("with mqproxy on any CPU", ratios_any)):
        print(
            f"{label}: "
            + ", ".join(
                f"{c} senders {median(r) or 0:.0%}"
                + (f" (rounds {', '.join(f'{x:.0%}' for x in r)})" if len(r) > 1 else "")
                for c, r in table.items()
            )
        )
    print(
        "1 sender, a proxy that cost nothing (null server's time per send + the put's): "
        f"{median(bounds) or 0:.0%} of direct"
    )
