"""The broker-level store: commit log + epoch file + confirm-offset checkpoint. SHELL.

It sequences file operations; the client put and read paths over it are ``mqha.broker.access``, the
replication layer (``mqha.autoswitch_ha``) writes replicated data and truncations through it.

The confirm offset (docs/reference-behaviour.md §14): the HA layer computes the *effective* value; this store
keeps the *stored* value (what a slave was told, what a master computed) and persists what the HA layer
hands it (the effective one) in
``<storePathRootDir>/confirmOffsetCheckpoint`` (rewritten in place; fsynced when a truncation lowers it),
so a restart never exposes more than was confirmed. Recovery clamps it into ``[minOffset, maxOffset]``
and drops epoch entries that start beyond the recovered log end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mqha.broker.commitlog import CommitLog, FlushMode
from mqha.broker.confirm_checkpoint import CONFIRM_CHECKPOINT_NAME, ConfirmOffsetCheckpoint
from mqha.broker.start_report import StartReport, new_incarnation, start_report
from mqha.epoch.file import EpochStore
from mqha.epoch.history import EpochHistory
from mqha.errors import CorruptFileError, StorageError
from mqha.history.recorder import BrokerHistory, commit_log_entries

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreSettings:
    """The keys of docs/reference-behaviour.md §16.3 this store uses."""

    commit_log_dir: str
    epoch_file: str
    root_dir: str
    segment_size: int
    flush_mode: FlushMode
    flush_interval_ms: int
    max_message_size: int
    sync_flush_timeout_ms: int
    read_uncommitted: bool

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StoreSettings:
        return cls(
            commit_log_dir=config["storePathCommitLog"],
            epoch_file=config["storePathEpochFile"],
            root_dir=config["storePathRootDir"],
            segment_size=config["mappedFileSizeCommitLog"],
            flush_mode=FlushMode(config["flushDiskType"]),
            flush_interval_ms=config["flushIntervalCommitLog"],
            max_message_size=config["maxMessageSize"],
            sync_flush_timeout_ms=config["syncFlushTimeout"],
            read_uncommitted=config["readUnCommitted"],
        )


class BrokerStore:
    """One broker replica's data. Every method runs on the broker's event loop."""

    def __init__(
        self,
        settings: StoreSettings,
        log_: CommitLog,
        epochs: EpochStore,
        history: BrokerHistory | None = None,
    ) -> None:
        self.settings = settings
        self.log = log_
        self.epoch_store = epochs
        self.checkpoint = ConfirmOffsetCheckpoint(os.path.join(settings.root_dir, CONFIRM_CHECKPOINT_NAME))
        self._confirm = -1
        # How this process started (docs/architecture.md §3.2); set by ``_recover``.
        self.start_report = StartReport(new_incarnation(), True, False, -1, 0)
        # docs/architecture.md §5 epochs/truncations, when recording
        self.history = history
        self._flush_task: asyncio.Future[None] | None = None
        # Bumped whenever the log loses its tail or is emptied: what was derived from it (the queue
        # index, docs/architecture.md §4.4) must be derived again.
        self.log_generation = 0

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, settings: StoreSettings, history: BrokerHistory | None = None, incarnation: str | None = None
    ) -> BrokerStore:
        """Open and recover the commit log, load the epoch file and the confirm offset, reconcile them.
        ``incarnation``: this process's (the start report's; a new one when not given)."""
        os.makedirs(settings.root_dir, mode=0o700, exist_ok=True)
        # Always ASYNC in the commit log: SYNC_FLUSH fsyncs run in a worker thread (``flush_to``), so
        # appends stay on the event loop and never race a role change.
        commit_log = CommitLog.open(
            settings.commit_log_dir,
            settings.segment_size,
            FlushMode.ASYNC_FLUSH,
            settings.flush_interval_ms,
            settings.max_message_size,
        )
        try:
            epochs = EpochStore(settings.epoch_file)
        except BaseException:
            commit_log.close()
            raise
        store = cls(settings, commit_log, epochs, history)
        if incarnation is not None:
            store.start_report = replace(store.start_report, incarnation=incarnation)
        store._recover()
        return store

    @classmethod
    def open_config(
        cls, config: Mapping[str, Any], history: BrokerHistory | None = None, incarnation: str | None = None
    ) -> BrokerStore:
        return cls.open(StoreSettings.from_config(config), history, incarnation)

    def _recover(self) -> None:
        top, bottom = self.log.max_offset, self.log.min_offset
        last = self.epoch_store.history.last()
        if last is not None and last.start_offset > top:
            # The log lost a tail the epoch file had labelled (a machine crash before the flush): an
            # epoch that starts beyond the data would rank this replica too high in elections.
            dropped = [p for p in self.epoch_store.history.pairs() if p[1] > top]
            self.epoch_store.truncate_suffix_by_offset(top + 1)
            log.warning("epoch entries %s start beyond the recovered log end %d: dropped", dropped, top)
        stored = before = self.checkpoint.load()
        report = start_report(
            self.start_report.incarnation,
            clean_shutdown=self.log.recovery.clean,
            confirm_offset_before_recovery=before,
            recovered_max_offset=top,
        )
        self.start_report = report
        if stored >= 0:
            clamped = min(max(stored, bottom), top)
            if clamped != stored:
                log.info("confirm offset %d clamped to %d (log holds [%d, %d))", stored, clamped, bottom, top)
                self.checkpoint.save(clamped, durable=True)
            stored = clamped
        self._confirm = stored
        if report.lossy:
            # The one line an operator must see: acknowledged data is gone from this replica; the
            # controller will not elect it over a replica that still holds it (docs/architecture.md §3.2).
            log.warning(
                "LOSSY RECOVERY: confirm offset %d is beyond the recovered log end %d: confirmed "
                "messages in [%d, %d) are gone from this replica (%s shutdown)",
                before,
                top,
                top,
                before,
                "clean" if report.clean_shutdown else "unclean",
            )
        log.info(
            "store open: log [%d, %d), epochs %s, confirm offset %d (recovery: %s)",
            bottom,
            top,
            self.epoch_store.history.pairs(),
            stored,
            "clean" if self.log.recovery.clean else f"crash path, {self.log.recovery.cut_reason or 'no cut'}",
        )
        log.info("start report: %s", report.describe())

    def close(self, confirm_offset: int | None = None) -> None:
        """Persist the last confirm offset (``confirm_offset``, the HA layer's effective value, else the
        stored one) and close the files (idempotent)."""
        with contextlib.suppress(StorageError):
            self.checkpoint.save(self._confirm if confirm_offset is None else confirm_offset, durable=True)
        self.checkpoint.close()
        self.log.close()

    # -- offsets and epochs ----------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.log.min_offset

    @property
    def max_offset(self) -> int:
        return self.log.max_offset

    @property
    def epochs(self) -> EpochHistory:
        return self.epoch_store.history

    @property
    def stored_confirm_offset(self) -> int:
        """The stored confirmOffset (docs/reference-behaviour.md §14), not the master's effective one."""
        return self._confirm

    def set_stored_confirm_offset(self, value: int) -> None:
        self._confirm = value

    def save_confirm_offset(self, value: int, *, durable: bool = False) -> None:
        """Write ``value`` (the HA layer's effective confirm offset) to the checkpoint if it changed."""
        self.checkpoint.save(value, durable=durable)

    # -- replication (slave side, and the master's reads) -------------------------------------

    def read_batches(self, offset: int, batch_bytes: int, max_bytes: int) -> list[bytes | memoryview]:
        return self.log.read_batches(offset, batch_bytes, max_bytes)

    def apply_truncation(self, offset: int, epochs: EpochHistory) -> None:
        """docs/reference-behaviour.md §13 on this replica: persist ``epochs`` (a prefix of the current
        history), lower the confirm offset, then cut the log to ``offset``. Epochs first: see
        ``events.TruncateTo``."""
        self._set_history(epochs)
        if self._confirm > offset:
            self._confirm = offset
            self.checkpoint.save(offset, durable=True)
        old_max = self.log.max_offset
        self.log.truncate(offset)  # NotAlignedError when offset is not a message boundary
        if offset < old_max:
            self.log_generation += 1
            log.warning("truncated the commit log from %d to %d (divergent tail)", old_max, offset)
            if self.history is not None:
                self.history.truncation(old_max, offset, "divergent tail")

    def _set_history(self, target: EpochHistory) -> None:
        current = self.epoch_store.history
        if target.pairs() == current.pairs():
            return
        pairs = current.pairs()
        if pairs[: len(target)] != target.pairs():
            raise CorruptFileError(
                self.epoch_store.file.path,
                f"truncation asked for epochs {target.pairs()}, not a prefix of the file's {pairs}",
            )
        self.epoch_store.truncate_suffix_by_offset(pairs[len(target)][1])

    def delete_segment(self, base: int) -> int:
        """Retention (blocking: run it off the event loop): delete the oldest segment, which starts at
        ``base``, then drop the epoch entries that end before the new log start, durably. Returns the new
        ``min_offset``. A crash between the two leaves extra old epoch entries, dropped by the next call."""
        if self.log.min_offset == base:
            self.log.delete_segments_before(base + self.log.segment_size)
        self.truncate_epoch_prefix()
        return self.log.min_offset

    def truncate_epoch_prefix(self) -> None:
        """Drop epoch entries that end at or before the log start (docs/reference-behaviour.md §12.2
        ``truncatePrefixByOffset(minPhyOffset - 1)``); the file is written only if one goes."""
        bottom = self.log.min_offset
        if bottom > 0:
            self.epoch_store.truncate_prefix_by_offset(bottom - 1)

    def reset_log(self, reason: str = "behind the master's log start") -> None:
        """Empty this replica to re-sync from its master's log start (its log ends below the master's
        log start, docs/architecture.md §4.2, or shares nothing with the master's, §4): epochs first
        (as ``apply_truncation``), the confirm offset, then the commit log."""
        old = (self.log.min_offset, self.log.max_offset)
        self.epoch_store.clear()
        self._confirm = min(self._confirm, 0)
        self.checkpoint.save(self._confirm, durable=True)
        self.log.reset()
        self.log_generation += 1
        log.warning("replica log [%d, %d) dropped to re-sync from the master: %s", *old, reason)
        if self.history is not None:
            self.history.truncation(old[1], 0, reason)

    def dump_final_log(self, wait: float) -> int:
        """Record every stored message as this replica's ``final_logs`` (blocking: run it off the event
        loop). Returns the number of rows; raises ``TimeoutError`` if they were not committed in ``wait``."""
        if self.history is None:
            raise RuntimeError("this broker records no history")
        entries = list(commit_log_entries(self.log))
        if not self.history.final_log(entries, wait=wait):
            raise TimeoutError(f"final log of {len(entries)} rows not committed within {wait:g} s")
        return len(entries)

    def append_epoch(self, epoch: int, start_offset: int) -> EpochHistory:
        before = self.epoch_store.history.pairs()
        saved = self.epoch_store.append(epoch, start_offset)
        if self.history is not None and saved.pairs() != before:
            self.history.epoch(epoch, start_offset)
        return saved

    async def append_replicated(self, offset: int, parts: Sequence[bytes | memoryview]) -> int:
        """Append bytes received from the master verbatim (``parts`` back to back from ``offset``);
        returns the new log end once durable as ``flushDiskType`` asks."""
        self.log.append_raw(offset, *parts)
        end = self.log.max_offset
        if self.settings.flush_mode is FlushMode.SYNC_FLUSH:
            await self.flush_to(end)
        return end

    async def flush_to(self, offset: int) -> None:
        """fsync until ``offset`` is durable; concurrent callers share one flush (group commit)."""
        while self.log.flushed_offset < offset:
            await asyncio.shield(self._start_flush())

    def _start_flush(self) -> asyncio.Future[None]:
        """The flush under way, or a new one of everything appended."""
        task = self._flush_task
        if task is None or task.done():
            task = self._flush_task = asyncio.ensure_future(asyncio.to_thread(self.log.flush))
            task.add_done_callback(_log_flush_failure)
        return task


def _log_flush_failure(task: asyncio.Future[None]) -> None:
    """Retrieve a flush's failure, which a waiter that timed out never sees: the periodic flusher retries."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("commit log flush failed: %s", exc)
