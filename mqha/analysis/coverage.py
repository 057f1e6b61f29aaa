"""What an analysis actually checked, and whether that is enough for a verdict (core).

A verdict that found nothing is only worth something if there was something to look at: acks to
compare, a final master log to compare them with, every replica's log to compare with each other.
``Coverage`` holds the counts both engines compute (the pure ``coverage_of`` over plain rows here,
``mqha.analysis.spark_job`` with DataFrame aggregates), and ``judge`` turns them, the failed
invariants and the export's own problems (``manifest.json``'s ``problems``: a node that could not be
reached, a table that could not be read) into the verdict's ``status``:

- ``violated``: some invariant failed. ``lost_ack`` and ``read_uncommitted`` are only evaluated on
  sets whose final master log is in the export, so a missing log never reads as a loss;
- ``inconclusive``: nothing failed, but something the proof needs is missing -- each reason names
  it: no acknowledged put under ``allAckInSyncStateSet`` at all (``lost_ack`` checked nothing), a set
  with acks but no final master log, a replica (seen in ``roles`` or a controller's SyncStateSet)
  without a final log while others of its set have one, a history gap (a replica the controllers
  named with no ``roles`` of its own while others of its set recorded theirs), an *ack gap* (below),
  or an export problem;
- ``ok``: nothing failed and nothing is missing.

*Ack gaps* (issue 45, finding 8): a master that crashed may have answered PUT_OKs its history never
kept (a lost ``history.db``, a power cut inside the ack journal's window, an older broker), and a check
over the acks that *are* recorded would say OK over fewer than were given. The controllers' watermark
(``controller_events.ackedWatermark``, or ``ackedDataLostTo`` when an election declared a loss) is
evidence the histories cannot lose: it only grows from the master's ack point (its confirm offset on
AlterSyncStateSet and in heartbeats) and every ElectMaster carries it over. For each masterEpoch E of a
set with a master: what E's master confirmed reaches ``max(highest watermark of E's events, the
watermark the next epoch opened with)``; acks below ``max(the watermark E opened with, E's start offset
(``epochs``), the end of the last PUT_OK ack recorded in E (any recorder))`` are accounted for. A
confirmed range above that is a gap: puts there may have been acknowledged and are not in any history,
so the verdict is inconclusive and names the set, the master, the epoch and the offsets. (A put that
was confirmed but never answered -- its master died in between -- also makes a gap: the proof cannot
tell it from an answered one.)

Acks recorded by a broker (``client`` starting with ``BROKER_ACK_PREFIX``, docs/architecture.md §5)
and by clients are counted apart, so the report says who vouched for the acks it checked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqha.history.schema import BROKER_ACK_PREFIX

OK = "ok"
VIOLATED = "violated"
INCONCLUSIVE = "inconclusive"

EXIT_CODES = {OK: 0, VIOLATED: 1, INCONCLUSIVE: 3}
"""``mqha analyze``'s exit code by status (2 is taken: the input is unusable)."""

BROKER_SOURCE = "broker"
CLIENT_SOURCE = "client"


def ack_source(client: Any) -> str:
    """``broker`` for an ack a master recorded itself, else ``client``."""
    return (
        BROKER_SOURCE if isinstance(client, str) and client.startswith(BROKER_ACK_PREFIX) else CLIENT_SOURCE
    )


@dataclass(frozen=True, order=True)
class LogStat:
    """One replica's final log: rows, lowest offset, end (offset + size of its last message)."""

    broker_name: str
    broker_id: int
    rows: int
    start: int
    end: int


@dataclass(frozen=True, order=True)
class AckStat:
    """Counts the PUT_OK acks of one set from one source (``broker`` or ``client``).

    ``put_ok``: all of them; of those under ``allAckInSyncStateSet``: ``checked`` against the final
    master log, ``expired`` below its log start, ``unchecked`` in a set without a final master log."""

    broker_name: str
    source: str
    put_ok: int
    checked: int
    expired: int
    unchecked: int


@dataclass(frozen=True, order=True)
class Term:
    """Holds one masterEpoch of a set as the controllers' events show it.

    ``master_id``: its master (None: a cleared epoch); ``opened``: the watermark of its first event (by
    raftIndex: what was known before its master acknowledged anything); ``highest``: the highest
    watermark of its events."""

    broker_name: str
    master_epoch: int
    master_id: int | None
    opened: int
    highest: int


@dataclass(frozen=True, order=True)
class AckGap:
    """Names a confirmed range with no recorded ack (module docstring).

    ``master_id`` confirmed ``[from_offset, to_offset)`` in ``master_epoch``; no PUT_OK is recorded
    there."""

    broker_name: str
    master_id: int
    master_epoch: int
    from_offset: int
    to_offset: int

    def to_json(self) -> dict[str, int]:
        return {
            "masterId": self.master_id,
            "masterEpoch": self.master_epoch,
            "fromOffset": self.from_offset,
            "toOffset": self.to_offset,
        }


@dataclass(frozen=True)
class Coverage:
    """Everything ``judge`` needs, as both engines compute it (equal field by field)."""

    masters: Mapping[str, int] = field(default_factory=dict)
    logs: tuple[LogStat, ...] = ()
    acks: tuple[AckStat, ...] = ()
    reads: Mapping[str, int] = field(default_factory=dict)  # brokerName -> reads
    replicas: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # brokerName -> expected ids
    recorded: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # brokerName -> ids with roles
    gaps: tuple[AckGap, ...] = ()

    def set_names(self) -> list[str]:
        names = set(self.masters) | {s.broker_name for s in self.logs} | {a.broker_name for a in self.acks}
        return sorted(names | set(self.reads) | set(self.replicas))

    def to_json(self) -> dict[str, Any]:
        """Per broker set: final master, each replica's final log rows, acks by source and by fate."""
        sets: dict[str, Any] = {}
        for name in self.set_names():
            logs = sorted((s for s in self.logs if s.broker_name == name), key=lambda s: s.broker_id)
            acks = [a for a in self.acks if a.broker_name == name]
            master = self.masters.get(name)
            master_log = next((s for s in logs if s.broker_id == master), None)
            sets[name] = {
                "finalMasterId": master,
                "replicas": list(self.replicas.get(name, ())),
                "withHistory": list(self.recorded.get(name, ())),
                "finalLogs": [{"brokerId": s.broker_id, "rows": s.rows} for s in logs],
                "logStart": None if master_log is None else master_log.start,
                "logEnd": None if master_log is None else master_log.end,
                "acks": {src: sum(a.put_ok for a in acks if a.source == src) for src in _SOURCES},
                "acksChecked": sum(a.checked for a in acks),
                "acksExpired": sum(a.expired for a in acks),
                "acksUnchecked": sum(a.unchecked for a in acks),
                "reads": self.reads.get(name, 0),
                "ackGaps": [g.to_json() for g in self.gaps if g.broker_name == name],
            }
        return {
            "acksChecked": sum(a.checked for a in self.acks),
            "acksByBroker": sum(a.checked for a in self.acks if a.source == BROKER_SOURCE),
            "acksByClient": sum(a.checked for a in self.acks if a.source == CLIENT_SOURCE),
            "finalLogReplicas": len(self.logs),
            "sets": sets,
        }


_SOURCES = (BROKER_SOURCE, CLIENT_SOURCE)


def judge(failed: Sequence[str], coverage: Coverage, problems: Iterable[str] = ()) -> tuple[str, list[str]]:
    """``(status, reasons)`` (see the module docstring). Reasons are given for every status."""
    reasons = [f"export: {p}" for p in problems]
    by_set: dict[str, list[AckStat]] = defaultdict(list)
    for stat in coverage.acks:
        by_set[stat.broker_name].append(stat)
    logs: dict[str, dict[int, LogStat]] = defaultdict(dict)
    for stat in coverage.logs:
        logs[stat.broker_name][stat.broker_id] = stat
    if not coverage.logs:
        reasons.append("no final logs in the export: acks and reads were compared with nothing")
    for name in coverage.set_names():
        unchecked = sum(a.unchecked for a in by_set.get(name, ()))
        master = coverage.masters.get(name)
        if unchecked:
            reasons.append(
                f"set {name}: {unchecked} acknowledged put(s) not checked: no final log of its final "
                f"master {master}"
            )
        if logs.get(name):
            missing = [i for i in coverage.replicas.get(name, ()) if i not in logs[name]]
            if missing:
                reasons.append(
                    f"set {name}: no final log of replica(s) {', '.join(map(str, missing))}: "
                    "their logs were not compared"
                )
        for gap in (g for g in coverage.gaps if g.broker_name == name):
            reasons.append(
                f"set {name}: master {gap.master_id} (masterEpoch {gap.master_epoch}) confirmed offsets "
                f"{gap.from_offset}..{gap.to_offset} ({gap.to_offset - gap.from_offset} bytes) with no "
                "PUT_OK recorded there: acks it may have answered are in no history and were not checked"
            )
        ran = coverage.recorded.get(name, ())
        silent = [i for i in coverage.replicas.get(name, ()) if ran and i not in ran]
        if silent:
            reasons.append(
                f"set {name}: no history of replica(s) {', '.join(map(str, silent))} (a gap: the acks "
                "it answered as master, its roles and epochs are missing)"
            )
    put_ok = sum(a.put_ok for a in coverage.acks)
    if not sum(a.checked + a.expired for a in coverage.acks):
        if put_ok:
            reasons.append(
                f"{put_ok} PUT_OK ack(s) recorded, none under allAckInSyncStateSet with a final master "
                "log: lost_ack checked nothing"
            )
        else:
            reasons.append("no PUT_OK acks recorded (by brokers or clients): lost_ack checked nothing")
    if failed:
        return VIOLATED, [f"violated: {', '.join(failed)}", *reasons]
    return (INCONCLUSIVE, reasons) if reasons else (OK, [])


# --------------------------------------------------------------------------------------------------
# The pure computation (plain rows; the Spark job computes the same with aggregates).


def expected_replicas(
    controller_events: Iterable[Mapping[str, Any]], roles: Iterable[Mapping[str, Any]]
) -> dict[str, tuple[int, ...]]:
    """brokerName -> every broker id that ran (``roles``) or was a master or in a SyncStateSet."""
    ids: dict[str, set[int]] = defaultdict(set)
    for row in roles:
        if row.get("brokerName") is not None and row.get("brokerId") is not None:
            ids[row["brokerName"]].add(row["brokerId"])
    for row in controller_events:
        name = row.get("brokerName")
        if name is None:
            continue
        if row.get("masterBrokerId") is not None:
            ids[name].add(row["masterBrokerId"])
        ids[name].update(row.get("syncStateSet") or ())
    return {name: tuple(sorted(found)) for name, found in ids.items()}


def recorded_replicas(roles: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, ...]]:
    """brokerName -> the broker ids that recorded ``roles`` (their history is in the export)."""
    return expected_replicas((), roles)


def log_stats(final_logs: Iterable[Mapping[str, Any]]) -> tuple[LogStat, ...]:
    acc: dict[tuple[str, int], list[int]] = {}
    for row in final_logs:
        if row.get("brokerName") is None or row.get("brokerId") is None or row.get("offset") is None:
            continue
        key = (row["brokerName"], row["brokerId"])
        end = row["offset"] + (row.get("size") or 0)
        if key not in acc:
            acc[key] = [0, row["offset"], end]
        stat = acc[key]
        stat[0] += 1
        stat[1] = min(stat[1], row["offset"])
        stat[2] = max(stat[2], end)
    return tuple(LogStat(n, i, *v) for (n, i), v in sorted(acc.items()))


def ack_stats(
    acks: Iterable[Mapping[str, Any]], starts: Mapping[str, int], put_ok: str, all_ack: str
) -> tuple[AckStat, ...]:
    """Per (set, source): see ``AckStat``; ``starts`` holds the log start of each set with a final
    master log."""
    acc: dict[tuple[str, str], list[int]] = {}
    for ack in acks:
        if ack.get("status") != put_ok or ack.get("brokerName") is None:
            continue
        name = ack["brokerName"]
        stat = acc.setdefault((name, ack_source(ack.get("client"))), [0, 0, 0, 0])
        stat[0] += 1
        if ack.get("ackMode") != all_ack:
            continue
        start, offset = starts.get(name), ack.get("offset")
        if start is None:
            stat[3] += 1
        elif isinstance(offset, int) and offset < start:
            stat[2] += 1
        else:
            stat[1] += 1
    return tuple(AckStat(n, s, *v) for (n, s), v in sorted(acc.items()))


def watermark(row: Mapping[str, Any]) -> int:
    """What a controller event says was acknowledged: its ``ackedWatermark``, or the end of the range
    its election declared lost (the watermark is lowered to its start then); -1 when neither."""
    values = [row.get("ackedWatermark"), row.get("ackedDataLostTo")]
    return max([-1, *(v for v in values if isinstance(v, int))])


def terms_of(controller_events: Iterable[Mapping[str, Any]]) -> tuple[Term, ...]:
    """Every (brokerName, masterEpoch) of the events (see ``Term``); ties on raftIndex (the same entry
    on several controller nodes) take the lowest watermark."""
    acc: dict[tuple[str, int], list[Any]] = {}
    for row in controller_events:
        name, epoch, index = row.get("brokerName"), row.get("masterEpoch"), row.get("raftIndex")
        if name is None or epoch is None or index is None:
            continue
        mark, master = watermark(row), row.get("masterBrokerId")
        term = acc.setdefault((name, epoch), [None, (index, mark), mark])
        if master is not None and (term[0] is None or master > term[0]):
            term[0] = master
        term[1] = min(term[1], (index, mark))
        term[2] = max(term[2], mark)
    return tuple(Term(n, e, m, first[1], high) for (n, e), (m, first, high) in sorted(acc.items()))


def ack_ends(acks: Iterable[Mapping[str, Any]], put_ok: str) -> dict[tuple[str, int], int]:
    """(brokerName, epoch) -> the end (offset + size) of the last PUT_OK ack recorded in that epoch."""
    ends: dict[tuple[str, int], int] = {}
    for ack in acks:
        name, epoch, offset = ack.get("brokerName"), ack.get("epoch"), ack.get("offset")
        if ack.get("status") != put_ok or name is None or epoch is None or offset is None:
            continue
        end = offset + (ack.get("size") or 0)
        ends[(name, epoch)] = max(end, ends.get((name, epoch), end))
    return ends


def epoch_starts(epochs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], int]:
    """(brokerName, epoch) -> its lowest recorded start offset."""
    starts: dict[tuple[str, int], int] = {}
    for row in epochs:
        name, epoch, start = row.get("brokerName"), row.get("epoch"), row.get("startOffset")
        if name is not None and epoch is not None and start is not None:
            starts[(name, epoch)] = min(start, starts.get((name, epoch), start))
    return starts


def ack_gaps(
    terms: Iterable[Term], ends: Mapping[tuple[str, int], int], starts: Mapping[tuple[str, int], int]
) -> tuple[AckGap, ...]:
    """The confirmed ranges without a recorded ack, per term with a master (module docstring)."""
    by_set: dict[str, list[Term]] = defaultdict(list)
    for term in terms:
        by_set[term.broker_name].append(term)
    gaps = []
    for name, found in by_set.items():
        found.sort(key=lambda t: t.master_epoch)
        for term, following in zip(found, [*found[1:], None], strict=True):
            if term.master_id is None:
                continue
            key = (name, term.master_epoch)
            confirmed = max(term.highest, -1 if following is None else following.opened)
            accounted = max(0, term.opened, starts.get(key, -1), ends.get(key, -1))
            if confirmed > accounted:
                gaps.append(AckGap(name, term.master_id, term.master_epoch, accounted, confirmed))
    return tuple(sorted(gaps))


def read_counts(reads: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in reads:
        if row.get("brokerName") is not None:
            counts[row["brokerName"]] += 1
    return dict(sorted(counts.items()))
