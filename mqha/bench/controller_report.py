"""The tables and targets of ``mqha bench controller`` (``mqha.bench.controller`` measures; this
module only presents its JSON figures): per workload and client count, ours next to etcd.
"""

from __future__ import annotations

import statistics
from typing import Any

from mqha.bench.report import Outcome, Target, fmt, format_table, ratio, summarize

WRITE_P50_MS = 5.0  # targets of the controller issue: p50 at 1 client, writes/s at 32, kill -> commit
WRITES_PER_S = 2000.0
KILL_MEDIAN_S = 1.0


def controller_report(data: dict[str, Any]) -> Outcome:
    rows = []
    for clients in data["settings"]["clients"]:
        ours, theirs = data["ours"][str(clients)], data["etcd"].get(str(clients), {})
        rows.append(
            (
                clients,
                fmt(ours["ops_per_s"], ".0f"),
                fmt(theirs.get("ops_per_s"), ".0f"),
                fmt(ratio(ours["ops_per_s"], theirs.get("ops_per_s")), ".2f"),
                fmt(ours["p50_ms"], ".2f"),
                fmt(theirs.get("p50_ms"), ".2f"),
                fmt(ratio(ours["p50_ms"], theirs.get("p50_ms")), ".2f"),
                fmt(ours["p99_ms"], ".2f"),
                fmt(theirs.get("p99_ms"), ".2f"),
                fmt(ratio(ours["p99_ms"], theirs.get("p99_ms")), ".2f"),
                f"{sum(ours['errors'].values())} / {sum(theirs.get('errors', {}).values())}",
            )
        )
    cfg = data["settings"]
    title = (
        f"controller writes: ours (alter SyncStateSet) vs etcd (CAS txn, {data['request_bytes']} B), "
        f"median of {cfg['rounds']} interleaved {cfg['window']:g} s rounds"
    )
    if data["etcd_skipped"]:
        title += f"\netcd side skipped: {data['etcd_skipped']}"
    header = (
        "clients",
        "ours ops/s",
        "etcd ops/s",
        "ratio",
        "ours p50 ms",
        "etcd p50 ms",
        "ratio",
        "ours p99 ms",
        "etcd p99 ms",
        "ratio",
        "errors ours / etcd",
    )
    tables = [format_table(title, header, rows), _workload_table(data)]
    kill_rows = []
    for side in ("ours", "etcd"):
        times = data[side].get("leader_kill_s")
        if times:
            s = summarize(times)
            kill_rows.append(
                (
                    side,
                    len(times),
                    fmt(min(times), ".3f"),
                    fmt(statistics.median(times), ".3f"),
                    fmt(max(times), ".3f"),
                    fmt(s["p99_ms"] / 1000, ".3f"),
                )
            )
    tables.append(
        format_table(
            "leader SIGKILL -> next committed write (s)",
            ("side", "n", "min", "median", "max", "p99"),
            kill_rows,
        )
    )
    top, one = str(max(cfg["clients"])), str(min(cfg["clients"]))
    kills = data["ours"].get("leader_kill_s")
    targets = [
        *(
            Target(f"{label} p50 at {one} client", data[side][one]["p50_ms"], WRITE_P50_MS, False, " ms")
            for side, label in _WORKLOADS
        ),
        *(
            Target(f"{label} writes/s at {top} clients", data[side][top]["ops_per_s"], WRITES_PER_S, True)
            for side, label in _WORKLOADS
        ),
        Target(
            "leader SIGKILL -> next commit, median",
            statistics.median(kills) if kills else None,
            KILL_MEDIAN_S,
            False,
            " s",
        ),
        Target(
            f"write ops/s ours/etcd at {top} clients",
            ratio(data["ours"][top]["ops_per_s"], data["etcd"].get(top, {}).get("ops_per_s")),
            1.0,
            at_least=True,
        ),
        Target(
            f"p50 latency ours/etcd at {one} client",
            ratio(data["ours"][one]["p50_ms"], data["etcd"].get(one, {}).get("p50_ms")),
            2.0,
            at_least=False,
        ),
    ]
    return Outcome("controller", tables, targets, data)


_WORKLOADS = (("ours", "alter"), ("ours_elect", "elect"))  # (key in the JSON, label)
_COLUMNS = ("ops/s", "p50 ms", "p99 ms", "errors")


def _workload_table(data: dict[str, Any]) -> str:
    """Our two write workloads side by side (every call one committed, fsynced Raft entry)."""
    rows = []
    for clients in data["settings"]["clients"]:
        row: list[Any] = [clients]
        for side, _ in _WORKLOADS:
            figures = data[side][str(clients)]
            row += [
                fmt(figures["ops_per_s"], ".0f"),
                fmt(figures["p50_ms"], ".2f"),
                fmt(figures["p99_ms"], ".2f"),
                sum(figures["errors"].values()),
            ]
        rows.append(tuple(row))
    header = ("clients", *(f"{label} {column}" for _, label in _WORKLOADS for column in _COLUMNS))
    return format_table("ours: committed writes through HTTP, per workload", header, rows)
