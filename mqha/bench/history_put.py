"""The ack-history figure of ``mqha bench put``: puts while the master records every PUT_OK in its history
(``historyRecordPutAcks=true``, the default, docs/architecture.md §5) vs while it records none, side by
side in one run (issue 28: at most 5 % slower).

Two local clusters (one controller, one group of 3 mqbroker replicas, ``allAckInSyncStateSet=true``, the
mode the no-loss proof checks), the same but for ``historyRecordPutAcks``; the same 1 KiB single-message
load in interleaved rounds (``mqha.bench.put_kit.interleaved_puts``); the ratio is on/off. The row count of
each master's ``acks`` table afterwards shows the recording side recorded and the other did not.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from mqha.bench.put_kit import interleaved_puts, message_payload, put_target, start_group
from mqha.bench.report import fmt, format_table, ratio, side_rows
from mqha.cluster.local import LocalCluster

SIDES: dict[str, str] = {"ack history off": "false", "ack history on": "true"}
SETTINGS = {"allAckInSyncStateSet": "true"}
MAX_COST = 0.05


def _recorded_acks(cluster: LocalCluster) -> int:
    count = 0
    for node in cluster.layout.brokers:
        path = Path(node.store) / "history.db"
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(path)) as db:
            count += int(db.execute("SELECT count(*) FROM acks").fetchone()[0])
    return count


def measure(base: Path, cfg: dict[str, Any], body: int) -> dict[str, Any]:
    """Both sides' figures and the acks each side's brokers recorded."""
    payload = message_payload(body)
    with contextlib.ExitStack() as stack:
        targets: dict[str, tuple[str, dict[str, str]]] = {}
        clusters: dict[str, LocalCluster] = {}
        for index, (side, on) in enumerate(SIDES.items()):
            settings = {**SETTINGS, "historyRecordPutAcks": on}
            clusters[side] = start_group(stack, base / f"history{index}", side, settings)
            targets[side] = put_target(clusters[side])
        figures: dict[str, Any] = interleaved_puts(targets, payload, cfg)
        figures["recorded_acks"] = {side: _recorded_acks(c) for side, c in clusters.items()}
    return figures


def report(data: dict[str, Any], cfg: dict[str, Any], body: int) -> tuple[str, float | None]:
    """The table and the on/off throughput ratio."""
    off, on = data["ack history off"], data["ack history on"]
    rows = side_rows(data, ("ack history off", "ack history on"), data["recorded_acks"])
    on_off = ratio(on["ops_per_s"], off["ops_per_s"])
    title = (
        f"put with the master recording every PUT_OK in its history vs not, 3-replica group, "
        f"allAckInSyncStateSet, {cfg['clients']} clients x single {body} B messages, median of "
        f"{cfg['rounds']} interleaved {cfg['window']:g} s rounds; on/off {fmt(on_off, '.3f')}"
    )
    header = ("side", "msgs/s", "p50 ms", "p99 ms", "errors", "acks recorded")
    return format_table(title, header, rows), on_off
