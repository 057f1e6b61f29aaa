"""The ``power-loss`` fault: a stopped broker's store as a power cut would leave it (shell: files).

A power cut loses what the kernel had not written to the disk yet. For the commit log that is exactly
what was not fsynced, and the log records how far it fsynced: every fsync writes the offset it made
durable into ``commitlog/checkpoint`` before any put it covers is answered
(``mqha.broker.commitlog.flushing``). :func:`cut_unflushed` runs on the store of a broker that was
SIGKILLed (the process is gone, the kernel still holds its writes in the page cache) and removes from
the commit log everything past that *flushed offset* F:

* the segment holding F keeps its bytes below F and is zeroed from F to its end (the preallocated
  file's zeros, as if the pages written after the last fsync never reached the disk);
* segments whose base is F or more are deleted: they were created after the last flush, and a new
  segment's name is made durable only by the flush that first covers its data (docs/architecture.md
  §9.1), so after a power cut the file may be gone; had its name been durable it would hold zeros,
  which recovery reads as the same log end;
* nothing below F is touched: those bytes were fsynced, and a power cut does not lose fsynced data.

Every other file of the store is kept as the process left it, each a possible outcome of a real cut:

* ``commitlog/checkpoint``: kept (it is what F is read from). Its newest value may be only in the page
  cache (a pwrite per fsync, fdatasynced by the flusher every interval); after a real cut the disk may
  hold an older, lower value, and recovery then only verifies more of the log;
* ``spare.segment`` (a preallocated next segment): kept; recovery deletes it whatever it holds;
* ``epochFileCheckpoint`` (+ ``.bak``) and ``brokerIdentity`` (+ ``-temp``): written through a temp
  file, fsync, rename and a directory fsync before they are used, so what the process left is durable;
  an epoch entry may start beyond F (a master wrote it at its log end before that end was flushed):
  recovery drops such entries, as after a real cut;
* ``confirmOffsetCheckpoint``: one pwrite in place per change, fsynced only when a truncation lowers
  it; kept as the process left it: the kernel may have written the page back before the cut (it does
  so within seconds), and that is the case in which the confirm offset is *ahead* of the recovered log,
  so the broker can tell it lost data it had confirmed (issue 25's "lossy" recovery). The other
  outcome, an older value, is not simulated;
* ``history.db`` (SQLite, WAL): kept. It is the run's record of what the broker did, read by the
  checker, not state the broker acts on; transactions written before the cut may or may not have
  reached the disk, and keeping them keeps the checker's view complete.

The caller must make sure no process has the store open (SIGKILL and reap the broker first).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mqha.broker.commitlog.checkpoint import CHECKPOINT_SIZE, decode_checkpoint
from mqha.broker.commitlog.codec import MESSAGE_MAGIC, decode_message, unit_size_at
from mqha.broker.commitlog.scanning import ScanStop, scan_units
from mqha.broker.commitlog.segment import parse_segment_name, segment_name
from mqha.broker.commitlog.types import CHECKPOINT_NAME
from mqha.broker.confirm_checkpoint import CONFIRM_CHECKPOINT_NAME, ConfirmOffsetCheckpoint
from mqha.durable import fsync_directory

COMMIT_LOG_DIR = "commitlog"  # storePathCommitLog's default under storePathRootDir
_ZERO_CHUNK = 1 << 20


@dataclass(frozen=True)
class LostRecord:
    """A message the cut removed: where it was and its msgId."""

    offset: int
    size: int
    msg_id: str


@dataclass(frozen=True)
class CutReport:
    """What :func:`cut_unflushed` found and did."""

    store_root: Path
    flushed_offset: int  # F: every byte below it was fsynced (0 when the log never recorded a flush)
    clean: bool  # the checkpoint said CLEAN: the broker was stopped cleanly, nothing was unflushed
    log_end: int  # where valid data ended before the cut (F when nothing was unflushed)
    zeroed_bytes: int  # bytes at or after F in F's segment that were not zero
    removed: tuple[str, ...]  # segment files deleted (names)
    lost: tuple[LostRecord, ...]  # the messages that were between F and the log end
    confirm_offset: int  # the confirm-offset checkpoint as kept (-1: none or unreadable)

    @property
    def cut(self) -> bool:
        return bool(self.zeroed_bytes or self.removed)

    def describe(self) -> str:
        if not self.cut:
            return f"nothing unflushed (flushed offset {self.flushed_offset})"
        return (
            f"cut [{self.flushed_offset}, {self.log_end}): {len(self.lost)} message(s), "
            f"{self.zeroed_bytes} byte(s) zeroed, {len(self.removed)} segment file(s) removed; "
            f"confirm offset checkpoint {self.confirm_offset}"
        )


def _segments(directory: Path) -> list[int]:
    bases = []
    for name in os.listdir(directory):
        base = parse_segment_name(name)
        if base is not None:
            bases.append(base)
    return sorted(bases)


def _flushed(directory: Path) -> tuple[int, bool, int]:
    """(flushed offset, clean flag, segment size or 0) from the checkpoint; a missing checkpoint means
    nothing was ever recorded as flushed. A checkpoint that does not decode is refused: a killed
    process never leaves one (its single pwrite is atomic against the kill)."""
    try:
        data = (directory / CHECKPOINT_NAME).read_bytes()
    except FileNotFoundError:
        return 0, False, 0
    checkpoint = decode_checkpoint(data[: CHECKPOINT_SIZE + 1])
    if checkpoint is None:
        raise ValueError(f"{directory / CHECKPOINT_NAME}: not a readable commit log checkpoint")
    return checkpoint.flushed_offset, checkpoint.clean, checkpoint.segment_size


def _walk(data: bytes, base: int, start: int, segment_size: int) -> tuple[int, bool, list[LostRecord]]:
    """The valid messages of one segment's bytes from ``start`` (relative): where valid data ends
    (global), whether it ends with the segment's blank marker (the log goes on in the next one), and
    the messages."""
    scan = scan_units(data, start, len(data), base, base + segment_size)
    found = []
    pos = start
    while pos < scan.end:
        size, magic = unit_size_at(data, pos)
        if magic == MESSAGE_MAGIC:
            message = decode_message(data, pos, base_offset=base)  # scan_units verified it
            found.append(LostRecord(message.offset, message.size, message.msg_id))
        pos += size
    return base + scan.end, scan.stop is ScanStop.BLANK, found


def _zero_from(path: Path, start: int) -> int:
    """Zero ``path`` from ``start`` to its end, writing only over non-zero chunks; the count of
    non-zero bytes found."""
    found = 0
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        pos = start
        while pos < size:
            chunk = os.pread(f.fileno(), min(_ZERO_CHUNK, size - pos), pos)
            if chunk.count(0) != len(chunk):
                found += len(chunk) - chunk.count(0)
                os.pwrite(f.fileno(), bytes(len(chunk)), pos)
            pos += len(chunk)
    return found


def cut_unflushed(store_root: Path, commit_log_dir: Path | None = None) -> CutReport:
    """Lose exactly the un-fsynced commit-log writes of a stopped broker's store (module docstring).

    ``commit_log_dir``: ``storePathCommitLog`` when it is not ``<store_root>/commitlog``."""
    store_root = Path(store_root)
    directory = Path(commit_log_dir) if commit_log_dir is not None else store_root / COMMIT_LOG_DIR
    confirm = ConfirmOffsetCheckpoint(str(store_root / CONFIRM_CHECKPOINT_NAME)).load()
    if not directory.is_dir():
        return CutReport(store_root, 0, False, 0, 0, (), (), confirm)
    flushed, clean, segment_size = _flushed(directory)
    bases = _segments(directory)
    if bases and not segment_size:
        segment_size = os.path.getsize(directory / segment_name(bases[-1]))
    log_end = flushed
    walking = True  # the valid data after F goes on into this segment
    lost: list[LostRecord] = []
    zeroed = 0
    removed: list[str] = []
    for base in bases:
        if base + segment_size <= flushed:
            continue  # wholly fsynced
        path = directory / segment_name(base)
        start = max(0, flushed - base)
        if walking:
            log_end, walking, found = _walk(path.read_bytes(), base, start, segment_size)
            lost += found
        if base < flushed:
            zeroed += _zero_from(path, start)
        else:
            removed.append(path.name)
    for name in reversed(removed):  # last first, as recovery deletes: never a gap in the names
        os.unlink(directory / name)
    if removed:
        fsync_directory(str(directory))
    end = max(log_end, flushed)
    return CutReport(store_root, flushed, clean, end, zeroed, tuple(removed), tuple(lost), confirm)
