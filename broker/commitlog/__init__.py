"""Segmented commit log: fixed-size files, self-delimiting messages, crash recovery (ARCHITECTURE §4).

``codec`` is the record format (core); ``segment`` and ``store`` are the files (shell).
"""

from broker.commitlog.codec import InvalidDraft, MessageDraft, StoredMessage
from broker.commitlog.store import AppendResult, CommitLog, FlushMode, RecoveryReport

__all__ = [
    "AppendResult",
    "CommitLog",
    "FlushMode",
    "InvalidDraft",
    "MessageDraft",
    "RecoveryReport",
    "StoredMessage",
]
