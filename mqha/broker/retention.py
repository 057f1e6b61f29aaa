"""Which commit-log segments go, and whether the disk is full (core: pure, no IO, no clock).

RocketMQ's store rules with its keys (docs/architecture.md §4.2): a pass runs every
``cleanResourceInterval``; it deletes when the hour is one of ``deleteWhen`` or the disk is more than
``diskMaxUsedSpaceRatio`` % used. It deletes segments whose last write is older than
``fileReservedTime`` hours; above ``diskSpaceCleanForciblyRatio`` % (with ``cleanFileForciblyEnable``)
the oldest go even unexpired. Above ``diskSpaceWarningLevelRatio`` % the disk is *full*: puts are
refused until usage falls back under ``diskSpaceCleanForciblyRatio`` % (hysteresis, as RocketMQ's
disk-full flag). Only a prefix of the log goes (the log start stays contiguous), never the active
(last) segment, at most ``BATCH_MAX`` per pass; the segment a reader is in is kept until it has been
due for ``destroyMapedFileIntervalForcibly`` ms, and nothing after it goes first.
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
class Segment:
    """What a pass knows of one segment: where it starts and when it was last written."""

    base_offset: int
    last_modified_ms: int


@dataclass(frozen=True)
class Pass:
    """One retention pass's answer."""

    delete: tuple[int, ...]  # base offsets to delete, oldest first (a prefix of the log)
    due_since: Mapping[int, int] = field(default_factory=dict)  # segments due but being read: since when
    reason: str = ""


def retention_pass(
    segments: Sequence[Segment],
    *,
    now_ms: int,
    hour: int,
    state: DiskState,
    reading_from: int | None,
    due_since: Mapping[int, int],
    settings: RetentionSettings,
) -> Pass:
    """Which segments to delete now. ``segments`` oldest first, the last one active; ``reading_from``:
    the lowest offset a replica's catch-up or a consumer read is reading (None: nobody); ``due_since``:
    the previous pass's ``Pass.due_since``."""
    timeup = hour in settings.delete_hours
    if not timeup and state is DiskState.OK:
        return Pass(())
    forcibly = settings.forcibly_enabled and state in (DiskState.CLEAN_FORCIBLY, DiskState.FULL)
    delete: list[int] = []
    still_due: dict[int, int] = {}
    for current, following in itertools.pairwise(segments):  # never the active segment
        if len(delete) >= BATCH_MAX:
            break
        expired = current.last_modified_ms + settings.reserved_ms <= now_ms
        if not (expired or forcibly):
            break
        # Only the segment the reader is in waits: once it went (forcibly), the reader's offset is gone
        # and the later segments need no timer of their own.
        if reading_from is not None and current.base_offset <= reading_from < following.base_offset:
            since = due_since.get(current.base_offset, now_ms)
            if now_ms - since < settings.destroy_after_ms:
                still_due[current.base_offset] = since
                break  # being read: kept a while; nothing after it may go before it
        delete.append(current.base_offset)
    why = "forcibly: disk " + state.value if forcibly else ("deleteWhen" if timeup else "disk " + state.value)
    return Pass(tuple(delete), still_due, why if delete else "")
