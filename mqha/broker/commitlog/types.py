"""The commit log's value types and file names (see ``store``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import Enum
from typing import NamedTuple

from mqha.broker.commitlog.segment import Segment, SpareFile

CHECKPOINT_NAME = "checkpoint"
MIN_SEGMENT_SIZE = 256


class FlushMode(Enum):
    """When appended bytes are fsynced; names as RocketMQ's ``flushDiskType``."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class AppendResult(NamedTuple):
    """Where an appended message went: its offset and size, its id and its store timestamp."""

    offset: int
    size: int
    msg_id: str
    store_ts: int


class RecoveryReport(NamedTuple):
    """What ``open`` found; kept on the log as ``recovery`` for logs, metrics and tests."""

    clean: bool  # the clean-shutdown path was taken
    verified_from: int  # global offset where full verification started
    verified_bytes: int
    cut_offset: int | None  # where bytes were cut, None if nothing was
    cut_reason: str
    deleted_files: tuple[str, ...]


class CommitLogState:
    """Declares the state ``CommitLog.__init__`` sets, for the classes ``CommitLog`` is made of."""

    directory: str
    segment_size: int
    flush_mode: FlushMode
    flush_interval_ms: int
    max_message_size: int
    recovery: RecoveryReport
    _segments: list[Segment]
    _spare: SpareFile
    _min: int
    _max: int
    _flushed: int
    _checkpointed: int
    _bad: dict[int, str]  # damaged records found (offset -> why), until repaired or cut
    _checkpoint_synced: bool
    _new_names: bool
    _lock: threading.Lock
    _flush_lock: threading.Lock
    _checkpoint_fd: int
    _closed: bool
    _stop: threading.Event
    _clock: Callable[[], int]
