"""Benchmark (issue 29): sends through mqproxy with the official RocketMQ 5 Python client vs mqha's own
client straight to the broker, side by side in one run, 1 KiB messages, 1 and 16 concurrent senders.

One cluster (3 controllers, one group of 3 replicas, ``allAckInSyncStateSet``) and one mqproxy. Each
phase is a closed loop for ``MQHA_PROXY_BENCH_SECONDS`` (default 10) seconds: the official client as a
subprocess from its own venv (16 threads share one Producer), mqha's client as asyncio tasks in this
process. Target: the proxy path reaches at least 50 % of the direct path's messages/s.
Run: ``scripts/bench.sh tests/bench/test_proxy_bench.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqha.bench.report import format_table, percentile
from mqha.client import Producer
from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup, free_port
from tests.helpers.rocketmq_client import SCRIPTS, client_python

pytestmark = pytest.mark.bench

GROUP = "broker-a"
SIZE = 1024
SECONDS = float(os.environ.get("MQHA_PROXY_BENCH_SECONDS", "10"))


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str, Path]]:
    run_dir = tmp_path_factory.mktemp("proxy-bench")
    client = client_python()
    with (
        LocalCluster(run_dir / "cluster", controllers=3, groups=1, replicas=3) as cluster,
        ProcessGroup() as group,
    ):
        cluster.wait_ready(90)
        port = free_port()
        conf = run_dir / "proxy.conf"
        conf.write_text(
            f"grpcServerPort={port}\ngrpcBindAddress=127.0.0.1\n"
            f"controllerAddr={';'.join(cluster.controller_addresses)}\n"
        )
        proxy = group.start(
            [sys.executable, "-m", "mqha.proxy", "-c", str(conf)], log_path=run_dir / "proxy.log"
        )
        proxy.wait_tcp("127.0.0.1", port, timeout=30)
        yield cluster, f"127.0.0.1:{port}", client


def through_proxy(client: Path, access_point: str, concurrency: int) -> tuple[float, list[float], int]:
    out = subprocess.run(
        [
            str(client),
            str(SCRIPTS / "python_bench.py"),
            access_point,
            "Bench",
            str(SECONDS),
            str(concurrency),
            str(SIZE),
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS + 120,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["sent"] / result["seconds"], result["latencies_ms"], result["failed"]


def direct(cluster: LocalCluster, concurrency: int) -> tuple[float, list[float], int]:
    async def run() -> tuple[float, list[float], int]:
        latencies: list[float] = []
        failed = 0
        body = b"x" * SIZE
        async with Producer(cluster.controller_addresses, GROUP) as producer:
            await producer.send("Bench", body)  # route and connection before the clock starts
            stop_at = time.monotonic() + SECONDS

            async def sender() -> None:
                nonlocal failed
                while time.monotonic() < stop_at:
                    started = time.perf_counter()
                    result = await producer.send("Bench", body)
                    if result.ok:
                        latencies.append((time.perf_counter() - started) * 1000)
                    else:
                        failed += 1

            began = time.monotonic()
            await asyncio.gather(*(sender() for _ in range(concurrency)))
            return len(latencies) / (time.monotonic() - began), latencies, failed

    return asyncio.run(run())


def test_proxy_path_vs_direct_path(setup: tuple[LocalCluster, str, Path]) -> None:
    cluster, access_point, client = setup
    rows = []
    ratios = {}
    for concurrency in (1, 16):
        proxy_rate, proxy_lat, proxy_failed = through_proxy(client, access_point, concurrency)
        direct_rate, direct_lat, direct_failed = direct(cluster, concurrency)
        assert proxy_failed == 0 and direct_failed == 0
        ratios[concurrency] = proxy_rate / direct_rate
        for name, rate, lat in (
            ("mqproxy + official Python client", proxy_rate, proxy_lat),
            ("mqha client direct", direct_rate, direct_lat),
        ):
            rows.append(
                [
                    name,
                    concurrency,
                    f"{rate:.0f}",
                    f"{percentile(lat, 0.5):.2f}",
                    f"{percentile(lat, 0.99):.2f}",
                ]
            )
    print()
    print(
        format_table(
            f"1 KiB sends, {SECONDS:g} s per phase (allAckInSyncStateSet, 3 replicas)",
            ["path", "senders", "msgs/s", "p50 ms", "p99 ms"],
            rows,
        )
    )
    print("proxy / direct msgs/s: " + ", ".join(f"{c} senders {r:.0%}" for c, r in ratios.items()))
