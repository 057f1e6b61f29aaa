"""``mqha bench put``: put throughput and latency per ack mode on a 3-replica group.

Three local clusters run side by side (one controller each, one group of 3 mqbroker replicas), the
same except for the ack rule: async (the master answers once the message is in its own log),
``inSyncReplicas=2`` (one slave must hold it too) and ``allAckInSyncStateSet=true`` (every member of
the SyncStateSet). The load generator sends single 1 KiB messages to the master's HTTP API, one at a
time per client, in interleaved rounds; the figures are the medians of the rounds and the ratio of
each sync mode's throughput to async's. Then puts while retention deletes segments vs while it does
not (``mqha.bench.retention_put``, root only), and puts while the master records its acks in its
history vs not (``mqha.bench.history_put``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from mqha.bench import history_put, retention_put
from mqha.bench.put_kit import interleaved_puts, message_payload, put_target, start_group
from mqha.bench.report import Outcome, Target, fmt, format_table, ratio

MODES: dict[str, dict[str, str]] = {
    "async": {"allAckInSyncStateSet": "false", "inSyncReplicas": "1"},
    "inSyncReplicas=2": {"allAckInSyncStateSet": "false", "inSyncReplicas": "2"},
    "allAckInSyncStateSet": {"allAckInSyncStateSet": "true"},
}
BODY = 1024


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"clients": 8, "window": 1.0, "rounds": 1}
    return {"clients": 8, "window": 5.0, "rounds": 3}


def _measure(base: Path, quick: bool) -> dict[str, Any]:
    cfg = settings(quick)
    payload = message_payload(BODY)
    data: dict[str, Any] = {"settings": {**cfg, "body_bytes": BODY, "modes": MODES}, "modes": {}}
    with contextlib.ExitStack() as stack:
        targets: dict[str, tuple[str, dict[str, str]]] = {}
        for index, (mode, extra) in enumerate(MODES.items()):
            cluster = start_group(stack, base / f"mode{index}", mode, extra)
            # A full SyncStateSet first: with inSyncReplicas=2 a master alone refuses puts
            # (IN_SYNC_REPLICAS_NOT_ENOUGH, docs/architecture.md §4), which would count as errors.
            cluster.wait_ready(timeout=60)
            targets[mode] = put_target(cluster)
        data["modes"] = interleaved_puts(targets, payload, cfg)
    data["retention"] = retention_put.measure(base / "retention", cfg, BODY)
    data["history"] = history_put.measure(base / "history", cfg, BODY)
    return data


def _report(data: dict[str, Any]) -> Outcome:
    cfg, modes = data["settings"], data["modes"]
    base = modes["async"]["ops_per_s"]
    rows = [
        (
            mode,
            fmt(m["ops_per_s"], ".0f"),
            fmt(m["p50_ms"], ".2f"),
            fmt(m["p99_ms"], ".2f"),
            fmt(ratio(m["ops_per_s"], base), ".2f"),
            m["errors"],
        )
        for mode, m in modes.items()
    ]
    title = (
        f"put, 3-replica group, {cfg['clients']} clients x single {cfg['body_bytes']} B messages, "
        f"median of {cfg['rounds']} interleaved {cfg['window']:g} s rounds"
    )
    table = format_table(title, ("ack mode", "msgs/s", "p50 ms", "p99 ms", "/ async", "errors"), rows)
    targets = [
        Target(f"{mode} msgs/s / async", ratio(modes[mode]["ops_per_s"], base), 0.85, at_least=True)
        for mode in ("inSyncReplicas=2", "allAckInSyncStateSet")
    ]

    retention_table, on_off = retention_put.report(data["retention"], cfg, data["settings"]["body_bytes"])
    if on_off is not None:
        targets.append(Target("retention on/off msgs/s", on_off, 1 - retention_put.MAX_COST, at_least=True))

    history_table, history_on_off = history_put.report(data["history"], cfg, data["settings"]["body_bytes"])
    targets.append(
        Target("ack history on/off msgs/s", history_on_off, 1 - history_put.MAX_COST, at_least=True)
    )
    return Outcome("put", [table, retention_table, history_table], targets, data)


def run(base: Path, quick: bool) -> Outcome:
    """Three clusters up, interleaved windows of load, tables."""
    return _report(_measure(base, quick))
