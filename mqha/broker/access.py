"""The broker's client put and read paths over the store, the role and the HA layer. SHELL.

It asks the replication layer (a :class:`ReplicationGate`, the HA layer's ``AckGate``) what the rules of
docs/reference-behaviour.md §14–§15 say; the rules themselves live in the cores
(``mqha.autoswitch_ha.ack``, ``mqha.broker.protocol``).

Put path (docs/reference-behaviour.md §15), for one request (one message or one batch), in this order:

1. fenced → ``SERVICE_NOT_AVAILABLE`` ("fenced"); not master → ``SERVICE_NOT_AVAILABLE`` with the
   master's address; disk full (a :class:`DiskCheck`, docs/architecture.md §4.2) →
   ``SERVICE_NOT_AVAILABLE`` with a remark saying so; too few in-sync replicas (``minInSyncReplicas``,
   or fewer SyncStateSet members than a numeric ``inSyncReplicas`` needs) →
   ``IN_SYNC_REPLICAS_NOT_ENOUGH`` with a remark naming the rule. Nothing written.
2. one ``append_batch`` on the event loop (a memory-map copy, all or nothing), so a role change, which
   also runs on the loop, never interleaves with a half-done append; an append that meets ``ENOSPC``
   (a new segment cannot be allocated) wrote nothing and answers as a full disk;
3. the HA layer is told the log grew (its connections start streaming);
4. ``SYNC_FLUSH``: wait for the fsync (shared by concurrent puts, in a worker thread) up to
   ``syncFlushTimeout`` → ``FLUSH_DISK_TIMEOUT``;
5. wait for the replica acks the ack policy needs, for the batch's last offset, up to ``slaveTimeout``
   → ``FLUSH_SLAVE_TIMEOUT`` (the HA layer wakes waiters on acks; no polling);
6. a PUT_OK is recorded in the history (``acks``, docs/architecture.md §5) unless
   ``historyRecordPutAcks=false``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Protocol

from mqha.autoswitch_ha.ack import AckStatus
from mqha.broker.commitlog import FlushMode, InvalidDraft, MessageDraft, StoredMessage
from mqha.broker.disk_guard import is_no_space
from mqha.broker.protocol import Appended, PutOutcome, PutStatus, QueueReadRequest, ReadRequest, illegal
from mqha.broker.queue_index import QueueIndex
from mqha.broker.store import BrokerStore
from mqha.errors import CorruptRecordError, NotAlignedError, StorageError
from mqha.role import BrokerRole


class ReplicationGate(Protocol):
    """What the put and read paths ask the HA layer (implemented by ``mqha.autoswitch_ha.gate.AckGate``)."""

    def in_sync_refusal(self) -> str | None: ...

    def read_refusal(self) -> str | None: ...

    def confirm_offset(self) -> int: ...

    def log_changed(self) -> None: ...

    async def wait_for_replicas(self, next_offset: int) -> AckStatus: ...


class DiskCheck(Protocol):
    """What the put path, status and metrics ask about the disk (``mqha.broker.disk_guard.DiskGuard``)."""

    @property
    def used(self) -> float: ...

    def is_full(self) -> bool: ...

    def refusal(self) -> str | None: ...

    def no_space(self) -> str: ...


class BrokerAccess:
    """Runs the client put and read paths; every method runs on the broker's event loop."""

    def __init__(
        self,
        store: BrokerStore,
        role: BrokerRole,
        gate: ReplicationGate,
        disk: DiskCheck | None = None,
        *,
        ack_mode: str | None = None,
    ) -> None:
        self.store = store
        self.role = role
        self.gate = gate
        self.disk = disk
        self.queue_index = QueueIndex(store.log.min_offset, store.log_generation)
        # The ack mode label (``metrics.ack_mode``) of the PUT_OKs this master records in its history
        # (docs/architecture.md §5); None: none recorded.
        self.ack_mode = ack_mode

    def reject_if_unavailable(self) -> PutOutcome | None:
        """Step 1 of the put path, before anything else: fenced, slave, disk full, too few in-sync
        replicas."""
        role = self.role
        if role.fenced:
            return PutOutcome(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark="broker is fenced: not registered with the controller yet; no request is served",
            )
        if not role.is_master:
            return PutOutcome(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark="this broker is a slave; send puts to the master",
                extra={"masterAddress": role.master_address},
            )
        full = self.disk.refusal() if self.disk is not None else None
        if full is not None:
            return PutOutcome(PutStatus.SERVICE_NOT_AVAILABLE, remark=full)
        too_few = self.gate.in_sync_refusal()
        if too_few is not None:
            return PutOutcome(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, remark=too_few)
        return None

    def read_refusal(self) -> str | None:
        """Why reads are refused now (nothing is served), or None: a slave whose log is not verified
        against the master it follows (docs/architecture.md §4, "Reads on a slave")."""
        return self.gate.read_refusal()

    async def put(self, drafts: Sequence[MessageDraft]) -> PutOutcome:
        """The put path of the module docstring for one request."""
        rejected = self.reject_if_unavailable()
        if rejected is not None:
            return rejected
        gate, store = self.gate, self.store
        epoch = store.epoch_store.last_epoch()
        try:
            results = store.log.append_batch(drafts)
        except InvalidDraft as exc:
            raise illegal(f"{exc} (nothing was stored)") from None
        except OSError as exc:
            if not is_no_space(exc):
                raise
            remark = self.disk.no_space() if self.disk is not None else f"disk full: {exc}"
            return PutOutcome(PutStatus.SERVICE_NOT_AVAILABLE, remark=remark)
        appended = tuple(Appended(r.offset, r.size, r.msg_id) for r in results)
        gate.log_changed()
        end = results[-1].offset + results[-1].size
        status = PutStatus.PUT_OK
        if store.settings.flush_mode is FlushMode.SYNC_FLUSH:
            try:
                async with asyncio.timeout(store.settings.sync_flush_timeout_ms / 1000):
                    await store.flush_to(end)
            except TimeoutError:
                status = PutStatus.FLUSH_DISK_TIMEOUT
        replica = await gate.wait_for_replicas(end)
        if replica is not AckStatus.OK:  # a non-OK replica status overrides the flush status (§15.4)
            status = PutStatus.FLUSH_SLAVE_TIMEOUT
        # The confirm offset this answer stands on reaches its checkpoint before the answer leaves (one
        # pwrite into the page cache; the periodic save alone lags up to 200 ms): a power cut that takes
        # the log's unflushed tail then leaves the checkpoint ahead of the log, and the restart knows it
        # lost acknowledged data (docs/architecture.md §3.2). A failed write is the periodic task's to
        # report; the put stands.
        with contextlib.suppress(StorageError):
            store.save_confirm_offset(gate.confirm_offset())
        if status is PutStatus.PUT_OK and self.ack_mode is not None and store.history is not None:
            store.history.put_ok(appended, epoch, self.ack_mode)  # one queue put; rows built off the loop
        return PutOutcome(status, appended, epoch=epoch)

    def read_limit(self) -> int:
        """Where reads stop: the confirm offset, and no further than this replica has fsynced (the log
        end with ``readUnCommitted``).

        Why the fsync bound: under ``ASYNC_FLUSH`` a message every replica acknowledged may still be in
        no disk; a power cut of the whole group then takes it (declared lost, docs/architecture.md
        §3.2), and a consumer must not have read it (the soak's read-uncommitted). What this replica
        fsynced survives such a cut, because the election waits for the in-sync replica that holds the
        most."""
        store = self.store
        if store.settings.read_uncommitted:
            return store.log.max_offset
        return min(self.gate.confirm_offset(), store.log.flushed_offset)

    async def flush_for_reads(self) -> None:
        """Before a read answers, fsync up to the confirm offset (shared with every other flush; up to
        ``syncFlushTimeout``), so a reader sees a confirmed message after one fsync, not after
        ``flushIntervalCommitLog``. A read that still finds the fsync short answers with less."""
        store = self.store
        if store.settings.read_uncommitted:
            return
        confirm = self.gate.confirm_offset()
        if store.log.flushed_offset < confirm:
            with contextlib.suppress(TimeoutError, StorageError, OSError):
                async with asyncio.timeout(store.settings.sync_flush_timeout_ms / 1000):
                    await store.flush_to(confirm)

    def read(self, request: ReadRequest) -> tuple[list[StoredMessage], int, int]:
        """Messages at or after ``request.offset``, never past ``read_limit``. Returns (messages, next
        offset, the limit used). A damaged record raises ``CorruptRecordError`` with the messages before
        it (docs/architecture.md §4.7)."""
        log = self.store.log
        limit = self.read_limit()
        if limit <= 0:
            return [], request.offset, limit
        try:
            messages, next_offset = log.read_messages(request.offset, request.max_messages, limit)
        except NotAlignedError as exc:
            raise illegal(f"offset {request.offset} is not a message boundary: {exc.reason}") from None
        return messages, next_offset, limit

    def read_queue(self, request: QueueReadRequest) -> tuple[list[StoredMessage], int, int]:
        """Messages of one (topic, queue) at or after the commit-log position ``request.offset``, never
        past ``read_limit``, through the queue index (brought up to date first, at most
        ``INDEX_CATCH_UP`` messages per call). Returns (messages, the position to continue from, the
        limit used)."""
        log = self.store.log
        limit = self.index_step()
        index = self.queue_index
        entries = index.read(request.topic, request.queue_id, request.offset, request.max_messages)
        messages: list[StoredMessage] = []
        resume = request.offset
        for offset in entries:
            if offset >= limit:  # indexed under a higher limit than this read may see
                return messages, resume, limit
            if offset >= log.min_offset:  # else deleted by retention since it was indexed
                try:
                    messages += log.read_messages(offset, 1, limit)[0]
                except CorruptRecordError as exc:  # one of this queue's messages: answer up to it
                    exc.messages = messages
                    raise
            resume = offset + 1
        if len(entries) < request.max_messages:  # nothing more of this queue below the indexed offset
            resume = max(resume, min(index.indexed_to, limit))
        return messages, resume, limit

    def index_step(self) -> int:
        """Bring the queue index closer to what reads may see (at most ``INDEX_CATCH_UP`` messages);
        returns that limit (``read_limit``)."""
        log = self.store.log
        limit = self.read_limit()
        index = self.queue_index
        if index.generation != self.store.log_generation or index.indexed_to < log.min_offset:
            index.reset(log.min_offset, self.store.log_generation)  # cut, emptied or retained past
        if index.indexed_to < limit:
            try:
                found, next_offset = log.read_messages(
                    index.indexed_to, INDEX_CATCH_UP, limit, skip_deleted=True
                )
            except CorruptRecordError as exc:  # index what came before it, flag it, go on after it
                index.add(exc.messages, exc.offset)
                index.pass_damaged(exc.offset, exc.resume)
            else:
                index.add(found, next_offset)
        return limit


INDEX_CATCH_UP = 4096
"""Messages one queue read indexes at most before answering: a long log is indexed over several reads,
so no read holds the event loop for long (a read meanwhile sees only what is indexed)."""
