"""One master-kill cycle on a :class:`LocalCluster` under a running workload (shell).

``kill_master(...)``: kill -9 the group's master, wait for the new master, measure the client's
recovery; ``rejoin(...)``: restart the old master and wait until it has truncated any divergent tail
and is back in the SyncStateSet. The demo and the recovery benchmark run these; the figures go into
:class:`FailoverReport`.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import ClusterError, Node
from mqha.cluster.recovery import RecoveryMeter, RecoverySample
from mqha.cluster.workload import ProduceWorkload

_TRUNCATED = re.compile(rb"truncated the commit log from (\d+) to (\d+)")


@dataclass
class FailoverReport:
    """What one kill cycle showed (seconds; offsets in bytes)."""

    group: str
    old_master: str
    old_broker_id: int | None
    old_epoch: int
    old_max_offset: int | None
    new_master: str
    new_broker_id: int | None
    new_epoch: int
    new_sync_state_set: tuple[int, ...]
    election: float  # kill → a new master answers as MASTER (polled every 10 ms)
    sample: RecoverySample
    truncated: tuple[int, int] | None = None  # (from, to) on the restarted old master
    rejoined_in: float | None = None  # restart → back in the SyncStateSet
    rejoined_role: str | None = None
    final_sync_state_set: tuple[int, ...] = ()

    @property
    def recovery(self) -> float:
        return self.sample.recovery


def kill_master(
    cluster: LocalCluster, workload: ProduceWorkload, group: str | None = None, *, timeout: float = 30.0
) -> FailoverReport:
    """kill -9 the master of ``group`` while ``workload`` sends; returns once the client's first ack
    on the new master is measured."""
    group = group or cluster.groups[0]
    old = cluster.master(group, timeout=timeout)
    if old is None:
        raise ClusterError(f"{group} has no master to kill\n{cluster.status_table()}")
    before = cluster.broker_status(old) or {}
    old_epoch = int(before.get("masterEpoch") or 0)
    # Make sure the workload is flowing through this master before the kill.
    acked = workload.acked
    workload.wait_acked(acked + workload.concurrency, timeout=timeout)
    before = cluster.broker_status(old) or before
    killed_at = time.monotonic()
    cluster.kill(old)
    new: Node | None = None
    deadline = killed_at + timeout
    while new is None:
        candidate = cluster.master(group)
        if candidate is not None and candidate.name != old.name:
            new = candidate
        elif time.monotonic() >= deadline:
            raise ClusterError(f"no new master of {group} within {timeout:g} s\n{cluster.status_table()}")
        else:
            time.sleep(0.01)
    election = time.monotonic() - killed_at
    sample = RecoveryMeter(workload).wait(killed_at, old_epoch, timeout=timeout)
    status = cluster.broker_status(new) or {}
    return FailoverReport(
        group=group,
        old_master=old.name,
        old_broker_id=before.get("controllerBrokerId"),
        old_epoch=old_epoch,
        old_max_offset=before.get("maxOffset"),
        new_master=new.name,
        new_broker_id=status.get("controllerBrokerId"),
        new_epoch=int(status.get("masterEpoch") or sample.new_epoch),
        new_sync_state_set=tuple(status.get("syncStateSet") or ()),
        election=election,
        sample=sample,
    )


def rejoin(cluster: LocalCluster, report: FailoverReport, *, timeout: float = 60.0) -> FailoverReport:
    """Restart the killed master; wait until the group is whole again (full SyncStateSet)."""
    node = cluster.node(report.old_master)
    log_size = node.log.stat().st_size if node.log.exists() else 0
    started = time.monotonic()
    cluster.start_node(node, timeout=timeout)
    cluster.wait_ready(timeout, groups=[report.group])
    report.rejoined_in = time.monotonic() - started
    status = cluster.broker_status(node) or {}
    report.rejoined_role = status.get("role")
    master = cluster.master(report.group)
    report.final_sync_state_set = (
        tuple((cluster.broker_status(master) or {}).get("syncStateSet") or ()) if master else ()
    )
    with open(node.log, "rb") as handle:
        handle.seek(log_size)
        found = _TRUNCATED.findall(handle.read())
    if found:
        report.truncated = (int(found[0][0]), int(found[-1][1]))
    return report


@dataclass(frozen=True)
class Distribution:
    """Summary of recovery times (seconds)."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def maximum(self) -> float:
        return max(self.samples)

    @property
    def minimum(self) -> float:
        return min(self.samples)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.samples)
        index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
        return ordered[index]

    def summary(self) -> str:
        return (
            f"n={len(self.samples)}  min {ms(self.minimum)}  median {ms(self.median)}  "
            f"p90 {ms(self.percentile(90))}  max {ms(self.maximum)}"
        )

    def histogram(self, width: int = 40) -> list[str]:
        """A few text lines: counts per time bucket."""
        edges = [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, float("inf")]
        counts = [0] * len(edges)
        for value in self.samples:
            counts[next(i for i, edge in enumerate(edges) if value < edge)] += 1
        top = max(counts) or 1
        lines, low = [], 0.0
        for edge, count in zip(edges, counts, strict=True):
            if count:
                label = f"{ms(low)}-{ms(edge)}" if edge != float("inf") else f">= {ms(low)}"
                lines.append(f"{label:>16} | {'#' * max(1, round(count / top * width))} {count}")
            low = edge
        return lines


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.0095 else f"{seconds * 1000:.1f} ms"


def distribution(reports: Sequence[FailoverReport]) -> Distribution:
    return Distribution(tuple(r.recovery for r in reports))
