"""Benchmark: the client's recovery time after a master ``kill -9``, 20 repeats (``-m bench``).

Recovery time = first failed send attempt -> first send acknowledged by the new master, measured by
a running producer (2 concurrent senders) with the default session-based crash detection. After each
kill the old master is restarted and the group waits for a full SyncStateSet before the next kill.
Target (issue 5): median <= 1 s, max <= 2 s. ``mqha demo --kills 20`` prints the same figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.cluster.failover import distribution, kill_master, ms, rejoin
from mqha.cluster.local import LocalCluster
from mqha.cluster.workload import ProduceWorkload

pytestmark = [pytest.mark.integration, pytest.mark.bench]

REPEATS = 20


def test_recovery_time_after_master_kill(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "run", controllers=3, groups=1, replicas=3) as cluster:
        with ProduceWorkload(
            cluster.controller_addresses, "broker-a", concurrency=2, topic="bench"
        ) as workload:
            reports = []
            for i in range(REPEATS):
                report = rejoin(cluster, kill_master(cluster, workload))
                reports.append(report)
                print(
                    f"kill {i + 1:2d}: {report.old_master} -> {report.new_master} epoch {report.new_epoch}: "
                    f"recovery {ms(report.recovery)}, kill->ack {ms(report.sample.kill_to_ack)}, "
                    f"election seen {ms(report.election)}"
                )
        counts = dict(workload.counts)
    dist = distribution(reports)
    print(f"\nclient recovery time after kill -9 of the master: {dist.summary()}")
    print("\n".join(dist.histogram()))
    print(f"send outcomes: { {s.value: n for s, n in counts.items()} }")
    assert dist.median <= 1.0
    assert dist.maximum <= 2.0
    assert {s.value for s in counts} == {"PUT_OK"}
