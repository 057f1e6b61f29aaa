"""How a commit log directory is checked and recovered at open (the *Recovery* part of the ``store``
docstring), and its checkpoint file written. SHELL."""

from __future__ import annotations

import logging
import mmap
import os

from mqha.broker.commitlog.checkpoint import (
    CHECKPOINT_SIZE,
    Checkpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from mqha.broker.commitlog.scanning import (
    ScanStop,
    scan_units,
)
from mqha.broker.commitlog.segment import SPARE_NAME, Segment, parse_segment_name
from mqha.broker.commitlog.types import (
    CHECKPOINT_NAME,
    CommitLogState,
    RecoveryReport,
)
from mqha.durable import fsync_directory
from mqha.errors import CorruptFileError, ForeignFileError

log = logging.getLogger(__name__)


class CommitLogRecovery(CommitLogState):
    """Validates a commit log directory and recovers it at open (part of ``CommitLog``)."""

    def _list_segments(self) -> list[Segment]:
        """The segment files, validated before anything is touched (see the module docstring)."""
        bases: list[int] = []
        for name in sorted(os.listdir(self.directory)):
            path = self._path(name)
            if name in (CHECKPOINT_NAME, SPARE_NAME):
                if not os.path.isfile(path):
                    raise ForeignFileError(
                        path, f"expected the commit log's {name} file, found something else"
                    )
                continue
            base = parse_segment_name(name)
            if base is None or not os.path.isfile(path):
                raise ForeignFileError(
                    path,
                    "not a commit-log segment (the directory holds only files named by a 20-digit offset)",
                )
            if base % self.segment_size:
                raise CorruptFileError(
                    path,
                    f"base offset {base} is not a multiple of the segment size {self.segment_size} "
                    "(was the log written with another mappedFileSizeCommitLog?)",
                )
            bases.append(base)
        segments = [Segment(self.directory, base, self.segment_size) for base in bases]
        for i, segment in enumerate(segments):
            if i and segment.base != segments[i - 1].end:
                raise CorruptFileError(
                    segment.path, f"gap in the commit log: the previous segment ends at {segments[i - 1].end}"
                )
            size = os.path.getsize(segment.path)
            last = i == len(segments) - 1
            if size > self.segment_size or (size != self.segment_size and not last):
                raise CorruptFileError(
                    segment.path,
                    f"size {size} bytes, expected {self.segment_size} (another "
                    "mappedFileSizeCommitLog, or a damaged file)",
                )
        return segments

    def _read_checkpoint(self) -> Checkpoint | None:
        path = self._path(CHECKPOINT_NAME)
        try:
            with open(path, "rb") as f:
                data = f.read(CHECKPOINT_SIZE + 1)
        except FileNotFoundError:
            return None
        checkpoint = decode_checkpoint(data)
        if checkpoint is None:
            log.warning("%s: unreadable checkpoint (torn write?); recovering as after a crash", path)
            return None
        if checkpoint.segment_size != self.segment_size:
            raise CorruptFileError(
                path,
                f"the log was written with segment size {checkpoint.segment_size}, opened with "
                f"{self.segment_size}",
            )
        return checkpoint

    def _recover(self) -> None:
        segments = self._list_segments()
        checkpoint = self._read_checkpoint()
        # --- nothing has been modified up to here: refuse rather than delete ---
        self._segments = segments
        if not segments:
            self._min = self._max = self._flushed = 0
            self.recovery = RecoveryReport(checkpoint is not None and checkpoint.clean, 0, 0, None, "", ())
            self._open_checkpoint(dirty_flushed=0)
            return
        clean = checkpoint is not None and checkpoint.clean
        if clean:
            first = len(segments) - 1
        else:
            flushed = checkpoint.flushed_offset if checkpoint is not None else 0
            first = min(max((flushed - segments[0].base) // self.segment_size, 0), len(segments) - 1)
        last = segments[-1]
        if last.extend_if_short():
            log.info("%s: extended a short last segment to %d bytes", last.path, self.segment_size)
        end, cut_index, cut_reason = self._verify(segments, first)
        stale, deleted = self._cut(segments, cut_index, end, cut_reason) if cut_index >= 0 else (0, [])
        for segment in segments[first:]:
            segment.sync()  # after a killed process the verified bytes may still be only in the page cache
        self._min = segments[0].base
        self._max = end
        self._flushed = end
        cut = bool(stale or deleted)
        if clean and checkpoint is not None and checkpoint.flushed_offset != end and not cut:
            # Files changed after a clean shutdown without anything to cut (e.g. the last file removed).
            log.warning(
                "%s: clean-shutdown checkpoint says the log ends at %d, the segments end at %d",
                self._path(CHECKPOINT_NAME),
                checkpoint.flushed_offset,
                end,
            )
        self.recovery = RecoveryReport(
            clean,
            segments[first].base,
            end - segments[first].base,
            end if cut else None,
            cut_reason if cut else "",
            tuple(deleted),
        )
        self._open_checkpoint(dirty_flushed=end)

    @staticmethod
    def _verify(segments: list[Segment], first: int) -> tuple[int, int, str]:
        """Fully verify ``segments[first:]``. Returns (end of valid data, index of the segment where the
        data ends or -1 if it ends with a complete segment, why it ends there)."""
        end = segments[first].base
        for i in range(first, len(segments)):
            segment = segments[i]
            segment.advise(mmap.MADV_SEQUENTIAL)
            scan = scan_units(segment.view, 0, segment.size, segment.base, segment.end)
            segment.advise(mmap.MADV_NORMAL)
            end = segment.base + scan.end
            if scan.stop is not ScanStop.BLANK:
                return end, i, str(scan.error) if scan.error is not None else "end of data"
            # complete: the next segment (if any) continues the log
        return end, -1, ""

    def _cut(self, segments: list[Segment], index: int, end: int, reason: str) -> tuple[int, list[str]]:
        """Zero whatever follows ``end`` in ``segments[index]`` and delete the later files; one WARNING
        if anything was actually there. Returns (stale bytes zeroed, deleted paths)."""
        segment = segments[index]
        stale = segment.zero(end - segment.base, segment.size)
        deleted = [later.path for later in segments[index + 1 :]]
        self._delete_from_the_end(segments[index + 1 :])
        del segments[index + 1 :]
        if stale or deleted:
            log.warning(
                "commit log recovery: cut %s at offset %d (%s): zeroed %d stale bytes, deleted %d later "
                "segment file(s)%s",
                segment.path,
                end,
                reason,
                stale,
                len(deleted),
                f" {[os.path.basename(p) for p in deleted]}" if deleted else "",
            )
        return stale, deleted

    def _open_checkpoint(self, dirty_flushed: int) -> None:
        """Open the checkpoint file and durably mark the log open (DIRTY) before any append."""
        path = self._path(CHECKPOINT_NAME)
        created = not os.path.exists(path)
        self._checkpoint_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._write_checkpoint(Checkpoint(False, self.segment_size, dirty_flushed))
        if created:
            fsync_directory(self.directory)

    def _write_checkpoint(self, checkpoint: Checkpoint, *, durable: bool = True) -> None:
        # One 32-byte write in place: a torn one fails its CRC and recovery takes the crash path.
        os.pwrite(self._checkpoint_fd, encode_checkpoint(checkpoint), 0)
        if durable:
            os.fdatasync(self._checkpoint_fd)
        self._checkpoint_synced = durable
        self._checkpointed = checkpoint.flushed_offset
