"""The broker-level store: commit log + epoch file + confirm-offset checkpoint, fencing, put and read.

SHELL. It sequences file operations and asks the replication layer (a :class:`ReplicationGate`, the
``AutoSwitchHAService``) what the rules of docs/reference-behaviour.md §14–§15 say; the rules themselves live
in the cores (``mqha.autoswitch_ha.ack``, ``mqha.broker.protocol``).

Put path (docs/reference-behaviour.md §15), for one request (one message or one batch), in this order:

1. fenced → ``SERVICE_NOT_AVAILABLE`` ("fenced"); not master → ``SERVICE_NOT_AVAILABLE`` with the
   master's address; too few in-sync replicas → ``IN_SYNC_REPLICAS_NOT_ENOUGH``. Nothing written.
2. one ``append_batch`` on the event loop (a memory-map copy, all or nothing), so a role change, which
   also runs on the loop, never interleaves with a half-done append;
3. the HA layer is told the log grew (its connections start streaming);
4. ``SYNC_FLUSH``: wait for the fsync (shared by concurrent puts, in a worker thread) up to
   ``syncFlushTimeout`` → ``FLUSH_DISK_TIMEOUT``;
5. wait for the replica acks the ack policy needs, for the batch's last offset, up to ``slaveTimeout``
   → ``FLUSH_SLAVE_TIMEOUT`` (the HA layer wakes waiters on acks; no polling).

The confirm offset (docs/reference-behaviour.md §14): the HA layer computes the *effective* value; this store
keeps the *stored* value (what a slave was told, what a master computed) and persists the effective one in
``<storePathRootDir>/confirmOffsetCheckpoint`` (rewritten in place; fsynced when a truncation lowers it),
so a restart never exposes more than was confirmed. Recovery clamps it into ``[minOffset, maxOffset]``
and drops epoch entries that start beyond the recovered log end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mqha.autoswitch_ha.ack import AckStatus
from mqha.broker.commitlog import CommitLog, FlushMode, InvalidDraft, MessageDraft, StoredMessage
from mqha.broker.protocol import Appended, PutOutcome, PutStatus, ReadRequest, illegal
from mqha.epoch.file import EpochStore
from mqha.epoch.history import EpochHistory
from mqha.errors import CorruptFileError, NotAlignedError, StorageError
from mqha.history.recorder import BrokerHistory, commit_log_entries

log = logging.getLogger(__name__)

CONFIRM_CHECKPOINT_NAME = "confirmOffsetCheckpoint"


class ReplicationGate(Protocol):
    """What the put and read paths ask the HA layer (implemented by ``AutoSwitchHAService``)."""

    @property
    def is_master(self) -> bool: ...

    def master_address(self) -> str | None: ...

    def check_in_sync_replicas(self) -> AckStatus: ...

    def confirm_offset(self) -> int: ...

    def log_changed(self) -> None: ...

    async def wait_for_replicas(self, next_offset: int) -> AckStatus: ...


class ConfirmOffsetCheckpoint:
    """``{"confirmOffset": n}`` in one small file, rewritten in place (padded to a fixed size, one
    ``pwrite``), as the reference keeps its confirm offset in the mapped ``checkpoint`` file. Not a
    temp file and a rename: replacing a file frees the old one's blocks, and where the file system
    discards freed blocks the rename waited for the disk, a few ms on the event loop five times a
    second. A torn write leaves it unreadable, and unreadable → ``-1`` (unknown: nothing is exposed
    until a master says otherwise), which is always safe."""

    SIZE = 64  # bytes; the JSON of any int64 fits, padded with spaces (JSON ignores them)

    def __init__(self, path: str) -> None:
        self.path = path
        self._written: int | None = None
        self._fd = -1

    def load(self) -> int:
        try:
            with open(self.path, encoding="utf-8") as handle:
                value = json.load(handle)["confirmOffset"]
        except FileNotFoundError:
            return -1
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("confirm offset checkpoint %s is unusable (%s); starting from -1", self.path, exc)
            return -1
        if isinstance(value, bool) or not isinstance(value, int):
            log.warning("confirm offset checkpoint %s holds %r; starting from -1", self.path, value)
            return -1
        self._written = value
        return value

    def save(self, value: int, *, durable: bool = False) -> None:
        if value == self._written and not durable:
            return
        record = json.dumps({"confirmOffset": value}).encode().ljust(self.SIZE)
        try:
            first = self._fd < 0
            if first:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(self._fd, record, 0)
            if first:
                os.ftruncate(self._fd, self.SIZE)  # whatever the file held beyond the record goes
            if durable:
                os.fsync(self._fd)
        except OSError as exc:
            raise StorageError(self.path, f"cannot write the confirm offset checkpoint: {exc}") from exc
        self._written = value

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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

    def __init__(self, settings: StoreSettings, log_: CommitLog, epochs: EpochStore) -> None:
        self.settings = settings
        self.log = log_
        self.epoch_store = epochs
        self.checkpoint = ConfirmOffsetCheckpoint(os.path.join(settings.root_dir, CONFIRM_CHECKPOINT_NAME))
        self._confirm = -1
        # docs/reference-behaviour.md §9: a broker starts fenced until the ReplicasManager registers it
        self.fenced = True
        self.gate: ReplicationGate | None = None
        # docs/architecture.md §5 epochs/truncations, when recording
        self.history: BrokerHistory | None = None
        self._flush_task: asyncio.Future[None] | None = None

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, settings: StoreSettings) -> BrokerStore:
        """Open and recover the commit log, load the epoch file and the confirm offset, reconcile them."""
        os.makedirs(settings.root_dir, exist_ok=True)
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
        store = cls(settings, commit_log, epochs)
        store._recover()
        return store

    @classmethod
    def open_config(cls, config: Mapping[str, Any]) -> BrokerStore:
        return cls.open(StoreSettings.from_config(config))

    def _recover(self) -> None:
        top, bottom = self.log.max_offset, self.log.min_offset
        last = self.epoch_store.history.last()
        if last is not None and last.start_offset > top:
            # The log lost a tail the epoch file had labelled (a machine crash before the flush): an
            # epoch that starts beyond the data would rank this replica too high in elections.
            dropped = [p for p in self.epoch_store.history.pairs() if p[1] > top]
            self.epoch_store.truncate_suffix_by_offset(top + 1)
            log.warning("epoch entries %s start beyond the recovered log end %d: dropped", dropped, top)
        stored = self.checkpoint.load()
        if stored >= 0:
            clamped = min(max(stored, bottom), top)
            if clamped != stored:
                log.info("confirm offset %d clamped to %d (log holds [%d, %d))", stored, clamped, bottom, top)
                self.checkpoint.save(clamped, durable=True)
            stored = clamped
        self._confirm = stored
        log.info(
            "store open: log [%d, %d), epochs %s, confirm offset %d (recovery: %s)",
            bottom,
            top,
            self.epoch_store.history.pairs(),
            stored,
            "clean" if self.log.recovery.clean else f"crash path, {self.log.recovery.cut_reason or 'no cut'}",
        )

    def close(self) -> None:
        """Persist the last confirm offset and close the files (idempotent)."""
        with contextlib.suppress(StorageError):
            self.checkpoint.save(self.effective_confirm_offset(), durable=True)
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

    def effective_confirm_offset(self) -> int:
        return self.gate.confirm_offset() if self.gate is not None else self._confirm

    def persist_confirm_offset(self) -> None:
        """Called periodically: write the effective confirm offset if it changed."""
        self.checkpoint.save(self.effective_confirm_offset())

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
            if self._flush_task is None or self._flush_task.done():
                self._flush_task = asyncio.ensure_future(asyncio.to_thread(self.log.flush))
            await asyncio.shield(self._flush_task)

    # -- the client API --------------------------------------------------------------------------

    def reject_if_unavailable(self) -> PutOutcome | None:
        """Step 1 of the put path, before anything else: fenced, slave, too few in-sync replicas."""
        if self.fenced:
            return PutOutcome(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark="broker is fenced: not registered with the controller yet; no request is served",
            )
        gate = self.gate
        if gate is None or not gate.is_master:
            address = gate.master_address() if gate is not None else None
            return PutOutcome(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark="this broker is a slave; send puts to the master",
                extra={"masterAddress": address},
            )
        if gate.check_in_sync_replicas() is AckStatus.IN_SYNC_REPLICAS_NOT_ENOUGH:
            return PutOutcome(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, remark="in-sync replicas not enough")
        return None

    async def put(self, drafts: Sequence[MessageDraft]) -> PutOutcome:
        """The put path of the module docstring for one request."""
        rejected = self.reject_if_unavailable()
        if rejected is not None:
            return rejected
        gate = self.gate
        assert gate is not None
        epoch = self.epoch_store.last_epoch()
        try:
            results = self.log.append_batch(drafts)
        except InvalidDraft as exc:
            raise illegal(f"{exc} (nothing was stored)") from None
        appended = tuple(Appended(r.offset, r.size, r.msg_id) for r in results)
        gate.log_changed()
        end = results[-1].offset + results[-1].size
        status = PutStatus.PUT_OK
        if self.settings.flush_mode is FlushMode.SYNC_FLUSH:
            try:
                async with asyncio.timeout(self.settings.sync_flush_timeout_ms / 1000):
                    await self.flush_to(end)
            except TimeoutError:
                status = PutStatus.FLUSH_DISK_TIMEOUT
        replica = await gate.wait_for_replicas(end)
        if replica is not AckStatus.OK:  # a non-OK replica status overrides the flush status (§15.4)
            status = PutStatus.FLUSH_SLAVE_TIMEOUT
        return PutOutcome(status, appended, epoch=epoch)

    def read(self, request: ReadRequest) -> tuple[list[StoredMessage], int, int]:
        """Messages at or after ``request.offset``, never past the confirm offset (unless
        ``readUnCommitted``). Returns (messages, next offset, the limit used)."""
        limit = self.log.max_offset if self.settings.read_uncommitted else self.effective_confirm_offset()
        if limit <= 0:
            return [], request.offset, limit
        try:
            messages, next_offset = self.log.read_messages(request.offset, request.max_messages, limit)
        except NotAlignedError as exc:
            raise illegal(f"offset {request.offset} is not a message boundary: {exc.reason}") from None
        return messages, next_offset, limit
