"""Sans-IO master side of one HA connection (docs/reference-behaviour.md §11.2). No sockets, threads, clocks
or files.

The shell (``server.py``) owns the socket, the commit log and the clock, and drives one
:class:`MasterConnection` per accepted slave:

    conn = MasterConnection(log_view, now_ms)
    on bytes from the socket:   conn.receive_data(data, now)      (b"" = the slave closed)
    on every append / confirm / epoch change:   conn.update_log(new_view)
    every ~100 ms:              conn.tick(now)                     (heartbeats, idle timeout)
    then, until None:           event = conn.next_event()
        HandshakeRequest  -> register the slave id and flags for this connection
        CaughtUp          -> InSyncState.with_caught_up
        SlaveAck          -> wake waiting puts; recompute confirmOffset; InSyncState.maybe_expand
        ReadLog(o, n, b)  -> conn.supply_batches(o, commitlog.read_batches(o, b, n), now)
        ConnectionClosed  -> close the socket; InSyncState.on_connection_lost
    and write conn.data_to_send() to the socket (await drain before the next round).

Back-pressure: a ``ReadLog`` is only issued while the outbound buffer is empty, so the master reads
the log no faster than the socket drains. Only one read is outstanding at a time.

Corrupt or out-of-order frames never raise out of :meth:`receive_data`: the connection moves to ERROR
and ``next_event`` returns :class:`ConnectionClosed` (after any events of frames that preceded the bad
one). Misuse by the shell (answering a read that was not asked) raises ``LocalProtocolError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from mqha.autoswitch_ha.batching import BatchPlan, fit_to_epoch, plan_batch
from mqha.autoswitch_ha.connection import EXPECTED_CODES, Connection
from mqha.autoswitch_ha.events import (
    CaughtUp,
    EpochHistoryOffer,
    Frame,
    HandshakeRequest,
    MasterEvent,
    OffsetReport,
    ReadLog,
    SlaveAck,
    SlaveIncarnation,
    TransferBatch,
)
from mqha.autoswitch_ha.frames import (
    CODE_INCARNATION,
    MAX_HANDSHAKE_ENTRIES,
    FrameReader,
    encode_frame,
    transfer_frames,
)
from mqha.autoswitch_ha.state import HANDSHAKE, READY, TRANSFER, Role, Trigger
from mqha.autoswitch_ha.sync_state_set import caught_up_time
from mqha.epoch.history import EpochHistory
from mqha.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

_EXPECTED_CODES = EXPECTED_CODES[Role.MASTER]
_BEFORE_HANDSHAKE = _EXPECTED_CODES[READY] | {CODE_INCARNATION}
"""What a master accepts first: mqha's INCARNATION frame (once) or the reference's HANDSHAKE."""


@dataclass(frozen=True, kw_only=True)
class MasterConfig:
    """Store keys of docs/reference-behaviour.md §16.3 the master connection uses (milliseconds and bytes)."""

    transfer_batch_size: int = 32 * 1024  # haTransferBatchSize
    # One ReadLog asks for this much (as batches of transfer_batch_size): one read and one socket write
    # per MiB instead of per 32 KiB batch (a master alone sent 16 KiB messages at ~1,300 MiB/s with
    # 256 KiB, ~1,600 MiB/s with 1 MiB: fewer, larger sends wake the receiver less often).
    read_ahead_bytes: int = 1024 * 1024
    heartbeat_interval_ms: int = 5_000  # haSendHeartbeatInterval
    housekeeping_interval_ms: int = 20_000  # haHousekeepingInterval
    mapped_file_size: int = 1024 * 1024 * 1024  # mappedFileSizeCommitLog, for syncFromLastFile
    max_handshake_entries: int = MAX_HANDSHAKE_ENTRIES

    def __post_init__(self) -> None:
        if self.transfer_batch_size <= 0 or self.mapped_file_size <= 0:
            raise ValueError("transfer_batch_size and mapped_file_size must be positive")
        if not 0 <= self.max_handshake_entries <= MAX_HANDSHAKE_ENTRIES:
            raise ValueError(f"max_handshake_entries must be within [0, {MAX_HANDSHAKE_ENTRIES}]")


@dataclass(frozen=True, kw_only=True)
class LogView:
    """What the master's commit log and epoch file hold now (the shell's snapshot)."""

    min_offset: int
    max_offset: int
    confirm_offset: int
    epochs: EpochHistory


class MasterConnection(Connection[MasterEvent]):
    """One slave's connection, seen from the master."""

    def __init__(self, log: LogView, now_ms: int, config: MasterConfig | None = None) -> None:
        super().__init__(Role.MASTER)
        self.config = config or MasterConfig()
        self._reader = FrameReader(Role.SLAVE)
        self._log = log
        self._outbound: list[bytes | memoryview] = []  # frames, a TRANSFER as header + data

        self.slave_id: int | None = None
        self.incarnation: str | None = None  # from the INCARNATION frame; None: unknown
        self.sync_from_last_file = False
        self.async_learner = False
        self.ack_offset = -1  # slaveAckOffset
        self.request_offset = -1  # slaveRequestOffset: the first ack
        self.transfer_from = -1  # where streaming started (haStatus "transferFromWhere")
        self.next_offset = -1  # next offset to send; -1 until the first ack

        self._pending_read: BatchPlan | None = None
        self._read_stalled = False  # an empty read: wait for update_log or tick before retrying
        # master max when the last batch was sent (docs/reference-behaviour.md §10.4)
        self._last_master_max_offset = -1
        self._last_transfer_ms: int | None = None
        self._last_read_ms = now_ms
        self._last_write_ms = now_ms
        self._confirm_unsent = False  # the confirm offset moved since the last transfer frame

    # -- inputs ----------------------------------------------------------------------------------

    def receive_data(self, data: bytes, now_ms: int) -> None:
        """Bytes from the slave; ``b""`` means it closed the connection."""
        if not self._machine.is_open:
            return  # late bytes after the end are dropped
        if not data:
            self._end(Trigger.CLOSE, "the slave closed the connection")
            return
        self._last_read_ms = now_ms
        self._reader.feed(data)
        try:
            while self._machine.is_open:
                state = self._machine.state
                first = state is READY and self.incarnation is None
                frame = self._reader.next_frame(_BEFORE_HANDSHAKE if first else _EXPECTED_CODES[state])
                if frame is None:
                    break
                self._handle_frame(frame, now_ms)
        except ProtocolError as exc:
            # Remote: the slave's bytes were bad. Local: we could not build an answer from our view.
            self._fail(exc)

    def update_log(self, log: LogView) -> None:
        """The commit log grew, the confirm offset moved, or the epoch history changed.

        A confirm offset that moved is sent with the next batch, or, if this slave has everything,
        in a heartbeat at the next :meth:`tick`: otherwise an idle slave would learn it only after
        ``haSendHeartbeatInterval`` and its readers would lag that long behind the master's. (Not at
        once: under load the next batch is microseconds away and carries it anyway.)
        """
        if log.confirm_offset > self._log.confirm_offset:
            self._confirm_unsent = True
        self._log = log
        self._read_stalled = False

    def supply_log(self, offset: int, data: bytes | memoryview, now_ms: int) -> None:
        """Answer to :class:`ReadLog` with one batch: the whole messages read at ``offset`` (``b""``
        if none)."""
        self.supply_batches(offset, [data], now_ms)

    def supply_batches(self, offset: int, batches: Sequence[bytes | memoryview], now_ms: int) -> None:
        """Answer to :class:`ReadLog`: consecutive batches of whole messages from ``offset`` (none, or
        empty ones, if the log has nothing there yet). Each goes out as one TRANSFER frame."""
        if not self._machine.is_open:
            return  # the read raced with the end of the connection
        plan = self._pending_read
        if plan is None or plan.offset != offset:
            raise LocalProtocolError(
                f"supply_batches({offset}) answers no outstanding ReadLog (pending: {plan})"
            )
        self._pending_read = None
        if not batches or not batches[0]:
            # The view promised bytes the log does not have (yet): wait for update_log or a tick.
            self._read_stalled = True
            return
        fitted = fit_to_epoch(self._log.epochs, offset, batches)
        if fitted is None:
            self._fail(LocalProtocolError(f"the master has no epoch entry containing offset {offset}"))
            return
        entry, batches = fitted  # past the epoch end: read again and sent under the next epoch
        self._outbound += transfer_frames(
            offset, entry.epoch, entry.start_offset, self._log.confirm_offset, batches
        )
        self._sent(now_ms, transfer=True)
        offset += sum(map(len, batches))
        self._last_master_max_offset = self._log.max_offset
        self._last_transfer_ms = now_ms
        self.next_offset = offset

    def tick(self, now_ms: int) -> None:
        """Time passed: idle timeout, heartbeat, caught-up time when there is nothing to send."""
        if not self._machine.is_open:
            return
        idle = now_ms - self._last_read_ms
        if idle > self.config.housekeeping_interval_ms:
            self._end(Trigger.CLOSE, f"nothing received from the slave for {idle} ms")
            return
        if self.state is not TRANSFER:
            return  # the reference master stays silent until the slave's first ack
        self._read_stalled = False
        self._maybe_caught_up(now_ms)
        idle = self._pending_read is None and not self._outbound and self.next_offset >= self._log.max_offset
        if now_ms - self._last_write_ms >= self.config.heartbeat_interval_ms or (
            self._confirm_unsent and idle
        ):
            self._send(self._heartbeat(), now_ms)

    def close(self, reason: str = "closed by the master") -> None:
        """Local orderly close (role change, shutdown). Idempotent."""
        if self._machine.is_open:
            self._end(Trigger.CLOSE, reason)

    # -- outputs ---------------------------------------------------------------------------------

    def next_event(self) -> MasterEvent | None:
        """The next event or action for the shell, or None when there is nothing to do now."""
        if not self._events:
            self._maybe_read()
        return self._events.popleft() if self._events else None

    def data_to_send(self) -> bytes:
        """Drain the outbound buffer."""
        return b"".join(self.chunks_to_send())

    def chunks_to_send(self) -> list[bytes | memoryview]:
        """Drain the outbound buffer as pieces to write in order (no copy of the batches' data)."""
        chunks, self._outbound = self._outbound, []
        return chunks

    # -- internals -------------------------------------------------------------------------------

    def _handle_frame(self, frame: Frame, now_ms: int) -> None:
        if isinstance(frame, SlaveIncarnation):
            self.incarnation = frame.incarnation  # the machine stays READY: the HANDSHAKE follows
        elif isinstance(frame, HandshakeRequest):
            self._machine.process(Trigger.HANDSHAKE_REQUEST)
            self.slave_id = frame.slave_id
            self.sync_from_last_file = frame.sync_from_last_file
            self.async_learner = frame.async_learner
            self._events.append(replace(frame, incarnation=self.incarnation))
            offer = EpochHistoryOffer.from_history(
                self._log.epochs, self._log.max_offset, self.config.max_handshake_entries
            )
            self._send(offer, now_ms)
        else:
            assert isinstance(frame, OffsetReport)  # a slave-frame reader decodes nothing else
            self._handle_ack(frame.max_offset, now_ms)

    def _handle_ack(self, offset: int, now_ms: int) -> None:
        assert self.slave_id is not None  # the table admits acks only after the handshake
        if self.state is HANDSHAKE:
            if offset > self._log.max_offset:
                # After §13 a slave never holds more than the master; a bigger claim means it kept
                # bytes we do not have, and streaming after them would silently diverge.
                raise RemoteProtocolError(
                    f"slave {self.slave_id} reports offset {offset}, "
                    f"beyond the master's max {self._log.max_offset}"
                )
            # Below the log start (deleted by retention): stream from the log start, as the reference
            # clamps a slave's start into [minOffset, maxOffset]; the slave sees the jump in the first
            # frame and empties itself (SlaveConnection._reset_to; docs/architecture.md §4.2).
            start = max(self._start_offset(offset), self._log.min_offset)
            self._machine.process(Trigger.OFFSET_REPORT)
            self.request_offset = offset
            self.transfer_from = self.next_offset = start
        else:
            if offset > self.next_offset:
                raise RemoteProtocolError(
                    f"slave {self.slave_id} acks offset {offset}, beyond what was sent ({self.next_offset})"
                )
            self._machine.process(Trigger.OFFSET_REPORT)
        self.ack_offset = offset
        if not self.async_learner:
            at = caught_up_time(
                ack_offset=offset,
                last_master_max_offset=self._last_master_max_offset,
                last_transfer_ms=self._last_transfer_ms,
                master_max_offset=self._log.max_offset,
                now_ms=now_ms,
            )
            if at is not None:
                self._events.append(CaughtUp(slave_id=self.slave_id, at_ms=at, incarnation=self.incarnation))
        self._events.append(
            SlaveAck(
                slave_id=self.slave_id,
                offset=offset,
                async_learner=self.async_learner,
                incarnation=self.incarnation,
            )
        )

    def _start_offset(self, request: int) -> int:
        """Where streaming starts (docs/reference-behaviour.md §11.2): the slave's offset, or for an empty
        slave the master's min offset, or the start of its last commit-log file when the slave asked for
        that."""
        if request != 0:
            return request
        if self.sync_from_last_file:
            top = self._log.max_offset
            return max(0, top - top % self.config.mapped_file_size)
        return self._log.min_offset

    def _maybe_read(self) -> None:
        """Queue the next :class:`ReadLog` if there is something to send and room to send it."""
        if (
            self.state is not TRANSFER
            or self._pending_read is not None
            or self._read_stalled
            or self._outbound
            or self.next_offset >= self._log.max_offset
        ):
            return
        if self.next_offset < self._log.min_offset:
            # Retention deleted it while this slave was behind (after destroyMapedFileIntervalForcibly):
            # the slave reconnects, and its next handshake starts it at the log start.
            self._fail(
                LocalProtocolError(
                    f"offset {self.next_offset} was deleted from the master "
                    f"(min offset {self._log.min_offset}); the slave re-syncs from there"
                )
            )
            return
        batch = self.config.transfer_batch_size
        plan = plan_batch(self._log.epochs, self.next_offset, max(batch, self.config.read_ahead_bytes))
        if plan is None:
            self._fail(
                LocalProtocolError(f"the master has no epoch entry containing offset {self.next_offset}")
            )
            return
        self._pending_read = plan
        self._events.append(ReadLog(offset=plan.offset, max_bytes=plan.max_bytes, batch_bytes=batch))

    def _maybe_caught_up(self, now_ms: int) -> None:
        # Nothing left to send: the slave has (or is about to have) everything (docs/reference-behaviour.md
        # §10.4).
        if (
            not self.async_learner
            and self.slave_id is not None
            and self._pending_read is None
            and self.next_offset >= self._log.max_offset
        ):
            self._events.append(CaughtUp(slave_id=self.slave_id, at_ms=now_ms, incarnation=self.incarnation))

    def _heartbeat(self) -> TransferBatch:
        epochs = self._log.epochs
        entry = epochs.find_by_offset(self.next_offset) or epochs.first()
        return TransferBatch(
            offset=self.next_offset,
            epoch=entry.epoch if entry else -1,
            epoch_start_offset=entry.start_offset if entry else -1,
            confirm_offset=self._log.confirm_offset,
        )

    def _send(self, frame: Frame, now_ms: int) -> None:
        self._outbound.append(encode_frame(frame))
        self._sent(now_ms, transfer=isinstance(frame, TransferBatch))

    def _sent(self, now_ms: int, *, transfer: bool) -> None:
        self._last_write_ms = now_ms
        if transfer:
            self._confirm_unsent = False  # every transfer header carries the current confirm offset

    def _drop_pending(self) -> None:
        self._outbound.clear()  # nothing more goes out on a finished connection
        self._pending_read = None
