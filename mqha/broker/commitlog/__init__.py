"""Segmented commit log: fixed-size files, self-delimiting messages, crash recovery (docs/architecture.md §4).

``codec`` is the record format (core); ``segment`` and ``store`` are the files (shell).
"""

from mqha.broker.commitlog.codec import InvalidDraft, MessageDraft, StoredMessage
from mqha.broker.commitlog.store import CommitLog
from mqha.broker.commitlog.types import AppendResult, FlushMode, RecoveryReport

__all__ = [
    "AppendResult",
    "CommitLog",
    "FlushMode",
    "InvalidDraft",
    "MessageDraft",
    "RecoveryReport",
    "StoredMessage",
]
