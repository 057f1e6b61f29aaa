"""The live proof and a crashed master (issue 45, finding 8): ``mqha export --controller`` + ``mqha analyze``.

A master answers a run of PUT_OKs and is SIGKILLed right after the last one; a new master takes more;
the old one comes back. The verdict must count every acknowledged put, or be inconclusive naming the
master, its epoch and the gap -- never OK over acks it did not see.

1. The history as the master left it: every PUT_OK it answered is in its history (the ack journal is
   written before the answer leaves, docs/architecture.md §5), so the verdict is OK and counts them all.
2. The same crash, but the old master's ``history.db`` and ack journal are lost while it is down (a
   wiped disk, a history that never was written): the controllers' watermark shows what it confirmed in
   its epoch, so the verdict is INCONCLUSIVE and names the master, the epoch and the gap.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis.report import VERDICT_FILE
from mqha.cli import main as mqha_main
from mqha.cluster.client_auth import client_headers
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import Node
from tests.helpers.processes import wait_until
from tests.integration.test_analysis_live import _put

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path(sys.executable).with_name("mqbroker").exists(), reason="mqbroker is not installed"
    ),
]

FIRST = 120  # PUT_OKs the first master answers before it is killed
SECOND = 40  # PUT_OKs the new master answers


def _puts(
    node: Node, headers: dict[str, str], prefix: str, count: int, deadline: float
) -> list[dict[str, Any]]:
    """``count`` PUT_OKs from ``node``, one after the other (a refused put is tried again)."""
    acked: list[dict[str, Any]] = []
    while len(acked) < count:
        assert time.monotonic() < deadline, f"{len(acked)} of {count} puts acknowledged by {node.name}"
        reply = _put(node, headers, f"{prefix}-{len(acked)}")
        if reply is not None:
            acked.append(reply)
    return acked


def _crash_and_failover(tmp_path: Path, *, lose_history: bool) -> tuple[list[dict[str, Any]], int, int, Path]:
    """Run the scenario; returns (every PUT_OK reply, the old master's id, its epoch, the export dir)."""
    with LocalCluster(
        tmp_path / "run", controllers=1, replicas=3, secure=True, log_level="WARNING"
    ) as cluster:
        cluster.wait_ready(60)
        old = cluster.master(timeout=30)
        assert old is not None
        status = cluster.broker_status(old)
        assert status is not None
        old_id = int(status["controllerBrokerId"])
        headers = client_headers(cluster.broker_settings)
        deadline = time.monotonic() + 60
        # Without a history, long enough (> 2 heartbeats) for the controllers to hear its confirm offset.
        started = time.monotonic()
        first = _puts(old, headers, "first", FIRST, deadline)
        while lose_history and time.monotonic() < started + 2.5:
            first += _puts(old, headers, "first", 10, deadline)
        cluster.kill(old)  # SIGKILL right after the last PUT_OK
        if lose_history:
            for path in Path(old.store).glob("history.db*"):
                path.unlink()
        wait_until(
            lambda: (m := cluster.master(timeout=0)) is not None and m.name != old.name,
            30,
            message="a new master",
        )
        new = cluster.master(timeout=5)
        assert new is not None
        second = _puts(new, headers, "second", SECOND, time.monotonic() + 30)
        cluster.start_node(old)
        wait_until(lambda: cluster.group_ready(cluster.groups[0], 3), 60, message="old master rejoined")
        out = tmp_path / "export"
        controllers = ";".join(cluster.controller_addresses)
        token = cluster.controller_settings["adminAuthToken"]
        assert mqha_main(["export", "--controller", controllers, "--token", token, str(out)]) == 0
    epochs = {reply["epoch"] for reply in first}
    assert len(epochs) == 1, epochs
    return first + second, old_id, epochs.pop(), out


def _analyze(out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code = mqha_main(["analyze", str(out), *extra])
    return code, json.loads((out / "report" / VERDICT_FILE).read_text())


def _acked_ids_recorded(out: Path) -> set[str]:
    rows = [json.loads(line) for line in (out / "acks.jsonl").read_text().splitlines() if line.strip()]
    return {r["msgId"] for r in rows if r["status"] == "PUT_OK" and r["client"].startswith("broker@")}


def test_a_master_killed_right_after_its_last_ack_has_every_ack_counted(tmp_path: Path) -> None:
    acked, old_id, epoch, out = _crash_and_failover(tmp_path, lose_history=False)
    code, verdict = _analyze(out, "--engine", "python")
    status, reasons = verdict["status"], verdict["reasons"]
    if status == "inconclusive":  # the other acceptable outcome: it says what it could not check
        assert any(f"master {old_id}" in r and f"masterEpoch {epoch}" in r for r in reasons), reasons
    else:
        assert (status, code) == ("ok", 0), reasons
        missing = {a["msgId"] for a in acked} - _acked_ids_recorded(out)
        assert not missing, f"{len(missing)} of {len(acked)} acknowledged puts not in any history"
        assert verdict["coverage"]["acksChecked"] >= len(acked)
    # With the ack journal, nothing is missing: every acknowledged put is counted.
    assert status == "ok", reasons


def test_a_crashed_master_whose_history_is_lost_is_inconclusive_naming_master_epoch_gap(
    tmp_path: Path,
) -> None:
    acked, old_id, epoch, out = _crash_and_failover(tmp_path, lose_history=True)
    code, verdict = _analyze(out, "--engine", "python")
    assert (verdict["status"], code) == ("inconclusive", 3), verdict["reasons"]
    gap = [r for r in verdict["reasons"] if f"master {old_id}" in r and f"masterEpoch {epoch}" in r]
    assert gap, verdict["reasons"]
    found = re.search(r"offsets (\d+)\.\.(\d+)", gap[0])
    assert found is not None, gap[0]
    first_end = max(a["offset"] + a["size"] for a in acked if a["epoch"] == epoch)
    low, high = int(found[1]), int(found[2])
    assert low == 0 < high <= first_end, (gap[0], first_end)
    set_doc = next(iter(verdict["coverage"]["sets"].values()))
    assert set_doc["ackGaps"] == [
        {"masterId": old_id, "masterEpoch": epoch, "fromOffset": low, "toOffset": high}
    ]
