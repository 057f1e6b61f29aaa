"""Segmented commit log: fixed-size files, self-delimiting messages, crash recovery (docs/architecture.md §4).

Cores: ``codec`` (the record format), ``scanning`` (walking a run of units), ``checkpoint`` (the
checkpoint file's format). Shells: ``segment`` (one file), ``store`` (the log) with ``recovery``,
``reads`` and ``flushing`` (its parts), ``native`` (loads the compiled fast paths).
"""

from mqha.broker.commitlog.codec import InvalidDraft, MessageDraft, StoredMessage
from mqha.broker.commitlog.reads import OffsetTooSmall
from mqha.broker.commitlog.store import CommitLog
from mqha.broker.commitlog.types import AppendResult, FlushMode, RecoveryReport
from mqha.errors import CorruptRecordError

__all__ = [
    "AppendResult",
    "CommitLog",
    "CorruptRecordError",
    "FlushMode",
    "InvalidDraft",
    "MessageDraft",
    "OffsetTooSmall",
    "RecoveryReport",
    "StoredMessage",
]
