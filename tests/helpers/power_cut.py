"""A stand-in for ``mqha.chaos.power_loss.cut_unflushed`` (issue 25 is writing it): after a broker was
killed, make its commit log look as after a power cut -- everything past the flushed offset of
``commitlog/checkpoint`` (docs/architecture.md §9.1) never reached the disk.

Test-only and named so it can be swapped for the real one: ``cut_unflushed_for_test(store_root)``
zeroes the bytes of the segment holding the flushed offset from there on (segments are preallocated
and zero-filled, so this is what an un-synced page looks like after the cut) and deletes later
segments. Returns ``(flushed_offset, bytes_cut)``.
"""

from __future__ import annotations

import os
from pathlib import Path

from mqha.broker.commitlog.checkpoint import decode_checkpoint

_SEGMENT_NAME_DIGITS = 20


def cut_unflushed_for_test(store_root: Path) -> tuple[int, int]:
    log_dir = Path(store_root) / "commitlog"
    checkpoint_file = log_dir / "checkpoint"
    checkpoint = decode_checkpoint(checkpoint_file.read_bytes()) if checkpoint_file.exists() else None
    flushed = checkpoint.flushed_offset if checkpoint is not None else 0
    cut = 0
    segments = sorted(
        p for p in log_dir.iterdir() if p.name.isdigit() and len(p.name) == _SEGMENT_NAME_DIGITS
    )
    for segment in segments:
        base, size = int(segment.name), segment.stat().st_size
        if base + size <= flushed:
            continue
        if base > flushed:
            cut += sum(1 for b in segment.read_bytes() if b)  # the non-zero bytes that are lost
            segment.unlink()
            continue
        with open(segment, "r+b") as handle:
            handle.seek(flushed - base)
            tail = handle.read()
            cut += len(tail) - tail.count(0)
            handle.seek(flushed - base)
            handle.write(bytes(len(tail)))
            handle.flush()
            os.fsync(handle.fileno())
    return flushed, cut
