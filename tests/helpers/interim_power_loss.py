"""INTERIM test utility until ``mqha.chaos.power_loss.cut_unflushed`` (issue 25, helper H3) exists: cut a
killed broker's commit log back to a given offset, as a power cut that lost the un-fsynced tail would.

Swap for H3's function once merged: ``cut_unflushed`` cuts back to the flushed offset its checkpoint
records; tests here cut to an explicit message boundary so that the lost range is known exactly. Only
for a broker that is not running (SIGKILLed first). The confirm-offset checkpoint is left as it is (it
is rewritten in place every 200 ms, so after a kill it still says what the broker had confirmed).
"""

from __future__ import annotations

import os
from pathlib import Path

from mqha.broker.commitlog.checkpoint import CHECKPOINT_SIZE, Checkpoint, decode_checkpoint, encode_checkpoint
from mqha.broker.commitlog.types import CHECKPOINT_NAME


def cut_commit_log_to(store_root: Path, offset: int) -> int:
    """Zero ``<store_root>/commitlog`` from ``offset`` on, delete later segments, mark the checkpoint
    DIRTY with flushed offset ``offset``; returns how many bytes were zeroed or deleted."""
    directory = store_root / "commitlog"
    checkpoint_path = directory / CHECKPOINT_NAME
    checkpoint = decode_checkpoint(checkpoint_path.read_bytes()[: CHECKPOINT_SIZE + 1])
    assert checkpoint is not None, "unreadable commit-log checkpoint"
    size = checkpoint.segment_size
    removed = 0
    for path in sorted(p for p in directory.iterdir() if p.name.isdigit()):
        base = int(path.name)
        if base >= offset and base > 0:
            removed += path.stat().st_size
            path.unlink()
        elif base <= offset < base + size:
            with open(path, "r+b") as handle:
                handle.seek(offset - base)
                length = size - (offset - base)
                handle.write(bytes(length))
                removed += length
                handle.flush()
                os.fsync(handle.fileno())
    checkpoint_path.write_bytes(encode_checkpoint(Checkpoint(False, size, offset)))
    return removed
