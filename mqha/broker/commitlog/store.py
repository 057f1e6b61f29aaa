"""The broker's commit log: segmented files, appends, reads for consumers and HA, truncation, recovery.

SHELL. The record format and every byte-level check live in ``codec`` (core); this module orders file
operations; :class:`CommitLog` is assembled from one class per job: opening and recovery
(``recovery.py``), reads (``reads.py``), fsyncs (``flushing.py``), and appends and cuts (here). Offsets
are global physical offsets: segment ``k`` holds ``[k * size, (k + 1) * size)``.

Directory contents: segment files named by their 20-digit base offset, ``checkpoint`` (32 bytes,
see ``codec.Checkpoint``) and, once the log has filled half a segment, ``spare.segment``: the next
segment's file, preallocated in the background and renamed into place at the roll-over
(``segment.SpareFile``). Anything else, a base offset that is not a multiple of the segment size, a gap
between bases, or a non-last file whose size is not the segment size makes ``open`` refuse with one
``ForeignFileError``/``CorruptFileError`` naming the file, before anything is changed or deleted.

Durability
    ``ASYNC_FLUSH``: ``append`` returns once the bytes are in the page cache (a killed process loses
    nothing; a machine crash loses at most about ``flush_interval_ms``); a flusher thread fsyncs every
    ``flush_interval_ms``. ``SYNC_FLUSH``: ``append`` fsyncs before returning; concurrent appenders
    share fsyncs (group commit). Each fsync writes the offset it made durable into the checkpoint
    ("flushed offset") before ``flushed_offset`` shows it (``flushing.py``). A new segment's name is
    made durable by the flush that first covers its data, not at creation: a roll-over costs no fsync.

Recovery (``open``), two paths
    * Clean shutdown (checkpoint says CLEAN: ``close`` flushed everything, then wrote it): the segments
      before the last are trusted as they are; the last segment is verified in full (every unit's size,
      magic, physicalOffset, body and record CRC), like the reference's normal recovery but with one
      file instead of three because our clean flag is only written after a complete fsync.
    * Crash (no checkpoint, a torn one, or DIRTY): verification starts at the segment holding the
      checkpoint's flushed offset (bytes below it were fsynced before the checkpoint was written) and
      runs to the end, so a segment whose tail never reached the disk while a later one did is caught.
    Older segments are not re-read at open; every ``read`` still checks the CRCs of what it returns.
    Verification stops at the first torn unit (short), bad magic, out-of-range size, wrong
    physicalOffset or CRC mismatch; max_offset becomes the end of the last valid unit. Any non-zero byte
    after that point in its segment is zeroed and later segment files are deleted (a reopened log must
    never see old bytes as messages), with one WARNING naming the file and the offset. Then the verified
    segments are fsynced and the checkpoint is rewritten as DIRTY with flushed offset = max_offset
    before anything is appended, so a crash from here on takes the crash path.

Full disk: segments are preallocated (``segment.py``): ``ENOSPC`` comes only from creating one, never as
``SIGBUS`` from a mapped write; a batch's segments are created before any byte of it is written.

Truncation lowers the checkpoint's flushed offset (durably) before it cuts, so crash recovery never
trusts bytes that a truncation removed and a later append replaced; it zeroes the cut part of its
segment (a whole segment from its base is deleted instead) and deletes later files last-first, so a
crash part-way leaves a prefix of the old log and never a gap between file names.

Speed (``tests/bench/test_commitlog_bench.py``, docs/performance.md §6): the per-message loops (encoding
appends, walking units on recovery, reads for the HA master and replicated batches) run compiled when
``codec``'s native module is built, and batches pay one lock, one write and one fsync per segment. A
roll-over takes the spare file, so the append that crosses a segment end does not wait for the file
system to allocate the next one.

Threads: one lock guards the segment list and offsets; a second lock (taken first) serialises fsyncs
against truncation, deletion and close, so the flusher never fsyncs a file being closed. Reads copy
bytes out of the maps; no memoryview of a map escapes a call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from types import TracebackType

from mqha.broker.commitlog.checkpoint import (
    Checkpoint,
)
from mqha.broker.commitlog.codec import (
    BLANK_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    InvalidDraft,
    MessageDraft,
    encode_blank,
    encode_message,
    encode_run,
)
from mqha.broker.commitlog.flushing import CommitLogFlushing
from mqha.broker.commitlog.integrity import CommitLogIntegrity
from mqha.broker.commitlog.recovery import CommitLogRecovery
from mqha.broker.commitlog.scanning import (
    ScanStop,
    message_walk,
    scan_units,
)
from mqha.broker.commitlog.segment import Segment, SpareFile
from mqha.broker.commitlog.types import (
    MIN_SEGMENT_SIZE,
    AppendResult,
    FlushMode,
    RecoveryReport,
)
from mqha.clock import wall_ms
from mqha.durable import fsync_directory
from mqha.errors import NotAlignedError, RemoteProtocolError, StorageError

log = logging.getLogger(__name__)


class CommitLog(CommitLogRecovery, CommitLogIntegrity, CommitLogFlushing):
    """A segmented commit log in one directory. Use ``CommitLog.open``; close it (or use ``with``)."""

    def __init__(
        self,
        directory: str,
        segment_size: int,
        *,
        flush_mode: FlushMode,
        flush_interval_ms: int,
        max_message_size: int,
        clock: Callable[[], int],
    ) -> None:
        self.directory = directory
        self._clock = clock
        self.segment_size = segment_size
        self.flush_mode = flush_mode
        self.flush_interval_ms = flush_interval_ms
        # A message must fit an empty segment with room left for the blank marker.
        self.max_message_size = min(max_message_size, segment_size - BLANK_SIZE)
        self._segments: list[Segment] = []
        self._spare = SpareFile(directory, segment_size)
        self._spare_due = segment_size // 2  # the log end at which to prepare the next segment's file
        self._min = 0
        self._max = 0
        self._flushed = 0  # every byte below is durable
        self._bad: dict[int, str] = {}  # damaged records found (offset -> why): reads.CorruptRecordError
        self._checkpointed, self._checkpoint_synced = -1, False  # last flushed offset written; fdatasynced
        self._new_names = False  # a segment was created since the directory was last fsynced
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # taken before _lock, never after it
        self._checkpoint_fd = -1
        self._closed = False
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        # msgIds: 16 random hex digits per open log + a 16-digit counter (unique, cheap, sortable).
        self._id_prefix = os.urandom(8).hex().upper()
        self._next_id = 0
        self.recovery = RecoveryReport(True, 0, 0, None, "", ())

    # --- opening and recovery --------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str,
        segment_size: int,
        flush_mode: FlushMode = FlushMode.ASYNC_FLUSH,
        flush_interval_ms: int = 500,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> CommitLog:
        """Open (creating the directory if needed) and recover the log in ``directory``. ``clock`` gives
        the store timestamp in wall-clock ms (tests pass a fixed one to get reproducible bytes)."""
        if segment_size < MIN_SEGMENT_SIZE:
            raise ValueError(f"segment_size {segment_size} is below the minimum {MIN_SEGMENT_SIZE}")
        if flush_interval_ms <= 0:
            raise ValueError(f"flush_interval_ms must be positive, got {flush_interval_ms}")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self = cls(
            directory,
            segment_size,
            flush_mode=flush_mode,
            flush_interval_ms=flush_interval_ms,
            max_message_size=max_message_size,
            clock=clock,
        )
        try:
            self._recover()
        except BaseException:
            self._close_files()
            raise
        self._spare.discard_leftover()
        self._spare_due = self._half_of(self._max)
        self._flusher = threading.Thread(
            target=self._flusher_loop, name=f"commitlog-flush:{directory}", daemon=True
        )
        self._flusher.start()
        return self

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    # --- offsets ---------------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self._min

    @property
    def max_offset(self) -> int:
        """End of the last valid unit: where the next append goes."""
        return self._max

    @property
    def flushed_offset(self) -> int:
        """Every byte below this offset has been fsynced."""
        return self._flushed

    def _segment_for(self, offset: int) -> Segment:
        """The existing segment holding ``offset`` (caller holds the lock and checked the range)."""
        return self._segments[(offset - self._segments[0].base) // self.segment_size]

    def _not_aligned(self, offset: int, why: str) -> NotAlignedError:
        path = self._segment_for(offset).path if self._min <= offset < self._max else self.directory
        return NotAlignedError(path, f"offset {offset}: {why} (log holds [{self._min}, {self._max}))")

    # --- appending -------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(self.directory, "commit log is closed")

    def _tail_segment(self, start: int) -> Segment:
        """The segment an append at ``start`` (== max, or a segment base) writes to, created if needed
        (from the spare file when one is ready)."""
        if self._segments and start < self._segments[-1].end:
            return self._segments[-1]
        base = start - start % self.segment_size
        spare = self._spare.take()
        if spare is not None:
            segment = Segment.adopt(spare, self.directory, base, self.segment_size)
        else:
            segment = Segment.create(self.directory, base, self.segment_size)
        self._new_names = True  # the next flush makes the name durable before the data in it
        self._segments.append(segment)
        if len(self._segments) == 1:
            self._min = segment.base
        return segment

    def _segments_for(self, starts: Sequence[int]) -> list[Segment]:
        """The segments that appends at ``starts`` (the runs of one batch, in order) write to, the new
        ones created before any byte is written: a creation that fails (``ENOSPC`` on a full disk)
        deletes the files this call created and raises, leaving the log exactly as it was, so a batch
        is never half stored (caller holds the lock)."""
        count, old_min = len(self._segments), self._min
        try:
            return [self._tail_segment(start) for start in starts]
        except BaseException:
            for segment in self._segments[count:]:
                with contextlib.suppress(OSError):
                    segment.delete()
            del self._segments[count:]
            self._min = old_min
            raise

    def _half_of(self, offset: int) -> int:
        """The middle of the segment holding ``offset``: once the log reaches it, the next segment's
        file is prepared (a log that never gets that far never costs a spare file)."""
        return offset - offset % self.segment_size + self.segment_size // 2

    def _maybe_prepare_spare(self) -> None:
        if self._max >= self._spare_due:
            self._spare.prepare()
            self._spare_due = self._half_of(self._max) + self.segment_size  # the next segment's middle

    def append(self, draft: MessageDraft) -> AppendResult:
        """Store one message; raises ``InvalidDraft`` (a ``LocalProtocolError``) for a bad draft."""
        return self._append([draft])[0]

    def append_batch(self, drafts: Sequence[MessageDraft]) -> list[AppendResult]:
        """Store messages in order with one write per segment touched and (SYNC_FLUSH) one fsync.
        All or nothing: every draft is encoded before anything is written, so a bad draft (``InvalidDraft``,
        naming its index) leaves the log unchanged."""
        return self._append(drafts if type(drafts) is list else list(drafts)) if drafts else []

    def _append(self, drafts: list[MessageDraft]) -> list[AppendResult]:
        store_ts = self._clock()
        with self._lock:
            self._check_open()
            runs, results = self._encode(drafts, store_ts)
            targets = self._segments_for([run_start for run_start, _ in runs])
            for (run_start, run_parts), segment in zip(runs, targets, strict=True):
                data = b"".join(run_parts)  # a single bytes part comes back as itself, uncopied
                segment.write(run_start - segment.base, data)
                self._max = run_start + len(data)
            end = self._max
            self._maybe_prepare_spare()
        if self.flush_mode is FlushMode.SYNC_FLUSH:
            self._flush_to(end)
        return results

    def _encode(
        self, drafts: list[MessageDraft], store_ts: int
    ) -> tuple[list[tuple[int, list[bytes]]], list[AppendResult]]:
        """The units to write for ``drafts`` at the log's end, as (start offset, units) per segment
        touched, and the results. Writes nothing (caller holds the lock). The compiled encoder
        (``codec.encode_run``) takes the plain drafts; this loop takes the rest, closes segments with a
        blank marker and raises the precise ``InvalidDraft``."""
        max_size = self.max_message_size
        seg_size = self.segment_size
        prefix = self._id_prefix
        next_id = self._next_id
        results: list[AppendResult] = []
        start = pos = self._max
        segments = self._segments
        seg_end = segments[-1].end if segments and pos < segments[-1].end else pos - pos % seg_size + seg_size
        runs: list[tuple[int, list[bytes]]] = []  # (start offset, units) per segment touched
        parts: list[bytes] = []
        index, count = 0, len(drafts)
        while index < count:
            if encode_run is not None:
                data, done, ids_used = encode_run(
                    drafts,
                    index,
                    pos,
                    segment_end=seg_end,
                    store_ts=store_ts,
                    max_message_size=max_size,
                    id_prefix=prefix,
                    next_id=next_id,
                    result_type=AppendResult,
                    results=results,
                )
                if done:
                    parts.append(data)
                    pos += len(data)
                    index += done
                    next_id += ids_used
                    if index == count:
                        break
            draft = drafts[index]
            msg_id = draft.msg_id
            if not msg_id:
                msg_id = f"{prefix}{next_id:016X}"
                next_id += 1
            try:
                record = encode_message(draft, pos, store_ts, msg_id=msg_id, max_message_size=max_size)
                size = len(record)
                if size + BLANK_SIZE > seg_end - pos:  # close this segment with a blank marker
                    parts.append(encode_blank(seg_end - pos))
                    runs.append((start, parts))
                    start = pos = seg_end
                    seg_end += seg_size
                    parts = []
                    record = encode_message(draft, pos, store_ts, msg_id=msg_id, max_message_size=max_size)
            except InvalidDraft as exc:
                if count > 1:
                    exc.add_note(f"message {index} of the batch; nothing was stored")
                raise
            parts.append(record)
            results.append(AppendResult(pos, size, msg_id, store_ts))
            pos += size
            index += 1
        runs.append((start, parts))
        self._next_id = next_id
        return runs, results

    def append_raw(self, offset: int, *parts: bytes | memoryview) -> None:
        """Append bytes copied from a master's ``read_raw``, verbatim (so replicas' files are identical).

        ``parts`` lie back to back from ``offset`` (the batches of one receive: one ``pwritev`` per
        segment takes them). ``offset`` must equal ``max_offset`` (an empty log accepts any segment
        base, for a slave that starts at the master's first or last file); else ``NotAlignedError``.
        Each part must be whole units (messages and blank markers) with correct physicalOffset fields,
        CRCs and structure, within one segment; else ``RemoteProtocolError`` and nothing is written.
        """
        if not any(parts):
            return
        seg_size = self.segment_size
        with self._lock:
            self._check_open()
            empty = not self._segments
            if offset != self._max and not (empty and offset % seg_size == 0):
                raise NotAlignedError(
                    self.directory, f"append_raw at offset {offset}, but the log ends at {self._max}"
                )
            runs: list[tuple[int, list[bytes | memoryview]]] = []  # (start offset, parts) per segment
            start = offset
            for part in parts:
                seg_end = start - start % seg_size + seg_size
                if start + len(part) > seg_end:
                    raise RemoteProtocolError(
                        f"replicated bytes [{start}, {start + len(part)}) cross the segment end {seg_end}"
                    )
                if message_walk(part, start, seg_end, strict=True)(0, len(part)) != len(part):
                    scan = scan_units(part, 0, len(part), start, seg_end, strict=True)
                    if scan.end != len(part) or scan.stop is ScanStop.INVALID:
                        raise RemoteProtocolError(
                            f"replicated bytes at offset {start + scan.end} rejected: {scan.error}"
                        )
                if runs and runs[-1][0] // seg_size == start // seg_size:
                    runs[-1][1].append(part)
                else:
                    runs.append((start, [part]))
                start += len(part)
            targets = self._segments_for([run_start for run_start, _ in runs])
            for (run_start, run_parts), segment in zip(runs, targets, strict=True):
                segment.write_parts(run_start - segment.base, run_parts)
                if empty:
                    self._min = self._flushed = segment.base
                    empty = False
                self._max = run_start + sum(map(len, run_parts))
            end = self._max
            self._maybe_prepare_spare()
        if self.flush_mode is FlushMode.SYNC_FLUSH:
            self._flush_to(end)

    # --- cutting ---------------------------------------------------------------------------------------
    def truncate(self, offset: int) -> None:
        """Cut everything at and after ``offset`` (a unit boundary), durably. ``offset >= max_offset`` is a
        no-op (nothing lies there; docs/reference-behaviour.md §13 step 4); a non-boundary or an offset below
        ``min_offset`` raises ``NotAlignedError``."""
        with self._flush_lock, self._lock:
            self._check_open()
            if offset >= self._max:
                return
            if not self._is_boundary(offset):
                raise self._not_aligned(offset, "not a message boundary; refusing to truncate")
            # First make sure crash recovery will re-verify from here, then cut.
            if self._checkpointed > offset or self._flushed > offset:
                self._flushed = min(self._flushed, offset)
                self._write_checkpoint(Checkpoint(False, self.segment_size, self._flushed))
            segment = self._segment_for(offset)
            index = self._segments.index(segment)
            if offset == segment.base and index > 0:
                index -= 1  # the whole segment goes: the log ends with the (complete) previous one
            else:
                segment.zero(offset - segment.base, min(self._max, segment.end) - segment.base)
                segment.sync()
            later = self._segments[index + 1 :]
            del self._segments[index + 1 :]
            self._delete_from_the_end(later)
            old_max = self._max
            self._max = offset
            self._bad = {at: why for at, why in self._bad.items() if at < offset}
            self._spare_due = self._half_of(offset)
            log.info(
                "commit log truncated from %d to %d (%d later segment file(s) deleted)",
                old_max,
                offset,
                len(later),
            )

    def _delete_from_the_end(self, segments: list[Segment]) -> None:
        """Delete trailing segment files last first, so a crash part-way leaves no gap in the names."""
        for segment in reversed(segments):
            segment.delete()
        if segments:
            fsync_directory(self.directory)

    def delete_segments_before(self, offset: int) -> int:
        """Delete whole segment files that end at or before ``offset``, never the last one. Returns how
        many were deleted; ``min_offset`` moves to the first remaining segment."""
        with self._flush_lock, self._lock:
            self._check_open()
            doomed = [s for s in self._segments[:-1] if s.end <= offset]
            for segment in doomed:
                segment.delete()
            del self._segments[: len(doomed)]
            if doomed:
                fsync_directory(self.directory)
                self._min = self._segments[0].base
                self._bad = {at: why for at, why in self._bad.items() if at >= self._min}
                log.info("commit log: deleted %d segment file(s); min offset now %d", len(doomed), self._min)
            return len(doomed)

    def reset(self) -> None:
        """Empty the log durably: every segment file goes (last first), ``min_offset`` and ``max_offset``
        become 0, so the next ``append_raw`` may start at any segment base. For a slave whose log ends
        below its master's log start (docs/architecture.md §4.2)."""
        with self._flush_lock, self._lock:
            self._check_open()
            self._flushed = 0  # recovery must never trust a byte of the old files
            self._write_checkpoint(Checkpoint(False, self.segment_size, 0))
            doomed, self._segments = self._segments, []
            self._delete_from_the_end(doomed)
            old = (self._min, self._max)
            self._min = self._max = 0
            self._bad = {}
            self._spare_due = self._half_of(0)
            log.warning("commit log [%d, %d) emptied (%d segment file(s) deleted)", *old, len(doomed))

    # --- closing ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush, mark the shutdown clean in the checkpoint, release files. Idempotent."""
        if self._closed:
            return
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()
        self._spare.wait()  # no thread outlives the log (the spare file stays; the next open deletes it)
        with self._flush_lock:
            try:
                self._flush_locked()
                # Only a complete flush earns the CLEAN mark (recovery then trusts all but the last file).
                self._write_checkpoint(Checkpoint(True, self.segment_size, self._flushed))
            finally:
                with self._lock:
                    self._closed = True
                    self._close_files()

    def _close_files(self) -> None:
        for segment in self._segments:
            segment.close()
        if self._checkpoint_fd >= 0:
            os.close(self._checkpoint_fd)
            self._checkpoint_fd = -1

    def __enter__(self) -> CommitLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
