"""Controller figures through HTTP: committed writes/s, alter/elect latency, failover to the next write.

Run: ``.venv/bin/python -m pytest -m bench -s tests/bench/test_controller_bench.py``
(or ``scripts/bench.sh tests/bench/test_controller_bench.py``). Prints a table and writes
``bench-results/controller.json``; asserts nothing about speed (targets are reported).

Setup: 3 ``mqcontroller`` processes on this host (journal fsync on: ``controllerJournalFsync=true``,
the default), the load generator in this process (aiohttp, keep-alive connections). Each client owns
one broker set with two live replicas and loops: alter the SyncStateSet {m} -> {m, o}, then a
designated election of o (SyncStateSet {o}), then swaps m and o. Every call is a committed write
(one Raft entry, fsynced on a majority before the answer). Writes to different sets run in
parallel; one set is written one at a time (ARCHITECTURE §3), so N clients = N sets.

Failover: kill -9 of the leader, then a client retries an apply-id on the survivors (following 421
``leaderAddress``) until one commits; the killed node is restarted and catches up between repeats.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.helpers.processes import ProcessGroup
from tests.integration.controller_cluster import (
    ControllerCluster,
    Node,
    groups_of,
    heartbeat,
    register_broker,
)

pytestmark = pytest.mark.bench

SECONDS_PER_RUN = 3.0
REPEATS = 3
FAILOVER_REPEATS = 10
CONCURRENCY = (1, 32)
RESULTS = Path(__file__).resolve().parents[2] / "bench-results" / "controller.json"
TARGETS = {"p50_ms_at_1_client": 5.0, "writes_per_s_at_32_clients": 2000.0, "failover_median_s": 1.0}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _SetClient:
    """One client looping alter / designated elect on its own broker set."""

    def __init__(self, http: aiohttp.ClientSession, url: str, name: str) -> None:
        self.http, self.url, self.name = http, url, name
        self.master, self.other = 1, 2
        self.master_epoch, self.sss_epoch = 1, 1
        self.latency: dict[str, list[float]] = {"alter": [], "elect": []}
        self.errors: dict[str, int] = {}

    async def _post(self, kind: str, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        t0 = time.perf_counter()
        async with self.http.post(self.url + path, json=body) as response:
            data = await response.json()
        elapsed = (time.perf_counter() - t0) * 1000
        if response.status != 200:
            key = f"{kind}:{data.get('codeName')}"
            self.errors[key] = self.errors.get(key, 0) + 1
            return None
        self.latency[kind].append(elapsed)
        return data

    async def run(self, until: float) -> None:
        while time.monotonic() < until:
            alter = {
                "masterBrokerId": self.master,
                "masterEpoch": self.master_epoch,
                "syncStateSet": [self.master, self.other],
                "syncStateSetEpoch": self.sss_epoch,
            }
            reply = await self._post("alter", f"/v1/groups/{self.name}/sync-state-set", alter)
            if reply is None:
                return
            self.sss_epoch = reply["newSyncStateSetEpoch"]
            elect = {"clusterName": "c1", "brokerId": self.other, "designateElect": True}
            reply = await self._post("elect", f"/v1/groups/{self.name}/elect", elect)
            if reply is None:
                return
            self.master_epoch, self.sss_epoch = reply["masterEpoch"], reply["syncStateSetEpoch"]
            self.master, self.other = self.other, self.master


async def _load(leader: Node, names: list[str]) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=len(names) + 4)
    async with aiohttp.ClientSession(connector=connector) as http:
        clients = [_SetClient(http, leader.url, name) for name in names]
        # Pick up each set's current epochs (earlier runs moved them).
        for client in clients:
            async with http.get(f"{leader.url}/v1/groups/{client.name}/replica-info") as response:
                info = await response.json()
            client.master = info["masterBrokerId"]
            client.other = 2 if client.master == 1 else 1
            client.master_epoch, client.sss_epoch = info["masterEpoch"], info["syncStateSetEpoch"]
        started = time.monotonic()
        await asyncio.gather(*(c.run(started + SECONDS_PER_RUN) for c in clients))
        elapsed = time.monotonic() - started
    alter = [x for c in clients for x in c.latency["alter"]]
    elect = [x for c in clients for x in c.latency["elect"]]
    errors: dict[str, int] = {}
    for c in clients:
        for key, count in c.errors.items():
            errors[key] = errors.get(key, 0) + count
    return {
        "writes": len(alter) + len(elect),
        "writes_per_s": (len(alter) + len(elect)) / elapsed,
        "alter_p50_ms": _pct(alter, 0.5),
        "alter_p99_ms": _pct(alter, 0.99),
        "elect_p50_ms": _pct(elect, 0.5),
        "elect_p99_ms": _pct(elect, 0.99),
        "errors": errors,
    }


def _first_write_after_kill(
    cluster: ControllerCluster, leader: Node, broker_id: int, timeout: float = 10.0
) -> float:
    """kill -9 the leader; seconds until an apply-id commits on a survivor."""
    survivors = [n for n in cluster.nodes if n is not leader]
    body = {
        "clusterName": "c1",
        "brokerName": "probe",
        "appliedBrokerId": broker_id,
        "registerCheckCode": f"127.0.0.1:{30000 + broker_id};1",
    }
    assert leader.proc is not None
    leader.proc.kill()
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < timeout:
        for node in survivors:
            try:
                status, _ = node.post("/v1/brokers/apply-id", body, timeout=1.0)
            except OSError:
                continue
            if status == 200:
                return time.monotonic() - killed_at
        time.sleep(0.005)
    raise AssertionError(f"no committed write within {timeout} s of the leader kill")


def test_controller_http_throughput_latency_failover(tmp_path: Path) -> None:
    results: dict[str, Any] = {"cpus": os.cpu_count(), "journal_fsync": True, "runs": {}}
    rows: list[str] = []
    with ProcessGroup() as group:
        cluster = ControllerCluster(group, tmp_path, args=("--log-level", "WARNING"))
        cluster.start()
        leader = cluster.leader(timeout=5)
        names = [f"bench{i}" for i in range(max(CONCURRENCY))]
        for name in names:
            assert register_broker(leader, name) == 1 and register_broker(leader, name) == 2
            for broker_id in (1, 2):
                status, body = leader.post(
                    "/v1/brokers/heartbeat", heartbeat(name, broker_id, timeout_ms=3_600_000)
                )
                assert status == 200, body
            status, body = leader.post(f"/v1/groups/{name}/elect", {"clusterName": "c1", "brokerId": 1})
            assert status == 200, body
        asyncio.run(_load(leader, names[:4]))  # warm-up

        for concurrency in CONCURRENCY:
            runs = [asyncio.run(_load(leader, names[:concurrency])) for _ in range(REPEATS)]
            assert all(not r["errors"] for r in runs), [r["errors"] for r in runs]
            summary = {
                key: statistics.median(r[key] for r in runs)
                for key in ("writes_per_s", "alter_p50_ms", "alter_p99_ms", "elect_p50_ms", "elect_p99_ms")
            }
            summary["writes"] = sum(r["writes"] for r in runs)
            results["runs"][str(concurrency)] = {"median": summary, "runs": runs}
            rows.append(
                f"clients={concurrency:<3} writes/s {summary['writes_per_s']:7.0f}   "
                f"alter p50 {summary['alter_p50_ms']:6.2f} ms p99 {summary['alter_p99_ms']:6.2f} ms   "
                f"elect p50 {summary['elect_p50_ms']:6.2f} ms p99 {summary['elect_p99_ms']:6.2f} ms"
            )

        assert register_broker(leader, "probe") == 1
        failovers = []
        for repeat in range(FAILOVER_REPEATS):
            leader = cluster.leader(timeout=5)
            failovers.append(_first_write_after_kill(cluster, leader, broker_id=2 + repeat))
            cluster.start([leader.index])  # rejoin from its journal, catch up before the next kill
            cluster.wait_same_state(cluster.nodes, timeout=10)
            assert len(groups_of(cluster.nodes[0].state()["state"])["probe"]["replicas"]) == 2 + repeat
        failovers.sort()
        results["failover_s"] = {
            "min": failovers[0],
            "median": statistics.median(failovers),
            "max": failovers[-1],
            "all": failovers,
        }
        rows.append(
            f"leader kill -9 -> next committed write ({FAILOVER_REPEATS} repeats): "
            f"min {failovers[0]:.3f} s  median {statistics.median(failovers):.3f} s  "
            f"max {failovers[-1]:.3f} s"
        )

    one = results["runs"]["1"]["median"]
    many = results["runs"]["32"]["median"]
    results["targets"] = {
        "p50_ms_at_1_client": {
            "target": TARGETS["p50_ms_at_1_client"],
            "alter": one["alter_p50_ms"],
            "elect": one["elect_p50_ms"],
        },
        "writes_per_s_at_32_clients": {
            "target": TARGETS["writes_per_s_at_32_clients"],
            "measured": many["writes_per_s"],
        },
        "failover_median_s": {
            "target": TARGETS["failover_median_s"],
            "measured": results["failover_s"]["median"],
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print("\ncontroller through HTTP, 3 mqcontroller processes on one host, journal fsync on")
    for row in rows:
        print("  " + row)
    print(
        f"  targets: p50 <= {TARGETS['p50_ms_at_1_client']} ms at 1 client, "
        f">= {TARGETS['writes_per_s_at_32_clients']:.0f} writes/s at 32, failover median <= "
        f"{TARGETS['failover_median_s']} s"
    )
    print(f"  wrote {RESULTS}")
