"""Which commit-log segments go, and whether the disk is full (core: pure, no IO, no clock).

RocketMQ's store rules with its keys (docs/architecture.md §4.2): a pass runs every
``cleanResourceInterval``; it deletes when the hour is one of ``deleteWhen`` or the disk is more than
``diskMaxUsedSpaceRatio`` % used. It deletes segments whose last write is older than
``fileReservedTime`` hours; above ``diskSpaceCleanForciblyRatio`` % (with ``cleanFileForciblyEnable``)
the oldest go even unexpired. Above ``diskSpaceWarningLevelRatio`` % the disk is *full*: puts are
refused until usage falls back under ``diskSpaceCleanForciblyRatio`` % (hysteresis, as RocketMQ's
disk-full flag). Only a prefix of the log goes (the log start stays contiguous), never the active
(last) segment, at most ``BATCH_MAX`` per pass; the segment a reader is in is kept until it has been
due for ``destroyMapedFileIntervalForcibly`` ms (monotonic), and nothing after it goes first.

Clock steps (issue 45): a segment's last write is the later of its file's mtime and its newest record's
``storeTimestamp``, and "now" is the :class:`RetentionClock`, which follows the wall clock but never
runs faster than the monotonic clock and starts no later than the log's newest record: a forward step
of the wall clock (while running, or while stopped with nothing written since) never expires anything.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BATCH_MAX = 10  # RocketMQ's deleteFileBatchMax: segments one pass may delete
HOUR_MS = 3_600_000


class DiskState(enum.Enum):
    """How full the commit log's file system is, as the store acts on it."""

    OK = "OK"
    CLEAN = "CLEAN"  # above diskMaxUsedSpaceRatio: expired segments go at once, not only at deleteWhen
    CLEAN_FORCIBLY = "CLEAN_FORCIBLY"  # above diskSpaceCleanForciblyRatio: the oldest go even unexpired
    FULL = "FULL"  # above diskSpaceWarningLevelRatio (until back under the forcible ratio): puts refused


@dataclass(frozen=True)
class RetentionSettings:
    """The retention and full-disk keys, in the units the decisions use."""

    reserved_ms: int
    delete_hours: frozenset[int]
    max_used: float  # fractions of the file system
    clean_forcibly: float
    warning: float
    forcibly_enabled: bool
    destroy_after_ms: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any], delete_hours: frozenset[int]) -> RetentionSettings:
        return cls(
            reserved_ms=config["fileReservedTime"] * HOUR_MS,
            delete_hours=delete_hours,
            max_used=config["diskMaxUsedSpaceRatio"] / 100,
            clean_forcibly=config["diskSpaceCleanForciblyRatio"] / 100,
            warning=config["diskSpaceWarningLevelRatio"] / 100,
            forcibly_enabled=config["cleanFileForciblyEnable"],
            destroy_after_ms=config["destroyMapedFileIntervalForcibly"],
        )


def disk_state(used: float, was_full: bool, settings: RetentionSettings) -> DiskState:
    """The state for a file system ``used`` (0..1) full; ``was_full``: the previous state was FULL."""
    if used > settings.warning or (was_full and used > settings.clean_forcibly):
        return DiskState.FULL
    if used > settings.clean_forcibly:
        return DiskState.CLEAN_FORCIBLY
    if used > settings.max_used:
        return DiskState.CLEAN
    return DiskState.OK


@dataclass(frozen=True)
class RetentionClock:
    """Retention's wall clock: ``now_ms`` (wall-clock ms) as of the monotonic instant ``mono_ms``."""

    now_ms: int
    mono_ms: int

    @classmethod
    def start(cls, wall_ms: int, mono_ms: int, newest_record_ms: int | None) -> RetentionClock:
        """At a process start: the wall clock, but no later than the log's newest record (the time the
        broker was down, or idle before it stopped, is not counted: a clock stepped forward meanwhile
        would look like it)."""
        now = wall_ms if newest_record_ms is None else min(wall_ms, newest_record_ms)
        return cls(now, mono_ms)

    def advance(self, wall_ms: int, mono_ms: int) -> RetentionClock:
        """The clock at the next reading: the wall clock, but never further ahead than the monotonic
        clock went (a forward step is not taken; a backward one is)."""
        ceiling = self.now_ms + max(0, mono_ms - self.mono_ms)
        return RetentionClock(min(wall_ms, ceiling), mono_ms)


@dataclass(frozen=True)
class Segment:
    """What a pass knows of one segment: where it starts and when it was last written.

    ``newest_record_ms``: the ``storeTimestamp`` of its newest record; None when not read yet (the pass
    then judges it by ``modified_ms`` alone and names it in ``Pass.unread``: the shell reads it and asks
    again, so only segments the file times already call expired are ever read)."""

    base_offset: int
    modified_ms: int  # the file's mtime
    newest_record_ms: int | None = None

    @property
    def written_ms(self) -> int:
        """When it was last written: the later of its mtime and its newest record's store time."""
        record = self.newest_record_ms
        return self.modified_ms if record is None else max(self.modified_ms, record)


@dataclass(frozen=True)
class Pass:
    """One retention pass's answer."""

    delete: tuple[int, ...]  # base offsets to delete, oldest first (a prefix of the log)
    due_since: Mapping[int, int] = field(default_factory=dict)  # due but being read: since (monotonic ms)
    reason: str = ""
    unread: tuple[int, ...] = ()  # segments in ``delete`` as expired whose record time was not read


def retention_pass(
    segments: Sequence[Segment],
    *,
    now_ms: int,
    mono_ms: int,
    hour: int,
    state: DiskState,
    reading_from: int | None,
    due_since: Mapping[int, int],
    settings: RetentionSettings,
) -> Pass:
    """Which segments to delete now. ``segments`` oldest first, the last one active; ``now_ms``: the
    :class:`RetentionClock`; ``mono_ms``: the monotonic clock; ``hour``: the local hour of ``now_ms``;
    ``reading_from``: the lowest offset a replica's catch-up or a consumer read is reading (None:
    nobody); ``due_since``: the previous pass's ``Pass.due_since``."""
    timeup = hour in settings.delete_hours
    if not timeup and state is DiskState.OK:
        return Pass(())
    forcibly = settings.forcibly_enabled and state in (DiskState.CLEAN_FORCIBLY, DiskState.FULL)
    delete: list[int] = []
    unread: list[int] = []
    still_due: dict[int, int] = {}
    for current, following in itertools.pairwise(segments):  # never the active segment
        if len(delete) >= BATCH_MAX:
            break
        expired = current.written_ms + settings.reserved_ms <= now_ms
        if not (expired or forcibly):
            break
        # Only the segment the reader is in waits: once it went (forcibly), the reader's offset is gone
        # and the later segments need no timer of their own.
        if reading_from is not None and current.base_offset <= reading_from < following.base_offset:
            since = due_since.get(current.base_offset, mono_ms)
            if mono_ms - since < settings.destroy_after_ms:
                still_due[current.base_offset] = since
                break  # being read: kept a while; nothing after it may go before it
        delete.append(current.base_offset)
        if current.newest_record_ms is None and not forcibly:
            unread.append(current.base_offset)
    why = "forcibly: disk " + state.value if forcibly else ("deleteWhen" if timeup else "disk " + state.value)
    return Pass(tuple(delete), still_due, why if delete else "", tuple(unread))
