"""Issue 45 item 7 with real processes: a forward step of a master's wall clock deletes no fresh segment.

1 ``mqcontroller`` + 1 ``mqbroker`` (master) on 127.0.0.1; the broker runs with the chaos wall-clock shim
(``mqha/chaos/shim/``), 256 KiB segments, ``fileReservedTime`` 1 hour, every hour in ``deleteWhen`` and
a retention pass every 200 ms. Four segments of acknowledged messages are written, then the broker's
wall clock jumps 3 hours ahead (the issue's +83 h past ``deleteWhen``, scaled to the 1-hour minimum);
then the broker restarts with the clock still ahead, and more messages follow at the stepped clock.
Retention must delete nothing: the log still starts at 0 and every acknowledged message is served (before
the fix, the pass after the step deleted the three sealed segments and a consumer skipped them as
OFFSET_TOO_SMALL; docs/architecture.md §4.2, "Clock steps").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mqha.chaos.wall_clock import WALL_CLOCK_REREAD_S, set_offset, wall_clock_env
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster

pytestmark = pytest.mark.integration

SEGMENT = 256 * 1024
BODY = 8 * 1024
STEP_MS = 3 * 3_600_000
SETTINGS = {
    **BROKER_TEST_SETTINGS,
    "mappedFileSizeCommitLog": str(SEGMENT),
    "maxMessageSize": str(64 * 1024),
    "fileReservedTime": "1",
    "deleteWhen": ";".join(f"{hour:02d}" for hour in range(24)),
    "cleanResourceInterval": "200",
}
PASSES_S = 3.0  # ~15 retention passes


def put_batches(broker: Broker, start: int, count: int) -> list[tuple[int, str, str]]:
    acked = []
    for seq in range(start, start + count, 8):
        bodies = [f"{i:06d}-" + "x" * (BODY - 7) for i in range(seq, seq + 8)]
        code, reply = broker.put(bodies)
        assert code == 200 and reply["status"] == "PUT_OK", reply
        acked += [(r["offset"], r["msgId"], b) for r, b in zip(reply["results"], bodies, strict=True)]
    return acked


def lag_seconds(broker: Broker) -> float:
    (line,) = [
        x for x in broker.metrics_text().splitlines() if x.startswith("mqha_broker_retention_clock_lag")
    ]
    return float(line.split()[-1])


def test_a_forward_clock_step_on_the_master_deletes_no_fresh_segment(tmp_path: Path) -> None:
    offset_file = str(tmp_path / "wall-clock-offset")
    set_offset(offset_file, 0)
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, tmp_path / "controllers", size=1)
        controllers.start()
        controllers.leader(timeout=15)
        broker = Broker("m", tmp_path / "m", SETTINGS, env=wall_clock_env(offset_file))
        broker.start(group, controllers.nodes[0].address)
        wait_until(lambda: broker.serving_role() == "MASTER", 20, message="the broker is master")

        acked = put_batches(broker, 0, 4 * SEGMENT // BODY)
        assert acked[-1][0] > 3 * SEGMENT  # four segments: three sealed, one active
        time.sleep(PASSES_S)
        assert broker.status()["minOffset"] == 0  # nothing expired yet at the real time

        set_offset(offset_file, STEP_MS)
        time.sleep(WALL_CLOCK_REREAD_S + PASSES_S)
        assert broker.status()["minOffset"] == 0
        assert STEP_MS / 1000 <= lag_seconds(broker) < STEP_MS / 1000 + 60  # the step it did not take

        # A restart with the clock still ahead: the log's newest record bounds what the clock may claim.
        broker.proc.stop()  # type: ignore[union-attr]
        broker.start(group, controllers.nodes[0].address)
        wait_until(lambda: broker.serving_role() == "MASTER", 20, message="the broker is master again")
        time.sleep(PASSES_S)
        assert broker.status()["minOffset"] == 0

        after = put_batches(broker, len(acked), 16)
        stamped = broker.get(f"/v1/messages?offset={after[-1][0]}&maxMessages=1")["messages"][0]
        assert stamped["storeTimestamp"] > time.time() * 1000 + STEP_MS - 60_000  # the shim stepped it
        time.sleep(PASSES_S)
        assert broker.status()["minOffset"] == 0
        assert broker.read_all() == acked + after
