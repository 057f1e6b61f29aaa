"""Replicated-log figures: commits/s and latency on the leader, durable vs mmap-only, and failover time.

Run: ``.venv/bin/python -m pytest -m bench -s tests/bench/test_replicated_log_bench.py``
(or ``scripts/bench.sh tests/bench/test_replicated_log_bench.py``). Prints; asserts nothing about speed.

Load is generated inside the leader process (``raft_node.py`` ``POST /load``), as a controller request
handler would propose: latency is ``await log.propose()`` from call to result. 3 members share this host.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from tests.helpers.processes import ProcessGroup
from tests.integration.raft_cluster import Member, RaftCluster

pytestmark = pytest.mark.bench

SECONDS_PER_RUN = 3.0
REPEATS = 3
FAILOVER_REPEATS = 5


def _load(leader: Member, concurrency: int) -> dict[str, float]:
    body = {"count": 1_000_000, "concurrency": concurrency, "max_seconds": SECONDS_PER_RUN, "timeout": 5.0}
    status, result = leader.post("/load", body, timeout=SECONDS_PER_RUN + 30)
    assert status == 200 and not result["errors"], result
    return result


def _first_commit_after_kill(cluster: RaftCluster, leader: Member, timeout: float = 5.0) -> float:
    """kill -9 the leader; seconds until a write proposed on a survivor commits."""
    survivors = [m for m in cluster.members if m is not leader]
    cluster.kill(leader)
    killed_at = time.monotonic()
    deadline = killed_at + timeout
    while time.monotonic() < deadline:
        for m in survivors:
            try:
                status, _ = m.propose({"op": "set", "key": "probe", "value": str(killed_at)}, timeout=0.5)
            except OSError:
                continue
            if status == 200:
                return time.monotonic() - killed_at
        time.sleep(0.005)
    raise AssertionError(f"no commit within {timeout} s of the leader kill")


def test_replicated_log_throughput_latency_failover(tmp_path: Path) -> None:
    rows: list[str] = []
    for durable in (False, True):
        mode = "durable (msync+fsync)" if durable else "mmap only (no fsync)"
        with ProcessGroup() as group:
            args = ["--durable" if durable else "--no-durable", "--log-level", "WARNING"]
            cluster = RaftCluster(group, tmp_path / ("durable" if durable else "mmap"), extra_args=args)
            cluster.start()
            leader = cluster.serving_leader(timeout=5)
            leader.post("/load", {"count": 500, "concurrency": 4}, timeout=30)  # warm-up
            for concurrency in (1, 32):
                runs = [_load(leader, concurrency) for _ in range(REPEATS)]
                rates = sorted(r["rate"] for r in runs)
                rows.append(
                    f"{mode:24} c={concurrency:<3} commits/s min/med/max "
                    f"{rates[0]:7.0f} /{statistics.median(rates):7.0f} /{rates[-1]:7.0f}   "
                    f"p50 {statistics.median(r['p50_ms'] for r in runs):6.2f} ms   "
                    f"p99 {statistics.median(r['p99_ms'] for r in runs):6.2f} ms   "
                    f"max {max(r['max_ms'] for r in runs):6.1f} ms"
                )
            failovers = []
            for _ in range(FAILOVER_REPEATS):
                leader = cluster.serving_leader(timeout=5)
                failovers.append(_first_commit_after_kill(cluster, leader))
                cluster.start([leader.index])  # rejoin, then let it catch up before the next kill
                cluster.wait_applied_everywhere(cluster.members, timeout=10)
            failovers.sort()
            rows.append(
                f"{mode:24} leader kill -9 -> next commit (n={len(failovers)}): min/med/max "
                f"{failovers[0] * 1000:.0f} / {statistics.median(failovers) * 1000:.0f} / "
                f"{failovers[-1] * 1000:.0f} ms"
            )
    print("\n" + "\n".join(rows))
