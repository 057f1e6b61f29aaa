"""Acceptance run of issue 29 with the official Python client (behind the bench marker: about a minute).

The official Producer sends 2,000 messages (a sequence number in each body) through mqproxy while the
group's master is SIGKILLed at about 2 s and restarted at about 6 s: no send may raise, and the largest
gap between acknowledged sends is printed and held to 1 s. Then a SimpleConsumer and a PushConsumer
(separate groups) each receive every acknowledged sequence number at least once; duplicates are
counted and printed. Last, the history export and ``mqha analyze`` (the pure-Python checker) prove
that no acknowledged message was lost (the masters record every PUT_OK they answered the proxy).
Run: ``scripts/bench.sh tests/bench/test_proxy_acceptance.py``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqha.cluster.checking import ToolChild, adopt_final_log_dump, dump_final_logs, export_and_analyze
from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import GROUP, consume, lines, start_producer, start_proxy, wait_done
from tests.helpers.rocketmq_client import client_python

pytestmark = pytest.mark.bench

COUNT = 2000
INTERVAL_S = 0.002
KILL_AT_S, RESTART_AT_S = 2.0, 6.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("acceptance"), controllers=3, groups=1, replicas=3) as local:
        local.wait_ready(90)
        yield local


def test_two_thousand_sends_through_a_master_kill_and_restart(cluster: LocalCluster, tmp_path: Path) -> None:
    client = client_python()
    with ProcessGroup() as group:
        _, access_point = start_proxy(group, cluster, tmp_path)
        master = cluster.master(GROUP, timeout=30)
        assert master is not None
        producer = start_producer(
            group, client, access_point, "Acceptance", count=COUNT, run_dir=tmp_path, interval=INTERVAL_S
        )
        deadline = time.monotonic() + 60
        while not any(line.get("ok") for line in lines(producer)):
            assert producer.is_running() and time.monotonic() < deadline, producer.log_tail()
            time.sleep(0.02)
        began = time.monotonic()
        time.sleep(KILL_AT_S)
        killed_at = time.time()
        cluster.kill(master)
        time.sleep(max(0.0, began + RESTART_AT_S - time.monotonic()))
        restarter = threading.Thread(target=cluster.start_node, args=(master,), kwargs={"timeout": 60})
        restarter.start()
        summary = wait_done(producer, timeout=600)
        restarter.join(timeout=90)
        sends = [line for line in lines(producer) if "seq" in line]
        failures = [line for line in sends if not line["ok"]]
        acks = sorted(line["t"] for line in sends if line["ok"])
        gaps = [b - a for a, b in itertools.pairwise(acks)]
        after = [t - killed_at for t in acks if t > killed_at]
        print(
            f"\nacceptance: {len(acks)}/{COUNT} sends acknowledged, {len(failures)} raised; largest gap "
            f"between acks {max(gaps):.3f} s; first ack after the kill {after[0]:.3f} s"
        )
        assert summary["failed"] == 0 and not failures, failures[:5]
        assert max(gaps) <= 1.0
        acked = {line["seq"] for line in sends if line["ok"]}
        cluster.wait_ready(90, groups=[GROUP])
        for mode in ("simple", "push"):
            got = consume(
                client,
                mode,
                access_point,
                "Acceptance",
                group=f"Acceptance-{mode}",
                expected=COUNT,
                run_dir=tmp_path,
            )
            seqs = Counter(int(line["body"].removeprefix("seq-")) for line in got)
            missing = acked - set(seqs)
            print(f"acceptance: {mode} consumer got {len(got)} messages, {len(got) - len(seqs)} duplicates")
            assert not missing, sorted(missing)[:20]
    staging = cluster.run_dir / "clients" / "final-log-dump" / "api-dump.db"  # where export looks
    dump_final_logs(cluster, staging, [GROUP])
    cluster.stop()  # nodes flush their histories on the way out
    adopt_final_log_dump(cluster, staging)
    child = ToolChild()
    try:
        result = export_and_analyze(cluster.run_dir, "python", child)
    finally:
        child.stop()
    print("acceptance: " + result.export_line + "; " + " / ".join(result.lines))
    assert result.analyze_code == 0, result.lines
