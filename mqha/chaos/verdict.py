"""What a chaos run showed: counts, recovery percentiles, the verdict table and the exit code (core).

Pure: values in (what the runner observed), text and numbers out.

- lost: a send acknowledged ``PUT_OK`` at or above its group's final master log start whose msgId is not
  at its offset in that log (below the log start the broker's retention deleted it: *expired*, counted
  and shown, not a loss; docs/architecture.md §4.2, §5; but in a run shorter than ``fileReservedTime``
  without a full disk nothing may expire, and an expired message fails it: ``clock`` steps);
- declared lost (``power-loss``): a lost send that was acknowledged before a power cut of its whole
  group, ends beyond the highest offset any replica of the group had fsynced (the cuts' flushed
  offsets), and lies in a range the controller declared lost (``ackedDataLost`` of an ElectMaster
  record, issue 25). Under ``ASYNC_FLUSH`` such a message is truly gone from every disk: physics, not
  a bug, as long as it is declared (under ``SYNC_FLUSH`` it was fsynced before its ack: never
  declared). Every other lost send is a *silent* loss. The ``lost_ack``
  invariant counts both: its violations up to the number of declared losses (times the two recorders
  of an ack, the client and the master) are not a failure. A *read* of a declared-lost message is
  one: readers see only what the serving replica fsynced (``BrokerAccess.read_limit``), which such a
  cut never takes;
- duplicated: one msgId at two offsets of a final master log (a retry after a lost answer; reported,
  not a failure);
- recovery of a fault: from its injection to the first ``PUT_OK`` of a send that started after it or
  failed after it (a send only in flight across the instant proves nothing), on any master of the
  groups the fault touched;
- failed puts of a fault: sends of those groups that ended without ``PUT_OK`` and overlapped the
  fault, from injection to the moment the cluster was whole again.

The run fails (exit 1) on any silently lost message, any invariant violation, a check that could not run, a
cluster that was not whole again at the end, controllers that do not agree at the end
(``mqha.chaos.agreement``: all voters, one voter set, one applied state), or what the clients saw
(``mqha.chaos.client_checks``: an acknowledged message no consumer got, a producer's acks out of order,
a lost acknowledged controller write, puts turned away during a controller-only fault), or a
``clone`` step's copy of a store that was not refused (``mqha.chaos.clones``). Recovery
targets are reported, not enforced: on a shared machine they measure the machine as much as the system.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqha.analysis.invariants import DUPLICATE, LOST_ACK
from mqha.chaos.agreement import Agreement
from mqha.chaos.client_checks import (
    UNAVAILABLE_AFTER,
    WriteLog,
    lost_writes,
    not_injected,
    not_served,
    out_of_order,
    unavailable_outside_faults,
    unread_acks,
)
from mqha.chaos.declared import PowerCut, Ranges, declared_lost, never_fsynced
from mqha.chaos.schedule import (
    BITFLIP,
    KILL,
    MASTER,
    MASTER_AND_LEADER,
    PARTITION,
    PAUSE,
    FaultStep,
)
from mqha.client.results import SendResult, SendStatus
from mqha.table_text import columns

# Targets of the issue (seconds): crash of the master; pause or partition of the master (added to
# controllerHeartBeatTimeoutMills); controller faults: no failed put while the master is alive.
MASTER_CRASH_P50 = 1.0
MASTER_CRASH_P99 = 2.0
MASTER_HANG_MARGIN = 2.0


@dataclass(frozen=True)
class FaultOutcome:
    """One injected step as it happened (``time.monotonic`` seconds)."""

    step: FaultStep
    nodes: tuple[str, ...]  # the nodes actually hit
    groups: tuple[str, ...]  # the broker groups whose sends it may disturb
    injected_at: float
    healed_at: float
    whole_at: float | None  # the cluster was whole again (None: not within the bound)


ACK_RECORDERS = 2  # who records a PUT_OK: the producing client and the master (docs/architecture.md §5)


@dataclass(frozen=True)
class RunFacts:
    """Everything the verdict needs."""

    title: str
    planned: int
    faults: tuple[FaultOutcome, ...]
    sends: tuple[SendResult, ...]
    reads: int
    final_logs: Mapping[str, Mapping[int, str]]  # group -> offset -> msgId, of its final master
    engine: str  # spark | python | off
    invariants: Mapping[str, int] | None  # invariant -> violations (None: no analysis result)
    check_problem: str | None  # why the analysis gave no result
    settled: bool  # every group whole again after the final heal
    heartbeat_timeout: float  # controllerHeartBeatTimeoutMills, seconds
    controllers: Agreement | None = None  # None: not checked
    power_cuts: tuple[PowerCut, ...] = ()
    declared: Ranges = field(default_factory=dict)  # from the controllers' ElectMaster records
    reads_seen: tuple[tuple[str, int, str], ...] = ()  # (group, offset, msgId) of every recorded read
    reads_recorded: bool = False  # reads_seen holds the export's reads (consumer completeness checked)
    sequences: tuple[tuple[SendResult, ...], ...] = ()  # each producer's sends in the order it sent them
    controller_writes: WriteLog | None = None  # the controller-write workload's answers (None: none ran)
    probe_topics: set[str] | None = None  # its topics in the final state (None: could not be read)
    asked: tuple[str, ...] = ()  # the fault kinds asked for
    reached: tuple[str, ...] = ()  # the kinds of every step the run reached (injected or skipped)
    flips: int = 0  # bits flipped by bitflip steps
    unrepaired: tuple[str, ...] = ()  # brokers still reporting a damaged record at the end (bitflip)
    undetected: tuple[str, ...] = ()  # bitflips of start-time files the node did not find (bitflip)
    # Retention may delete acknowledged messages in this run (forcible cleaning on a full disk, or a run
    # longer than fileReservedTime); when False, any it deleted were deleted too young (a clock step).
    retention_may_delete: bool = True
    clones: str | None = None  # the clone steps' line (None: none ran)
    clone_problems: tuple[str, ...] = ()  # copies of a store that were not refused


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in (0, 100]); ValueError on no values."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def recovery_time(fault_at: float, sends: Iterable[SendResult]) -> float | None:
    """Seconds from ``fault_at`` to the first acknowledged send that started or failed after it."""
    firsts = [
        s.completed_at
        for s in sends
        if s.ok
        and s.completed_at >= fault_at
        and (s.started_at >= fault_at or (s.first_error_at is not None and s.first_error_at >= fault_at))
    ]
    return min(firsts) - fault_at if firsts else None


def failed_during(start: float, end: float, sends: Iterable[SendResult]) -> int:
    """Sends that ended without ``PUT_OK`` and overlapped ``[start, end]``."""
    return sum(1 for s in sends if not s.ok and s.completed_at >= start and s.started_at <= end)


def _log_starts(final_logs: Mapping[str, Mapping[int, str]]) -> dict[str, int]:
    """Each group's final master log start (computed once: a run has millions of sends)."""
    return {group: min(log) for group, log in final_logs.items() if log}


def _expired(send: SendResult, starts: Mapping[str, int]) -> bool:
    """Below its group's final master log start: retention deleted it (only the front ever goes)."""
    start = starts.get(send.broker_name)
    return start is not None and send.offset is not None and send.offset < start


def lost_messages(
    sends: Iterable[SendResult], final_logs: Mapping[str, Mapping[int, str]]
) -> list[SendResult]:
    """Acknowledged sends at or above their group's final master log start whose msgId is not at their
    offset in that log."""
    starts = _log_starts(final_logs)
    return [
        s
        for s in sends
        if s.ok
        and not _expired(s, starts)
        and (s.offset is None or final_logs.get(s.broker_name, {}).get(s.offset) != s.msg_id)
    ]


def expired_messages(sends: Iterable[SendResult], final_logs: Mapping[str, Mapping[int, str]]) -> int:
    """Acknowledged sends below their group's final master log start (deleted by retention)."""
    starts = _log_starts(final_logs)
    return sum(1 for s in sends if s.ok and _expired(s, starts))


def duplicated(final_logs: Mapping[str, Mapping[int, str]]) -> int:
    """Messages stored more than once (extra copies of a msgId) across the final master logs."""
    return sum(len(log) - len(set(log.values())) for log in final_logs.values())


def _group_sends(sends: Sequence[SendResult], groups: Sequence[str]) -> list[SendResult]:
    wanted = set(groups)
    return [s for s in sends if s.broker_name in wanted]


@dataclass(frozen=True)
class CategoryFigures:
    """Recovery figures of one fault category (kind, target, link scope)."""

    category: str
    count: int
    recoveries: tuple[float, ...]  # faults without any later ack are left out (``unrecovered``)
    unrecovered: int
    failed_puts: int
    target: str  # the target text, "" when the category has none
    met: bool | None  # None: no target

    def cells(self) -> tuple[str, ...]:
        def sec(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f}s"

        r = self.recoveries
        return (
            self.category,
            str(self.count),
            sec(percentile(r, 50) if r else None),
            sec(percentile(r, 99) if r else None),
            sec(max(r) if r else None),
            str(self.unrecovered),
            str(self.failed_puts),
            "" if self.met is None else f"{self.target}: {'met' if self.met else 'MISSED'}",
        )


def _target(step: FaultStep, heartbeat_timeout: float) -> str:
    if step.kind == KILL and step.target in (MASTER, MASTER_AND_LEADER):
        return f"p50<={MASTER_CRASH_P50:g}s p99<={MASTER_CRASH_P99:g}s"
    if step.kind in (PAUSE, PARTITION) and step.target == MASTER and step.links in ("", "all"):
        return f"max<={heartbeat_timeout + MASTER_HANG_MARGIN:g}s"
    if step.controllers_only:
        return "no failed put"
    return ""


def _met(target: str, recoveries: Sequence[float], unrecovered: int, failed: int, hb: float) -> bool | None:
    if not target:
        return None
    if target == "no failed put":
        return failed == 0
    if unrecovered:
        return False
    if not recoveries:
        return None
    if target.startswith("p50"):
        p50, p99 = percentile(recoveries, 50), percentile(recoveries, 99)
        return p50 <= MASTER_CRASH_P50 and p99 <= MASTER_CRASH_P99
    return max(recoveries) <= hb + MASTER_HANG_MARGIN


def fault_rows(facts: RunFacts) -> list[dict[str, Any]]:
    """One row per injected fault: what it was and its final figures (recovery None: no ack after it)."""
    rows = []
    for f in facts.faults:
        sends = _group_sends(facts.sends, f.groups)
        rows.append(
            {
                "index": f.step.index,
                "kind": f.step.kind,
                "category": f.step.category,
                "nodes": list(f.nodes),
                "hold": f.step.hold,
                "recovery": recovery_time(f.injected_at, sends),
                "failedPuts": failed_during(f.injected_at, f.whole_at or f.healed_at, sends),
                "wholeAfterHeal": None if f.whole_at is None else round(f.whole_at - f.healed_at, 3),
            }
        )
    return rows


def category_figures(facts: RunFacts) -> list[CategoryFigures]:
    """Per fault category, in order of first appearance."""
    grouped: dict[str, list[FaultOutcome]] = {}
    for fault in facts.faults:
        grouped.setdefault(fault.step.category, []).append(fault)
    out = []
    for category, faults in grouped.items():
        recoveries, unrecovered, failed = [], 0, 0
        for f in faults:
            sends = _group_sends(facts.sends, f.groups)
            r = recovery_time(f.injected_at, sends)
            if r is None:
                unrecovered += 1
            else:
                recoveries.append(r)
            failed += failed_during(f.injected_at, f.whole_at or f.healed_at, sends)
        target = _target(faults[0].step, facts.heartbeat_timeout)
        met = _met(target, recoveries, unrecovered, failed, facts.heartbeat_timeout)
        out.append(
            CategoryFigures(category, len(faults), tuple(recoveries), unrecovered, failed, target, met)
        )
    return out


@dataclass(frozen=True)
class Verdict:
    """A chaos run's verdict: pass or fail, why, and the printed table."""

    ok: bool
    reasons: tuple[str, ...]  # why it failed (empty when ok)
    lost: int  # silently lost
    duplicated: int
    text: str
    declared: int = 0  # lost, never fsynced on any replica, declared by the controller

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def _loss_reasons(lost: int, expired: int, retention_may_delete: bool) -> list[str]:
    reasons = [f"{lost} acknowledged message(s) lost"] if lost else []
    if expired and not retention_may_delete:  # a run shorter than fileReservedTime: deleted too young
        reasons.append(f"{expired} acknowledged message(s) deleted by retention before fileReservedTime")
    return reasons


def judge(facts: RunFacts) -> Verdict:
    """The verdict and its table (see the module docstring for what fails a run)."""
    counts = Counter(s.status for s in facts.sends)
    every_lost = lost_messages(facts.sends, facts.final_logs)
    gone = declared_lost(every_lost, facts.power_cuts, facts.declared)
    declared = len(gone)
    lost = len(every_lost) - declared
    # The checker sees a declared-lost message once per ack row: the client's and the master's own
    # (``historyRecordPutAcks``), so up to ACK_RECORDERS rows each.
    explained = {LOST_ACK: declared * ACK_RECORDERS}
    expired = expired_messages(facts.sends, facts.final_logs)
    dups = duplicated(facts.final_logs)
    kinds = Counter(f.step.kind for f in facts.faults)
    reasons = _loss_reasons(lost, expired, facts.retention_may_delete)
    if facts.invariants is None:
        if facts.engine != "off":
            reasons.append(f"no invariant check: {facts.check_problem or 'no result'}")
    else:
        reasons += [
            f"invariant {name}: {n} violation(s)"
            for name, n in facts.invariants.items()
            if n and name != DUPLICATE and n > explained.get(name, 0)
        ]
    if not facts.settled:
        reasons.append("the cluster was not whole again after the final heal")
    reasons += [f"damaged commit-log record not repaired: {p}" for p in facts.unrepaired] + list(
        facts.clone_problems
    )
    reasons += [f"flipped file not found damaged: {p}" for p in facts.undetected]
    if not facts.final_logs:
        reasons.append("no final master log could be read")
    if facts.controllers is not None and not facts.controllers.ok:
        reasons.append(f"the controllers disagree: {facts.controllers.text}")
    client_lines, client_reasons = _client_lines(facts)
    reasons += client_reasons

    lines = [facts.title]
    lines.append(
        f"faults injected: {len(facts.faults)} of {facts.planned} planned"
        + (" (" + ", ".join(f"{k} {n}" for k, n in kinds.items()) + ")" if kinds else "")
    )
    lines.append(
        f"messages: sent {len(facts.sends):,}  acked {counts[SendStatus.PUT_OK]:,}  "
        f"unknown {counts[SendStatus.UNKNOWN]:,}  failed {counts[SendStatus.FAILED]:,}  "
        f"not-replicated {counts[SendStatus.FLUSH_SLAVE_TIMEOUT]:,}  lost {lost}  duplicated {dups}"
        + (f"  declared-lost {declared}" if facts.power_cuts else "")
        + (f"  expired by retention {expired:,}" if expired else "")
    )
    if facts.power_cuts:
        lines.append(_power_line(facts, declared))
    lines += _flip_lines(facts) + ([facts.clones] if facts.clones is not None else [])
    read_uncommitted = (facts.invariants or {}).get("read_uncommitted")
    lines.append(
        f"reads: {facts.reads:,} delivered to consumers; read-uncommitted "
        + ("-" if read_uncommitted is None else str(read_uncommitted))
    )
    lines += client_lines
    if facts.controllers is not None:
        agree = "agree" if facts.controllers.ok else "DISAGREE"
        lines.append(f"controllers: {agree}: {facts.controllers.text}")
    figures = category_figures(facts)
    if figures:
        lines.append("recovery per fault (injection -> first acked send on a master):")
        header = ("FAULT", "N", "P50", "P99", "MAX", "UNRECOVERED", "FAILED_PUTS", "TARGET")
        every = [r for f in figures for r in f.recoveries]
        total = CategoryFigures(
            "all",
            sum(f.count for f in figures),
            tuple(every),
            sum(f.unrecovered for f in figures),
            sum(f.failed_puts for f in figures),
            "",
            None,
        )
        lines += columns([header, *(f.cells() for f in figures), total.cells()], indent="  ")
    lines += _invariant_lines(facts, explained)
    ok = not reasons
    lines.append("verdict: " + ("PASS" if ok else "FAIL -- " + "; ".join(reasons)))
    return Verdict(ok, tuple(reasons), lost, dups, "\n".join(lines) + "\n", declared)


def _client_lines(facts: RunFacts) -> tuple[list[str], list[str]]:
    """Consumer completeness, per-producer order, unavailability outside faults, kinds not injected:
    the lines, and the reasons to fail."""
    lines, reasons = [], []
    if facts.reads_recorded:
        read_ids: dict[str, set[str]] = {}
        for group, _, msg_id in facts.reads_seen:
            read_ids.setdefault(group, set()).add(msg_id)
        unread = unread_acks(facts.sends, facts.final_logs, read_ids)
        if unread:
            first = unread[0]
            reasons.append(f"{len(unread)} acknowledged message(s) never delivered to the consumer")
            lines.append(
                f"consumers: {len(unread):,} acknowledged message(s) never delivered, e.g. "
                f"{first.msg_id} at {first.broker_name}@{first.offset}"
            )
        else:
            lines.append("consumers: every acknowledged message in the final logs was delivered")
    else:
        lines.append("consumers: completeness not checked (no recorded reads)")
    if facts.sequences:
        disorder = out_of_order(facts.sequences, facts.final_logs)
        if disorder:
            reasons.append(f"{disorder} acknowledged send(s) out of their producer's order")
        lines.append(
            f"order: {len(facts.sequences)} producers, "
            + (f"{disorder} acknowledged send(s) OUT OF ORDER" if disorder else "every ack in send order")
        )
    spans = [(f.groups, f.injected_at, f.whole_at or f.healed_at) for f in facts.faults]
    windows = unavailable_outside_faults(facts.sends, spans)
    longest = max(windows, key=lambda w: w.length, default=None)
    lines.append(
        "unavailability outside fault windows: "
        + (
            f"{len(windows)} stretch(es) without acks, longest {longest.length:.2f} s ({longest.group})"
            if longest is not None
            else "none"
        )
    )
    controller_only = [span for f, span in zip(facts.faults, spans, strict=True) if f.step.controllers_only]
    if controller_only:
        others = [span for f, span in zip(facts.faults, spans, strict=True) if not f.step.controllers_only]
        outages = not_served(facts.sends, controller_only, others)
        worst = max(outages, key=lambda w: w.length, default=None)
        if worst is not None:
            reasons.append(
                f"{len(outages)} stretch(es) without acknowledged puts during controller-only faults "
                "(puts turned away)"
            )
        lines.append(
            f"data plane during controller-only faults: {len(controller_only)} window(s); "
            + (
                f"{len(outages)} stretch(es) NOT SERVED, longest {worst.length:.2f} s ({worst.group})"
                if worst is not None
                else f"no put turned away in a stretch over {UNAVAILABLE_AFTER:g} s without acks"
            )
        )
    if facts.controller_writes is not None:
        writes = facts.controller_writes
        if facts.probe_topics is None:
            reasons.append("the controller writes could not be checked: no leader listed the topics")
            lines.append("controller writes: NOT CHECKED (no leader answered the topic list)")
        else:
            lost = lost_writes(writes, facts.probe_topics)
            if lost:
                reasons.append(f"{len(lost)} acknowledged controller write(s) lost")
            lines.append(
                f"controller writes: {len(writes.acked):,} acknowledged, {len(writes.unknown):,} unknown, "
                f"{len(writes.refused):,} refused; "
                + (
                    f"{len(lost)} acknowledged LOST, e.g. {lost[0]}"
                    if lost
                    else "every acknowledged one applied"
                )
            )
    # a bitflip step that found no older segment flipped nothing: it does not show the kind injected
    injected = (f.step.kind for f in facts.faults if f.step.kind != BITFLIP or facts.flips)
    missing = not_injected(facts.asked, facts.reached, injected)
    lines += [f"not injected: {kind}: {why}" for kind, why in missing.items()]
    return lines, reasons


def _invariant_lines(facts: RunFacts, explained: Mapping[str, int]) -> list[str]:
    if facts.invariants is None:
        return [f"invariants: not checked ({facts.check_problem or facts.engine})"]
    lines = [f"invariants ({facts.engine}):"]
    for name, n in facts.invariants.items():
        state = f"counted {n} (not a failure)" if name == DUPLICATE else ("ok" if not n else f"FAIL {n}")
        if 0 < n <= explained.get(name, 0):
            state = f"{n}, all of messages declared lost by the controller (not a failure)"
        lines.append(f"  {name:<22} {state}")
    return lines


def _power_line(facts: RunFacts, declared: int) -> str:
    cuts = facts.power_cuts
    whole = sum(1 for c in cuts if c.whole_group)
    unsynced = sum(1 for s in facts.sends if s.ok and never_fsynced(s, cuts))
    ranges = sum(len(r) for r in facts.declared.values())
    return (
        f"power cuts: {len(cuts)} ({whole} of whole groups), {sum(c.records_cut for c in cuts):,} "
        f"message(s) cut; acked but never fsynced on any replica {unsynced}, of which declared lost "
        f"{declared}; the controllers declared {ranges} range(s) lost"
    )


def _flip_lines(facts: RunFacts) -> list[str]:
    """The bitflip line: how many bits were flipped, and whether every damaged record was repaired."""
    if not facts.flips and not facts.unrepaired:
        return []
    repaired = "NOT REPAIRED: " + "; ".join(facts.unrepaired) if facts.unrepaired else "every one repaired"
    found = "; NOT FOUND: " + "; ".join(facts.undetected) if facts.undetected else ""
    return [f"bit flips: {facts.flips} (segments, Raft stores, epoch files, checkpoints); {repaired}{found}"]
