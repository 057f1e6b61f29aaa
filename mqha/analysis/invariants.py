"""The no-loss invariants of docs/architecture.md §5, each stated once as a pure function over plain rows
(core).

A row is a mapping with the column names of ``mqha.history.schema`` (missing keys read as null). Each
check returns the *evidence rows* of its violations -- dicts with the columns listed in ``EVIDENCE`` --
sorted by ``ORDER`` (nulls first, as Spark sorts). ``mqha.analysis.spark_job`` states the same checks as
DataFrame queries producing the same evidence, and a test requires identical verdicts on the same
fixtures, so the definitions below are the reference for both (null handling included).

Definitions:

- *final master* of a broker set: the ``masterBrokerId`` of its ``controller_events`` row with the
  highest ``raftIndex`` among rows naming a master; for a set without such rows, the replica with the
  longest ``final_logs`` (largest ``offset + size``; ties: smallest brokerId). The *final master log* is
  that replica's ``final_logs`` rows; its *log start* is their lowest offset (retention deletes
  whole segments from the front of a log, docs/architecture.md §4.2, never from the middle or end).
- ``lost_ack``: an ack with ``status == PUT_OK`` and ``ackMode == allAckInSyncStateSet`` at or above the
  final master log's start whose msgId is not the final master log's message at (brokerName, offset).
  Below the log start a message expired by retention, which is not a loss.
- ``replica_divergence``: replicas of one set hold different messages -- (msgId, size, crc) -- at an
  offset they all hold.
- ``two_masters_in_epoch``: more than one master id for (brokerName, masterEpoch), from the controller
  (``controller_events.masterBrokerId``) and the brokers (``roles`` rows with a ``…MASTER`` role).
- ``epoch_not_increasing``: on one controller node, for one set in raftIndex order, masterEpoch or
  syncStateSetEpoch is lower than on the previous row naming epochs. A row of a whole-set clean (type
  ``CleanBrokerData`` with no epochs after it) starts the comparison afresh, since a set registered
  again starts at epoch 0.
- ``epoch_start_mismatch``: the replicas of one set, each at its latest recorded entry (by ts, then
  seq) for an epoch, disagree on that epoch's start offset.
- ``master_outside_sss``: a ``controller_events`` row whose master is not in its SyncStateSet.
- ``read_uncommitted``: a read at or above the final master log's start whose msgId is not the final
  master log's message at its offset.
- ``duplicate`` (counted, never a failure): one msgId at more than one offset of a final master log.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqha.analysis import coverage as cov
from mqha.history.schema import ACKS, CONTROLLER_EVENTS, EPOCHS, FINAL_LOGS, READS, ROLES, TABLES

Row = Mapping[str, Any]
Evidence = dict[str, Any]

LOST_ACK = "lost_ack"
REPLICA_DIVERGENCE = "replica_divergence"
TWO_MASTERS_IN_EPOCH = "two_masters_in_epoch"
EPOCH_NOT_INCREASING = "epoch_not_increasing"
EPOCH_START_MISMATCH = "epoch_start_mismatch"
MASTER_OUTSIDE_SSS = "master_outside_sss"
READ_UNCOMMITTED = "read_uncommitted"
DUPLICATE = "duplicate"

INVARIANTS: tuple[str, ...] = (
    LOST_ACK,
    REPLICA_DIVERGENCE,
    TWO_MASTERS_IN_EPOCH,
    EPOCH_NOT_INCREASING,
    EPOCH_START_MISMATCH,
    MASTER_OUTSIDE_SSS,
    READ_UNCOMMITTED,
)
"""The invariants whose violation fails the analysis, in report order."""

CHECKS: tuple[str, ...] = (*INVARIANTS, DUPLICATE)

PUT_OK = "PUT_OK"
ALL_ACK_MODE = "allAckInSyncStateSet"
CLEAN_TYPE = "CleanBrokerData"
DEFAULT_LIMIT = 20

EVIDENCE: dict[str, tuple[str, ...]] = {
    LOST_ACK: ("client", "msgId", "brokerName", "brokerId", "offset", "epoch", "finalMasterId", "foundMsgId"),
    REPLICA_DIVERGENCE: ("brokerName", "offset", "replicas"),
    TWO_MASTERS_IN_EPOCH: ("brokerName", "masterEpoch", "masterIds"),
    EPOCH_NOT_INCREASING: (
        "node",
        "brokerName",
        "raftIndex",
        "prevRaftIndex",
        "masterEpoch",
        "prevMasterEpoch",
        "syncStateSetEpoch",
        "prevSyncStateSetEpoch",
    ),
    EPOCH_START_MISMATCH: ("brokerName", "epoch", "startOffsets"),
    MASTER_OUTSIDE_SSS: ("node", "raftIndex", "brokerName", "masterBrokerId", "masterEpoch", "syncStateSet"),
    READ_UNCOMMITTED: ("client", "msgId", "brokerName", "brokerId", "offset", "finalMasterId", "foundMsgId"),
    DUPLICATE: ("brokerName", "msgId", "offsets"),
}

ORDER: dict[str, tuple[str, ...]] = {
    LOST_ACK: ("brokerName", "offset", "client", "msgId"),
    REPLICA_DIVERGENCE: ("brokerName", "offset"),
    TWO_MASTERS_IN_EPOCH: ("brokerName", "masterEpoch"),
    EPOCH_NOT_INCREASING: ("node", "brokerName", "raftIndex"),
    EPOCH_START_MISMATCH: ("brokerName", "epoch"),
    MASTER_OUTSIDE_SSS: ("node", "brokerName", "raftIndex"),
    READ_UNCOMMITTED: ("brokerName", "offset", "client", "msgId"),
    DUPLICATE: ("brokerName", "msgId"),
}

DESCRIPTIONS: dict[str, str] = {
    LOST_ACK: "a PUT_OK ack under allAckInSyncStateSet is missing from the final master log at its offset",
    REPLICA_DIVERGENCE: "two replicas hold different messages at an offset both hold",
    TWO_MASTERS_IN_EPOCH: "two master ids for one (brokerName, masterEpoch)",
    EPOCH_NOT_INCREASING: "masterEpoch or syncStateSetEpoch goes backwards in raftIndex order",
    EPOCH_START_MISMATCH: "one epoch with different start offsets on different replicas",
    MASTER_OUTSIDE_SSS: "a record leaves the master outside the SyncStateSet",
    READ_UNCOMMITTED: "a read saw a message that is not in the final log at that offset",
    DUPLICATE: "one msgId at two offsets of the final master log",
}


@dataclass(frozen=True)
class Finding:
    """One check's result: how many violations, and the first ``limit`` evidence rows in ``ORDER``."""

    name: str
    count: int
    rows: tuple[Evidence, ...] = ()

    @property
    def is_failure(self) -> bool:
        return self.name != DUPLICATE and self.count > 0


@dataclass(frozen=True)
class Verdict:
    """Holds every check's finding (in ``CHECKS`` order), table row counts, coverage and problems.

    ``mqha.analysis.coverage.judge`` turns them into ``status``."""

    findings: tuple[Finding, ...]
    table_counts: Mapping[str, int] = field(default_factory=dict)
    coverage: cov.Coverage = field(default_factory=cov.Coverage)
    problems: tuple[str, ...] = ()

    def finding(self, name: str) -> Finding:
        return next(f for f in self.findings if f.name == name)

    @property
    def failed(self) -> tuple[str, ...]:
        """Names of the violated invariants (``duplicate`` never is one)."""
        return tuple(f.name for f in self.findings if f.is_failure)

    @property
    def judged(self) -> tuple[str, list[str]]:
        """``(status, reasons)``: ``ok``, ``violated`` or ``inconclusive`` (``coverage.judge``)."""
        return cov.judge(self.failed, self.coverage, self.problems)

    @property
    def status(self) -> str:
        return self.judged[0]

    @property
    def ok(self) -> bool:
        """Nothing violated and nothing missing: an ``inconclusive`` verdict is not ok."""
        return self.status == cov.OK

    def to_json(self) -> dict[str, Any]:
        status, reasons = self.judged
        return {
            "status": status,
            "ok": status == cov.OK,
            "reasons": reasons,
            "failed": list(self.failed),
            "tables": dict(self.table_counts),
            "coverage": self.coverage.to_json(),
            "checks": {
                f.name: {
                    "failure": f.name != DUPLICATE,
                    "description": DESCRIPTIONS[f.name],
                    "count": f.count,
                    "rows": list(f.rows),
                }
                for f in self.findings
            },
        }


# --------------------------------------------------------------------------------------------------
# Helpers shared by the checks.


def _sort_key(order: Sequence[str]) -> Callable[[Evidence], tuple[Any, ...]]:
    # Nulls first, as Spark's ascending sort: (False, 0) sorts before (True, value).
    def key(row: Evidence) -> tuple[Any, ...]:
        return tuple((row.get(c) is not None, row.get(c) if row.get(c) is not None else 0) for c in order)

    return key


def finding(name: str, rows: Iterable[Evidence], limit: int = DEFAULT_LIMIT) -> Finding:
    """A ``Finding`` from every evidence row of a check: counted, sorted, cut to ``limit``."""
    ordered = sorted(rows, key=_sort_key(ORDER[name]))
    return Finding(name, len(ordered), tuple(ordered[:limit]))


def _nn(row: Row, *names: str) -> bool:
    return all(row.get(n) is not None for n in names)


def is_master_role(role: Any) -> bool:
    """``MASTER``, ``SYNC_MASTER``, ``ASYNC_MASTER`` (any case) name a master."""
    return isinstance(role, str) and role.upper().endswith("MASTER")


def final_masters(controller_events: Iterable[Row], final_logs: Iterable[Row]) -> dict[str, int]:
    """brokerName -> final master id (see the module docstring)."""
    best: dict[str, tuple[int, int]] = {}
    for row in controller_events:
        if not _nn(row, "brokerName", "masterBrokerId", "raftIndex"):
            continue
        candidate = (row["raftIndex"], row["masterBrokerId"])
        name = row["brokerName"]
        if name not in best or candidate > best[name]:
            best[name] = candidate
    masters = {name: pair[1] for name, pair in best.items()}
    ends: dict[tuple[str, int], int] = {}
    for row in final_logs:
        if not _nn(row, "brokerName", "brokerId", "offset") or row["brokerName"] in masters:
            continue
        key = (row["brokerName"], row["brokerId"])
        end = row["offset"] + (row.get("size") or 0)
        ends[key] = max(ends.get(key, end), end)
    longest: dict[str, tuple[int, int]] = {}
    for (name, broker_id), end in ends.items():
        candidate = (end, -broker_id)
        if name not in longest or candidate > longest[name]:
            longest[name] = candidate
    masters.update({name: -pair[1] for name, pair in longest.items()})
    return masters


def _master_log(final_logs: Iterable[Row], masters: Mapping[str, int]) -> dict[tuple[str, int], Row]:
    return {
        (row["brokerName"], row["offset"]): row
        for row in final_logs
        if _nn(row, "brokerName", "brokerId", "offset") and masters.get(row["brokerName"]) == row["brokerId"]
    }


# --------------------------------------------------------------------------------------------------
# The checks. Each takes the tables it needs and returns every evidence row (unsorted, uncut).


def _log_starts(log: Mapping[tuple[str, int], Row]) -> dict[str, int]:
    """Each set's final master log start: its lowest offset (retention cuts only the front)."""
    starts: dict[str, int] = {}
    for name, offset in log:
        starts[name] = min(offset, starts.get(name, offset))
    return starts


def _unchecked(row: Row, starts: Mapping[str, int]) -> bool:
    """Below the log start (expired), or in a set whose final master log is not in the export (a
    missing log is not evidence of a loss: ``coverage.judge`` makes that verdict inconclusive)."""
    start = starts.get(row.get("brokerName"))  # type: ignore[arg-type]
    offset = row.get("offset")
    return start is None or (isinstance(offset, int) and offset < start)


def check_lost_ack(
    acks: Iterable[Row], final_logs: Sequence[Row], controller_events: Iterable[Row]
) -> list[Evidence]:
    masters = final_masters(controller_events, final_logs)
    log = _master_log(final_logs, masters)
    starts = _log_starts(log)
    out = []
    for ack in acks:
        if ack.get("status") != PUT_OK or ack.get("ackMode") != ALL_ACK_MODE or _unchecked(ack, starts):
            continue
        name = ack.get("brokerName")
        found = log.get((name, ack.get("offset")))
        found_id = None if found is None else found.get("msgId")
        if found is None or found_id != ack.get("msgId"):
            out.append(
                {
                    "client": ack.get("client"),
                    "msgId": ack.get("msgId"),
                    "brokerName": name,
                    "brokerId": ack.get("brokerId"),
                    "offset": ack.get("offset"),
                    "epoch": ack.get("epoch"),
                    "finalMasterId": masters.get(name) if name is not None else None,
                    "foundMsgId": found_id,
                }
            )
    return out


def check_read_uncommitted(
    reads: Iterable[Row], final_logs: Sequence[Row], controller_events: Iterable[Row]
) -> list[Evidence]:
    masters = final_masters(controller_events, final_logs)
    log = _master_log(final_logs, masters)
    starts = _log_starts(log)
    out = []
    for read in reads:
        if _unchecked(read, starts):
            continue
        name = read.get("brokerName")
        found = log.get((name, read.get("offset")))
        found_id = None if found is None else found.get("msgId")
        if found is None or found_id != read.get("msgId"):
            out.append(
                {
                    "client": read.get("client"),
                    "msgId": read.get("msgId"),
                    "brokerName": name,
                    "brokerId": read.get("brokerId"),
                    "offset": read.get("offset"),
                    "finalMasterId": masters.get(name) if name is not None else None,
                    "foundMsgId": found_id,
                }
            )
    return out


def message_signature(row: Row) -> tuple[str, int, int]:
    """What must be equal on every replica holding an offset; nulls read as '' / -1."""
    msg_id, size, crc = row.get("msgId"), row.get("size"), row.get("crc")
    return ("" if msg_id is None else msg_id, -1 if size is None else size, -1 if crc is None else crc)


def check_replica_divergence(final_logs: Iterable[Row]) -> list[Evidence]:
    by_offset: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for row in final_logs:
        if _nn(row, "brokerName", "brokerId", "offset"):
            by_offset[(row["brokerName"], row["offset"])].append(row)
    out = []
    for (name, offset), rows in by_offset.items():
        if len({message_signature(r) for r in rows}) > 1:
            replicas = [
                {
                    "brokerId": r["brokerId"],
                    "msgId": r.get("msgId"),
                    "size": r.get("size"),
                    "crc": r.get("crc"),
                }
                for r in sorted(rows, key=lambda r: r["brokerId"])
            ]
            out.append({"brokerName": name, "offset": offset, "replicas": replicas})
    return out


def check_two_masters_in_epoch(controller_events: Iterable[Row], roles: Iterable[Row]) -> list[Evidence]:
    masters: dict[tuple[str, int], set[int]] = defaultdict(set)
    for row in controller_events:
        if _nn(row, "brokerName", "masterBrokerId", "masterEpoch"):
            masters[(row["brokerName"], row["masterEpoch"])].add(row["masterBrokerId"])
    for row in roles:
        if is_master_role(row.get("role")) and _nn(row, "brokerName", "brokerId", "masterEpoch"):
            masters[(row["brokerName"], row["masterEpoch"])].add(row["brokerId"])
    return [
        {"brokerName": name, "masterEpoch": epoch, "masterIds": sorted(ids)}
        for (name, epoch), ids in masters.items()
        if len(ids) > 1
    ]


def is_group_removal(row: Row) -> bool:
    """A whole-set clean: the set is gone after it, so its row names no epochs."""
    return row.get("type") == CLEAN_TYPE and row.get("masterEpoch") is None


def _lower(value: Any, previous: Any) -> bool:
    return value is not None and previous is not None and value < previous


def check_epoch_not_increasing(controller_events: Iterable[Row]) -> list[Evidence]:
    streams: dict[tuple[Any, str], list[Row]] = defaultdict(list)
    for row in controller_events:
        if _nn(row, "brokerName", "raftIndex"):
            streams[(row.get("node"), row["brokerName"])].append(row)
    out = []
    for (node, name), rows in streams.items():
        previous: Row | None = None
        for row in sorted(rows, key=lambda r: r["raftIndex"]):
            if is_group_removal(row):
                previous = None  # a new generation of the set starts at epoch 0
                continue
            if row.get("masterEpoch") is None:
                continue
            if previous is not None and (
                _lower(row["masterEpoch"], previous["masterEpoch"])
                or _lower(row.get("syncStateSetEpoch"), previous.get("syncStateSetEpoch"))
            ):
                out.append(
                    {
                        "node": node,
                        "brokerName": name,
                        "raftIndex": row["raftIndex"],
                        "prevRaftIndex": previous["raftIndex"],
                        "masterEpoch": row["masterEpoch"],
                        "prevMasterEpoch": previous["masterEpoch"],
                        "syncStateSetEpoch": row.get("syncStateSetEpoch"),
                        "prevSyncStateSetEpoch": previous.get("syncStateSetEpoch"),
                    }
                )
            previous = row
    return out


def _latest_key(row: Row) -> tuple[Any, ...]:
    # Non-null beats null, as Spark's descending sort with nulls last.
    return tuple((row.get(c) is not None, row.get(c) or 0) for c in ("ts", "seq", "startOffset"))


def check_epoch_start_mismatch(epochs: Iterable[Row]) -> list[Evidence]:
    latest: dict[tuple[str, int, int], Row] = {}
    for row in epochs:
        if not _nn(row, "brokerName", "brokerId", "epoch"):
            continue
        key = (row["brokerName"], row["brokerId"], row["epoch"])
        if key not in latest or _latest_key(row) > _latest_key(latest[key]):
            latest[key] = row
    starts: dict[tuple[str, int], set[int]] = defaultdict(set)
    for (name, _, epoch), row in latest.items():
        starts.setdefault((name, epoch), set())
        if row.get("startOffset") is not None:
            starts[(name, epoch)].add(row["startOffset"])
    return [
        {"brokerName": name, "epoch": epoch, "startOffsets": sorted(offsets)}
        for (name, epoch), offsets in starts.items()
        if len(offsets) > 1
    ]


def check_master_outside_sss(controller_events: Iterable[Row]) -> list[Evidence]:
    out = []
    for row in controller_events:
        master = row.get("masterBrokerId")
        if master is None:
            continue
        sss = row.get("syncStateSet")
        if sss is None or master not in sss:
            out.append(
                {
                    "node": row.get("node"),
                    "raftIndex": row.get("raftIndex"),
                    "brokerName": row.get("brokerName"),
                    "masterBrokerId": master,
                    "masterEpoch": row.get("masterEpoch"),
                    "syncStateSet": None if sss is None else sorted(sss),
                }
            )
    return out


def check_duplicate(final_logs: Sequence[Row], controller_events: Iterable[Row]) -> list[Evidence]:
    masters = final_masters(controller_events, final_logs)
    offsets: dict[tuple[str, str], set[int]] = defaultdict(set)
    for (name, offset), row in _master_log(final_logs, masters).items():
        if row.get("msgId") is not None:
            offsets[(name, row["msgId"])].add(offset)
    return [
        {"brokerName": name, "msgId": msg_id, "offsets": sorted(found)}
        for (name, msg_id), found in offsets.items()
        if len(found) > 1
    ]


def coverage_of(data: Mapping[str, Sequence[Row]]) -> cov.Coverage:
    """What the checks covered (``mqha.analysis.coverage``), from plain rows."""
    events, logs = data[CONTROLLER_EVENTS], data[FINAL_LOGS]
    masters = final_masters(events, logs)
    return cov.Coverage(
        masters=dict(sorted(masters.items())),
        logs=cov.log_stats(logs),
        acks=cov.ack_stats(data[ACKS], _log_starts(_master_log(logs, masters)), PUT_OK, ALL_ACK_MODE),
        reads=cov.read_counts(data[READS]),
        replicas=cov.expected_replicas(events, data[ROLES]),
        recorded=cov.recorded_replicas(data[ROLES]),
        gaps=cov.ack_gaps(
            cov.terms_of(events), cov.ack_ends(data[ACKS], PUT_OK), cov.epoch_starts(data[EPOCHS])
        ),
    )


def check_all(
    tables: Mapping[str, Iterable[Row]], limit: int = DEFAULT_LIMIT, problems: Sequence[str] = ()
) -> Verdict:
    """Every check of §5 over plain rows; missing tables are empty. ``problems``: the export's."""
    data: dict[str, list[Row]] = {name: list(tables.get(name, ())) for name in TABLES}
    events, logs = data[CONTROLLER_EVENTS], data[FINAL_LOGS]
    evidence = {
        LOST_ACK: check_lost_ack(data[ACKS], logs, events),
        REPLICA_DIVERGENCE: check_replica_divergence(logs),
        TWO_MASTERS_IN_EPOCH: check_two_masters_in_epoch(events, data[ROLES]),
        EPOCH_NOT_INCREASING: check_epoch_not_increasing(events),
        EPOCH_START_MISMATCH: check_epoch_start_mismatch(data[EPOCHS]),
        MASTER_OUTSIDE_SSS: check_master_outside_sss(events),
        READ_UNCOMMITTED: check_read_uncommitted(data[READS], logs, events),
        DUPLICATE: check_duplicate(logs, events),
    }
    findings = tuple(finding(name, evidence[name], limit) for name in CHECKS)
    return Verdict(findings, {n: len(r) for n, r in data.items()}, coverage_of(data), tuple(problems))
