"""The commit log's fsyncs: group commit, the flusher thread, the checkpoint's flushed offset
(the *Durability* part of the ``store`` docstring). SHELL."""

from __future__ import annotations

import logging

from mqha.broker.commitlog.checkpoint import (
    Checkpoint,
)
from mqha.broker.commitlog.types import (
    CommitLogState,
    FlushMode,
)
from mqha.durable import fsync_directory

log = logging.getLogger(__name__)


class CommitLogFlushing(CommitLogState):
    """Makes appended bytes durable and records the durable offset (part of ``CommitLog``)."""

    def _flush_to(self, offset: int) -> None:
        """fsync until ``offset`` is durable; concurrent callers share one fsync (group commit)."""
        with self._flush_lock:
            if self._flushed >= offset:
                return
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._lock:
            if self._closed:
                return
            target = self._max
            flushed = self._flushed
            dirty = [s for s in self._segments if s.end > flushed and s.base < target]
            new_names, self._new_names = self._new_names, False
        # Outside _lock: appends go on while the disk works. Names first: flushed data always lies in a
        # file whose name survives a crash (else a crash could leave it under the spare's name).
        try:
            if new_names:
                fsync_directory(self.directory)
            for segment in dirty:
                segment.sync()
        except BaseException:
            if new_names:
                with self._lock:
                    self._new_names = True  # not durable yet: the next flush tries again
            raise
        # Record the new flushed offset in the checkpoint before anyone can see it as flushed: a
        # SYNC_FLUSH put is answered once ``flushed_offset`` covers it, so the checkpoint never says less
        # than what was answered as durable (the power-loss fault cuts back to it, mqha.chaos.power_loss).
        # A pwrite into the page cache here; the flusher makes it durable within an interval (until
        # then a power cut leaves an older, lower value: recovery only verifies more).
        flushed = max(self._flushed, target)  # only flushes (serialised by _flush_lock) raise it
        if flushed != self._checkpointed:
            self._write_checkpoint(Checkpoint(False, self.segment_size, flushed), durable=False)
        with self._lock:
            self._flushed = max(self._flushed, flushed)

    def _checkpoint_behind(self) -> bool:
        """The checkpoint on disk does not durably say the flushed offset yet."""
        return not self._checkpoint_synced or self._flushed != self._checkpointed

    def flush(self) -> None:
        """fsync everything appended so far and record it durably in the checkpoint."""
        with self._flush_lock:
            self._check_open()
            self._flush_locked()
            if self._checkpoint_behind():
                self._write_checkpoint(Checkpoint(False, self.segment_size, self._flushed))

    def _flusher_loop(self) -> None:
        interval = self.flush_interval_ms / 1000
        while not self._stop.wait(interval):
            try:
                with self._flush_lock:
                    if self._closed:
                        return
                    if self.flush_mode is FlushMode.ASYNC_FLUSH:
                        self._flush_locked()
                    if self._checkpoint_behind():
                        self._write_checkpoint(Checkpoint(False, self.segment_size, self._flushed))
                self._release_flushed_pages()
            except OSError:
                log.exception("commit log flush failed in %s; will retry", self.directory)

    def _release_flushed_pages(self) -> None:
        """Unmap the pages of flushed data from this process (they stay in the page cache), so the
        broker's RSS is bounded by what it wrote or read in one flush interval, not by the log size."""
        with self._lock:
            if self._closed:
                return
            flushed = self._flushed
            for segment in self._segments:
                if segment.mapped and segment.base < flushed:
                    segment.release(0, min(segment.end, flushed) - segment.base)
