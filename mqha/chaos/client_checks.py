"""What the clients of a chaos run saw, checked beside the no-loss verdict (core).

Pure: the runner's send results and recorded reads in, counts out (``mqha.chaos.verdict`` prints
them and fails a run on every one but the unavailability outside faults):

- *unread*: an acknowledged message still in its group's final master log that the group's consumer
  never delivered, although it read up to the end of that log (consumer completeness);
- *out of order*: two acknowledged sends of one producer (one send loop: it waits for each answer
  before the next send), both still in the final log, whose offsets do not grow in the order they
  were sent;
- *lost controller writes*: a topic the controller-write workload (``mqha.chaos.controller_writes``)
  had acknowledged that the final state does not hold;
- *unavailability outside faults*: a stretch longer than ``UNAVAILABLE_AFTER`` seconds without any
  acknowledged send on a group that no fault touched at the time (reported, not a failure: a shared
  machine stalls too);
- *not served during a controller-only fault*: a fault that hits only controllers (every one of them
  down, a Raft partition, packet loss between them, one killed or wiped, ...; from the injection
  until the cluster is whole again) must not disturb the data plane: a stretch longer than
  ``UNAVAILABLE_AFTER`` without an acknowledged send of a group that no other fault touched, which
  began during the fault (the group was being served when the controllers were hit), and in which a
  put of the group was turned away (an attempt refused, timed out or without a route, or a send that
  ended without ``PUT_OK``), fails the run. A stretch in which every put was merely waiting for its
  answer is a stall of the machine, as outside the faults, and not counted.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from mqha.client.results import SendResult

PROBE_PREFIX = "chaos-probe-"  # the controller-write workload's topics: chaos-probe-<n>
UNAVAILABLE_AFTER = 1.0  # seconds without an ack that count as a window
FAULT_MARGIN = 2.0  # seconds after a fault's end (whole again) that still belong to it


def unread_acks(
    sends: Iterable[SendResult],
    final_logs: Mapping[str, Mapping[int, str]],
    read_ids: Mapping[str, set[str]],
) -> list[SendResult]:
    """Acknowledged sends stored at their offset in their group's final master log whose msgId the
    group's consumer never delivered."""
    return [
        s
        for s in sends
        if s.ok
        and s.offset is not None
        and final_logs.get(s.broker_name, {}).get(s.offset) == s.msg_id
        and s.msg_id not in read_ids.get(s.broker_name, ())
    ]


def out_of_order(
    sequences: Iterable[Sequence[SendResult]], final_logs: Mapping[str, Mapping[int, str]]
) -> int:
    """Pairs of consecutive acknowledged sends of one producer, both in their final master log, whose
    offsets do not grow (a lost ack is the no-loss check's business: after a declared loss, later
    sends are stored below it)."""
    bad = 0
    for sequence in sequences:
        last: int | None = None
        for s in sequence:
            if not s.ok or s.offset is None or final_logs.get(s.broker_name, {}).get(s.offset) != s.msg_id:
                continue
            if last is not None and s.offset <= last:
                bad += 1
            last = s.offset
    return bad


@dataclass(frozen=True)
class Window:
    """A stretch without acknowledged sends on one group (``time.monotonic`` seconds)."""

    group: str
    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start


def unavailable_outside_faults(
    sends: Iterable[SendResult],
    faults: Iterable[tuple[Sequence[str], float, float]],
    after: float = UNAVAILABLE_AFTER,
    margin: float = FAULT_MARGIN,
) -> list[Window]:
    """Gaps over ``after`` seconds between consecutive acks of a group that overlap no fault of that
    group (``faults``: the groups a fault touched, its injection and its end)."""
    acks: dict[str, list[float]] = {}
    for s in sends:
        if s.ok:
            acks.setdefault(s.broker_name, []).append(s.completed_at)
    spans: dict[str, list[tuple[float, float]]] = {}
    for groups, start, end in faults:
        for group in groups:
            spans.setdefault(group, []).append((start, end + margin))
    out = []
    for group, times in sorted(acks.items()):
        times.sort()
        for before, after_ack in itertools.pairwise(times):
            if after_ack - before <= after:
                continue
            if not any(start < after_ack and before < end for start, end in spans.get(group, ())):
                out.append(Window(group, before, after_ack))
    return out


def not_served(
    sends: Sequence[SendResult],
    windows: Iterable[tuple[Sequence[str], float, float]],
    others: Iterable[tuple[Sequence[str], float, float]] = (),
    after: float = UNAVAILABLE_AFTER,
    margin: float = FAULT_MARGIN,
) -> list[Window]:
    """Stretches over ``after`` seconds between consecutive acks of a group that begin in one of its
    ``windows`` (groups, start, end: a controller-only fault), or at most ``after`` before it, in a
    window none of the ``others`` faults of that group overlaps (with ``margin`` after their end), and
    in which some put of the group was turned away: a failed attempt (``first_error_at``) or a send
    that ended without ``PUT_OK`` inside it. (A stretch that began earlier was there before the
    controllers were hit: a previous fault's, whose effects may outlast its end and margin.)"""
    spans: dict[str, list[tuple[float, float]]] = {}
    for groups, start, end in windows:
        for group in groups:
            spans.setdefault(group, []).append((start, end))
    busy: dict[str, list[tuple[float, float]]] = {}
    for groups, start, end in others:
        for group in groups:
            busy.setdefault(group, []).append((start, end + margin))
    acks: dict[str, list[float]] = {}
    turned_away: dict[str, list[float]] = {}  # when a put of the group was turned away
    for s in sends:
        if s.broker_name not in spans:
            continue
        if s.ok:
            acks.setdefault(s.broker_name, []).append(s.completed_at)
        else:
            turned_away.setdefault(s.broker_name, []).append(s.completed_at)
        if s.first_error_at is not None:
            turned_away.setdefault(s.broker_name, []).append(s.first_error_at)
    out = []
    for group, windows_of_group in sorted(spans.items()):
        healthy = [
            (start, end)
            for start, end in windows_of_group
            if not any(b_start < end and start < b_end for b_start, b_end in busy.get(group, ()))
        ]
        refusals = sorted(turned_away.get(group, ()))
        for before, after_ack in itertools.pairwise(sorted(acks.get(group, ()))):
            if after_ack - before <= after:
                continue
            if not any(start - after <= before < end for start, end in healthy):
                continue
            first = bisect.bisect_right(refusals, before)
            if first < len(refusals) and refusals[first] < after_ack:
                out.append(Window(group, before, after_ack))
    return out


def not_injected(asked: Sequence[str], reached: Iterable[str], injected: Iterable[str]) -> dict[str, str]:
    """Each asked fault kind that was never injected, with why: the run reached steps of it and
    skipped them all, or the duration ended before its turn."""
    done, seen = set(injected), set(reached)
    return {
        kind: (
            "every step of it was skipped (no target found)"
            if kind in seen
            else "the duration ended before its turn (run longer)"
        )
        for kind in asked
        if kind not in done
    }


@dataclass
class WriteLog:
    """What the controller-write workload saw: its topic names by outcome."""

    acked: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def lost_writes(log: WriteLog, present: set[str]) -> list[str]:
    """Acknowledged probe topics the final state does not hold, in write order."""
    return sorted(set(log.acked) - present, key=lambda name: int(name.rsplit("-", 1)[1]))
