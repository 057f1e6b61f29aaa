"""The retention figure of ``mqha bench put``: puts while retention deletes segments vs while it does not,
side by side in one run (issue 26: at most 5 %).

Two local clusters (one controller, one group of 3 mqbroker replicas, async acks), each broker's store
on its own tmpfs (root only; skipped with the reason otherwise), 1 MiB segments, a retention pass every
200 ms. "on": every store's file system is first filled to just under ``diskSpaceCleanForciblyRatio``
with a filler file, so the puts keep it above the ratio and every pass deletes the oldest segments
(forcibly, as RocketMQ does on a nearly full disk) while the load runs. "off": a file system large
enough that no pass ever deletes. The same 1 KiB single-message load, interleaved rounds
(``mqha.bench.put_kit.interleaved_puts``); the ratio is on/off.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from mqha.bench.put_kit import interleaved_puts, message_payload, put_target, start_group
from mqha.bench.report import fmt, format_table, ratio, side_rows
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import http_json
from mqha.cluster.tmpfs import DiskFiller, cannot_mount

SIDES: dict[str, int] = {"retention off": 1024, "retention on": 64}
"""Store file system size (MiB) per side."""
SETTINGS = {
    "allAckInSyncStateSet": "false",
    "inSyncReplicas": "1",
    "mappedFileSizeCommitLog": str(1024 * 1024),
    "maxMessageSize": str(64 * 1024),
    "cleanResourceInterval": "200",
    "fileReservedTime": "1",
}
FILL_TO = 0.83  # just under diskSpaceCleanForciblyRatio (85 %): the first seconds of load push it over
MAX_COST = 0.05


def measure(base: Path, cfg: dict[str, Any], body: int) -> dict[str, Any]:
    """The two sides' figures, or ``{"skipped": reason}``."""
    reason = cannot_mount()
    if reason is not None:
        return {"skipped": reason}
    payload = message_payload(body)
    clusters: list[LocalCluster] = []
    try:
        with contextlib.ExitStack() as stack:
            targets: dict[str, tuple[str, dict[str, str]]] = {}
            for index, (side, mib) in enumerate(SIDES.items()):
                cluster = start_group(stack, base / f"retention{index}", side, SETTINGS, store_tmpfs_mib=mib)
                clusters.append(cluster)
                if side == "retention on":
                    for node in cluster.layout.brokers:
                        _fill_to(node.store, FILL_TO)
                targets[side] = put_target(cluster)
            figures = interleaved_puts(targets, payload, cfg)
            figures["deleted_segments"] = {
                side: _segments_deleted(c) for side, c in zip(SIDES, clusters, strict=True)
            }
            return figures
    finally:
        for cluster in clusters:
            with contextlib.suppress(Exception):
                cluster.unmount_stores()


def _fill_to(mount_point: str, fraction: float) -> None:
    stat = os.statvfs(mount_point)
    total = stat.f_blocks * stat.f_frsize
    DiskFiller(mount_point).fill(leave_bytes=int(total * (1 - fraction)))


def _segments_deleted(cluster: LocalCluster) -> int:
    """Segments retention deleted on the brokers: how far their log starts moved (1 MiB segments)."""
    count = 0
    for node in cluster.layout.brokers:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            status, body = http_json("GET", node.url + "/v1/status", timeout=3.0)
            if status == 200:
                count += int(body["minOffset"]) // (1024 * 1024)
    return count


def report(data: dict[str, Any], cfg: dict[str, Any], body: int) -> tuple[str, float | None]:
    """The table and the on/off throughput ratio (None when skipped)."""
    if "skipped" in data:
        return f"retention: skipped ({data['skipped']})", None
    off, on = data["retention off"], data["retention on"]
    rows = side_rows(data, ("retention off", "retention on"), data["deleted_segments"])
    title = (
        f"put while retention deletes vs not, 3-replica group, async, {cfg['clients']} clients x single "
        f"{body} B messages, median of {cfg['rounds']} interleaved {cfg['window']:g} s rounds; "
        f"on/off {fmt(ratio(on['ops_per_s'], off['ops_per_s']), '.3f')}"
    )
    header = ("side", "msgs/s", "p50 ms", "p99 ms", "errors", "segments deleted")
    return format_table(title, header, rows), ratio(on["ops_per_s"], off["ops_per_s"])
