"""``mqha bench failover``: repeated master SIGKILLs and SIGSTOPs, each split into stages.

A local cluster (3 controllers, one group of 3 replicas, ``mqha.cluster.local`` defaults: 1.5 s heartbeat
timeout) runs a produce workload that records every ack into the history store. Each cycle faults
the master (SIGKILL, or SIGSTOP), waits until the client's first ack from the new master, then
restores the old master (restart, or SIGCONT) and waits until the group is whole again. After the
run the stages of every cycle are read back from what the processes recorded, all measured from
the fault (wall-clock ms):

detection   the first controller log line saying the master is gone (session closed, heartbeat
            timeout) or that it is electing a new master of the group;
election    the ElectMaster entry of the new epoch applied (``controller_events``, earliest node);
ready       the new master's MASTER role row of that epoch (``roles``: after its role change and any
            truncation);
rerouted    the client's first PUT_OK ack carrying the new epoch (``acks``).
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mqha.bench.report import Outcome, Target, fmt, format_table, summarize
from mqha.cluster.client_auth import broker_user
from mqha.cluster.local import LocalCluster
from mqha.cluster.recovery import RecoveryMeter
from mqha.cluster.workload import ProduceWorkload
from mqha.history.recorder import history_path

STAGES = ("detection", "election", "ready", "rerouted")
KILL, PAUSE = "kill", "pause"
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def settings(quick: bool) -> dict[str, Any]:
    """How many faults of each kind."""
    return {KILL: 1, PAUSE: 1} if quick else {KILL: 20, PAUSE: 10}


def detection_times(lines: Iterable[str], group: str) -> list[float]:
    """Wall-clock ms of the controller log lines that show the master of ``group`` was noticed
    gone (logging's local ``asctime``, millisecond resolution)."""
    noticed = re.compile(
        rf"electing a new master for {re.escape(group)} \(|master {re.escape(group)}/\d+ inactive"
        rf"|broker {re.escape(group)}/\d+ \(.*\) missed its heartbeat timeout"
    )
    times = []
    for line in lines:
        stamp = _LOG_TIME.match(line)
        if stamp and noticed.search(line):
            times.append(datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000)
    return times


@dataclass(frozen=True)
class History:
    """What the processes recorded: (ts ms, masterEpoch) pairs, and detection times in ms."""

    detections: Sequence[float]
    elections: Sequence[tuple[int, int]]
    roles: Sequence[tuple[int, int]]
    acks: Sequence[tuple[int, int]]


def _ts(item: float | tuple[int, int]) -> float:
    return item[0] if isinstance(item, tuple) else item


def cycle_stages(fault_ms: int, old_epoch: int, history: History) -> dict[str, float | None]:
    """Seconds from the fault to each stage of one cycle (``history`` holds nothing of a later
    cycle); the new epoch is the first elected above ``old_epoch`` after the fault. A stage not found
    is None."""
    after = [(ts, epoch) for ts, epoch in history.elections if ts >= fault_ms and epoch > old_epoch]
    if not after:
        return dict.fromkeys(STAGES)
    new_epoch = min(epoch for _, epoch in after)

    def first(pairs: Sequence[tuple[int, int]]) -> float | None:
        found = [ts for ts, epoch in pairs if epoch == new_epoch and ts >= fault_ms]
        return (min(found) - fault_ms) / 1000 if found else None

    noticed = [t for t in history.detections if t >= fault_ms - 1]  # logging truncates to the ms
    return {
        "detection": max(0.0, min(noticed) - fault_ms) / 1000 if noticed else None,
        "election": first(after),
        "ready": first(history.roles),
        "rerouted": first(history.acks),
        "new_epoch": new_epoch,
    }


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return list(conn.execute(sql))


def _history(cluster: LocalCluster, client_db: Path, group: str) -> dict[str, list[Any]]:
    """Everything the stages need, from every process's history and the controller logs."""
    elections, roles, lines = [], [], []
    for node in cluster.controllers:
        elections += _rows(
            Path(history_path(node.store)),
            "SELECT ts, masterEpoch FROM controller_events WHERE type = 'ElectMaster' AND accepted = 1"
            f" AND brokerName = '{group}'",
        )
        lines += node.log.read_text(errors="replace").splitlines() if node.log.exists() else []
    for node in cluster.group_brokers(group):
        roles += _rows(
            Path(history_path(node.store)), "SELECT ts, masterEpoch FROM roles WHERE role = 'MASTER'"
        )
    acks = _rows(client_db, "SELECT ts, epoch FROM acks WHERE status = 'PUT_OK' AND epoch IS NOT NULL")
    return {"elections": elections, "roles": roles, "acks": acks, "detections": detection_times(lines, group)}


def _fault_cycle(cluster: LocalCluster, workload: ProduceWorkload, group: str, kind: str) -> dict[str, Any]:
    old = cluster.master(group, timeout=30)
    if old is None:
        raise RuntimeError(f"{group} has no master\n{cluster.status_table()}")
    old_epoch = int((cluster.broker_status(old) or {}).get("masterEpoch") or 0)
    workload.wait_acked(workload.acked + workload.concurrency, timeout=30)
    fault_ms, fault_at = int(time.time() * 1000), time.monotonic()
    if kind == KILL:
        cluster.kill(old)
    else:
        cluster.pause(old)
    sample = RecoveryMeter(workload).wait(fault_at, old_epoch, timeout=30)
    if kind == KILL:
        cluster.start_node(old, timeout=30)
    else:
        cluster.resume(old)
    cluster.wait_ready(60, groups=[group])
    return {
        "kind": kind,
        "node": old.name,
        "old_epoch": old_epoch,
        "fault_ms": fault_ms,
        "client_kill_to_ack_s": sample.kill_to_ack,
    }


def _measure(base: Path, quick: bool) -> dict[str, Any]:
    cfg = settings(quick)
    # Interleaved, so drift of the shared machine hits both kinds alike.
    order = [k for i in range(max(cfg.values())) for k in (KILL, PAUSE) if i < cfg[k]]
    cluster = LocalCluster(base / "cluster", controllers=3, groups=1, replicas=3, log_level="INFO")
    group = cluster.groups[0]
    client_db = base / "client" / "history.db"
    client_db.parent.mkdir(parents=True)
    cycles = []
    with cluster:
        workload = ProduceWorkload(
            cluster.controller_addresses,
            group,
            concurrency=2,
            record_to=client_db,
            client_id="bench-failover",
            user=broker_user(cluster.broker_settings),
        ).start()
        try:
            for kind in order:
                cycles.append(_fault_cycle(cluster, workload, group, kind))
        finally:
            workload.stop()
    history = _history(cluster, client_db, group)
    ends = [c["fault_ms"] for c in cycles[1:]] + [2**62]
    for cycle, end in zip(cycles, ends, strict=True):
        window = History(**{k: [p for p in v if _ts(p) < end] for k, v in history.items()})
        cycle.update(cycle_stages(cycle["fault_ms"], cycle["old_epoch"], window))
    return {"settings": cfg, "group": group, "cycles": cycles}


def _report(data: dict[str, Any]) -> Outcome:
    tables, stats = [], {}
    for kind, label in ((KILL, "SIGKILL"), (PAUSE, "SIGSTOP")):
        cycles = [c for c in data["cycles"] if c["kind"] == kind]
        if not cycles:
            continue
        rows = []
        for stage in STAGES:
            values = [c[stage] for c in cycles if c.get(stage) is not None]
            s = summarize(values)
            stats[(kind, stage)] = s
            rows.append(
                (
                    stage,
                    f"{s['n']}/{len(cycles)}",
                    fmt(_s(s["p50_ms"]), ".3f"),
                    fmt(_s(s["p99_ms"]), ".3f"),
                    fmt(_s(s["max_ms"]), ".3f"),
                )
            )
        tables.append(
            format_table(
                f"failover after master {label}, seconds from the fault ({len(cycles)} cycles)",
                ("stage", "n", "p50", "p99", "max"),
                rows,
            )
        )
    crash = stats.get((KILL, "rerouted"), {})
    targets = [
        Target(
            "crash: fault -> client rerouted p50", _s(crash.get("p50_ms")), 1.0, at_least=False, unit=" s"
        ),
        Target(
            "crash: fault -> client rerouted p99", _s(crash.get("p99_ms")), 2.0, at_least=False, unit=" s"
        ),
    ]
    return Outcome("failover", tables, targets, data)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def run(base: Path, quick: bool) -> Outcome:
    """Fault, measure, restore; then read the stages back from the history."""
    return _report(_measure(base, quick))
