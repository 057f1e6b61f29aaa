"""The commit log's value types and file names (see ``store``)."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

CHECKPOINT_NAME = "checkpoint"
MIN_SEGMENT_SIZE = 256


class FlushMode(Enum):
    """When appended bytes are fsynced; names as RocketMQ's ``flushDiskType``."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class AppendResult(NamedTuple):
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
