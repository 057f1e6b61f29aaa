"""Sans-IO slave side of one HA connection (docs/reference-behaviour.md §11.3, §13). No sockets, threads,
clocks or files.

The shell (``client.py``) owns the socket, the commit log, the epoch file and the clock. For every TCP
connection to the master it builds a fresh :class:`SlaveConnection` from the replica's current state
(after its own start-up recovery of a torn tail) and drives it:

    conn = SlaveConnection(broker_id=..., epochs=epoch_history,
                           max_offset=commitlog.max_offset, min_offset=commitlog.min_offset)
    on connect:                 conn.connection_made(now)
    on bytes from the socket:   conn.receive_data(data, now)      (b"" = the master closed)
    every ~100 ms:              conn.tick(now)                     (ACK heartbeat, idle timeout)
    then, in order, until None: event = conn.next_event()
        TruncateTo(o, epochs)   -> save epochs; commitlog.truncate(o); conn.truncation_done(now)
                                   (on failure: conn.truncation_failed(error))
        AppendEpoch(.., epochs) -> save epochs
        AppendData(o, e, data)  -> commitlog.append_raw(o, data); conn.log_appended(new max, now)
        SetConfirmOffset(o)     -> store the confirm offset
        ConnectionClosed        -> close the socket; reconnect later (the reference waits 5 s)
    and write conn.data_to_send() to the socket.

Actions must be executed in the order returned: an epoch entry is saved before the data it labels,
and the confirm offset is set after the data it covers. The slave ACKs only what the shell reported
with ``log_appended`` (never data still in flight), and ACKs as soon as a truncation is done rather
than waiting for the next heartbeat (docs/reference-behaviour.md §17 item 13 fixed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqha.autoswitch_ha.connection import EXPECTED_CODES, Connection
from mqha.autoswitch_ha.events import (
    AppendData,
    AppendEpoch,
    EpochHistoryOffer,
    Frame,
    HandshakeRequest,
    OffsetReport,
    ResetLog,
    SetConfirmOffset,
    SlaveEvent,
    TransferBatch,
    TruncateTo,
)
from mqha.autoswitch_ha.frames import DEFAULT_MAX_BODY_SIZE, FrameReader, TransferFields, encode_frame
from mqha.autoswitch_ha.state import TRANSFER, ConnectionState, Role, Trigger
from mqha.epoch.history import EpochEntry, EpochHistory, find_consistent_point
from mqha.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

_EXPECTED_CODES = EXPECTED_CODES[Role.SLAVE]


@dataclass(frozen=True, kw_only=True)
class SlaveConfig:
    """Store keys of docs/reference-behaviour.md §16.3 the slave connection uses (milliseconds and bytes)."""

    heartbeat_interval_ms: int = 5_000  # haSendHeartbeatInterval
    housekeeping_interval_ms: int = 20_000  # haHousekeepingInterval
    sync_from_last_file: bool = False  # syncFromLastFile
    async_learner: bool = False  # asyncLearner
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    # mappedFileSizeCommitLog: a log start is a segment base; 0 = unknown (never re-sync by emptying)
    mapped_file_size: int = 0


@dataclass(frozen=True, kw_only=True)
class TruncationDecision:
    """Where the handshake leaves the local replica: log cut to ``offset``, epochs as ``epochs``."""

    offset: int
    epochs: EpochHistory
    reset: bool = False  # drop the whole local log first: nothing of it is the master's lineage
    reason: str = field(default="", compare=False)  # why, for a reset


def decide_truncation(
    local: EpochHistory,
    local_max_offset: int,
    master: EpochHistory,
    master_max_offset: int,
    local_min_offset: int = 0,
) -> TruncationDecision | None:
    """docs/reference-behaviour.md §13 ``doTruncate``: how far the local log agrees with the master's.

    * ``p = find_consistent_point`` of both histories closed at their max offsets, capped at the local
      max; epoch entries starting at or after ``p`` are dropped;
    * an empty local log has nothing to verify: its epochs are dropped (a zero-length entry there
      would otherwise block every later handshake with a master that never had it);
    * a log with data but no epoch history, or whose agreement point lies at or below its first
      retained offset, keeps nothing: it is cut to its min offset (the lowest offset a commit log can
      truncate to). The reference keeps a log without epochs and appends after it unverified; mqha
      cuts it, since nothing proves it matches the master.
    * no consistent point (case D): the replica is emptied (``reset``) and re-syncs from the master's
      log start, as an empty replica does (docs/architecture.md §4.2). Either the master's retention
      deleted everything this replica holds (it ends at or before the master's oldest epoch entry), or
      nothing it holds is in the master's log (e.g. the master lost its whole tail in a power cut and
      was elected anyway). The elected master's log is the lineage; the reference stops here and needs
      repair by hand, while the replica keeps serving reads of messages at offsets the master reuses.
      None only when the master offers no epoch history at all (no lineage to re-sync from).
    """
    nothing = TruncationDecision(offset=local_min_offset, epochs=EpochHistory())
    if local_max_offset <= local_min_offset:
        return TruncationDecision(offset=local_max_offset, epochs=EpochHistory())
    if not local:
        return nothing
    point = find_consistent_point(
        local.with_last_end(local_max_offset), master.with_last_end(master_max_offset)
    )
    if point is None:
        oldest = master.first()
        if oldest is None:
            return None
        if local_max_offset <= oldest.start_offset:
            reason = (
                f"the local log ends at {local_max_offset}, at or before the master's oldest epoch "
                f"entry (epoch {oldest.epoch} from {oldest.start_offset})"
            )
        else:
            reason = (
                f"no consistent point between the local epochs {local.pairs()} (log "
                f"[{local_min_offset}, {local_max_offset})) and the master's {master.pairs()} (max offset "
                f"{master_max_offset}): nothing this replica holds is in the master's log"
            )
        return TruncationDecision(offset=0, epochs=EpochHistory(), reset=True, reason=reason)
    offset = min(point, local_max_offset)
    if offset <= local_min_offset:
        return nothing
    return TruncationDecision(offset=offset, epochs=local.truncate_suffix_by_offset(offset))


class SlaveConnection(Connection[SlaveEvent]):
    """One connection to the master, seen from the slave."""

    def __init__(
        self,
        *,
        broker_id: int,
        epochs: EpochHistory,
        max_offset: int,
        min_offset: int = 0,
        config: SlaveConfig | None = None,
        borrow: bool = False,
        incarnation: str | None = None,
    ) -> None:
        """``borrow``: :class:`AppendData` carries views of the receive buffer instead of copies; the
        shell must execute them before it passes in more bytes (:meth:`receive_buffer`).
        ``incarnation``: this broker process's, sent in an INCARNATION frame before the HANDSHAKE
        (None: the reference's 16-byte handshake alone; the master then never counts this replica)."""
        super().__init__(Role.SLAVE)
        self.config = config or SlaveConfig()
        self.broker_id = broker_id
        self.incarnation = incarnation
        self._reader = FrameReader(Role.MASTER, max_body_size=self.config.max_body_size, borrow=borrow)
        self._outbound = bytearray()
        # The replica as it will be once every returned action is executed.
        self._epochs = epochs
        self._min_offset = min_offset
        self._expected_offset = max_offset  # where the next batch must start
        self._pending: TruncationDecision | None = None
        self._first_transfer = True  # no TRANSFER frame yet on this connection
        self.reported_offset = -1  # currentReportedOffset: the last offset ACKed
        self.confirm_offset = -1
        self.master_max_offset = -1  # from the master's handshake
        self._last_read_ms = 0
        self._last_write_ms = 0

    # -- queries ---------------------------------------------------------------------------------

    @property
    def epochs(self) -> EpochHistory:
        """The epoch history once every returned action is executed."""
        return self._epochs

    @property
    def expected_offset(self) -> int:
        """The local log end once every returned action is executed: where the next batch starts."""
        return self._expected_offset

    # -- inputs ----------------------------------------------------------------------------------

    def connection_made(self, now_ms: int) -> None:
        """TCP is up: send the INCARNATION frame and the 16-byte handshake."""
        self._machine.process(Trigger.CONNECTION_MADE)
        self._last_read_ms = now_ms
        self._send(
            HandshakeRequest(
                slave_id=self.broker_id,
                sync_from_last_file=self.config.sync_from_last_file,
                async_learner=self.config.async_learner,
                incarnation=self.incarnation,
            ),
            now_ms,
        )

    def receive_data(self, data: bytes, now_ms: int) -> None:
        """Bytes from the master; ``b""`` means it closed the connection."""
        if not self._machine.is_open:
            return
        if not data:
            self._end(Trigger.CLOSE, "the master closed the connection")
            return
        try:
            self._reader.feed(data)
        except ProtocolError as exc:
            self._fail(exc)
            return
        self._decode(now_ms)

    def receive_buffer(self, min_size: int = 1) -> memoryview:
        """Writable space for bytes from the master (``recv_into``); then :meth:`buffer_updated`."""
        if not self._machine.is_open:  # bytes after the end are dropped: a scratch buffer takes them
            return memoryview(bytearray(min_size))
        return self._reader.receive_buffer(min_size)

    def buffer_updated(self, count: int, now_ms: int) -> None:
        """``count`` bytes from the master were written into :meth:`receive_buffer`'s space."""
        if not self._machine.is_open:
            return
        self._reader.buffer_updated(count)
        self._decode(now_ms)

    def _decode(self, now_ms: int) -> None:
        self._last_read_ms = now_ms
        try:
            while self._machine.is_open:
                if self._machine.state is TRANSFER and (run := self._reader.transfer_run()):
                    self._accept_run(run)
                    continue
                frame = self._reader.next_frame(_EXPECTED_CODES[self._machine.state])
                if frame is None:
                    break
                self._handle_frame(frame)
        except ProtocolError as exc:
            self._fail(exc)

    def truncation_done(self, now_ms: int) -> None:
        """The shell executed :class:`TruncateTo`: start TRANSFER and ACK where the log now ends."""
        if not self._machine.is_open:
            return  # the connection ended while the shell was truncating; nothing to resume
        decision = self._pending
        self._machine.process(Trigger.TRUNCATION_DONE)
        assert decision is not None  # SUSPEND is entered only with a decision pending
        self._pending = None
        self._epochs = decision.epochs
        self._expected_offset = decision.offset
        self._report(decision.offset, now_ms)

    def truncation_failed(self, error: Exception) -> None:
        """The shell could not execute :class:`TruncateTo` (e.g. not a message boundary)."""
        if self._machine.is_open:
            self._fail(error)

    def log_appended(self, max_offset: int, now_ms: int) -> None:
        """The shell executed :class:`AppendData` actions; the local log now ends at ``max_offset``."""
        if not self._machine.is_open:
            return
        if self.state is not TRANSFER:
            raise LocalProtocolError(f"log_appended in state {self.state.value}: no data was asked for")
        if max_offset > self._expected_offset:
            raise LocalProtocolError(
                f"log_appended({max_offset}) is beyond the data handed out (up to {self._expected_offset})"
            )
        if max_offset > self.reported_offset:
            self._report(max_offset, now_ms)

    def tick(self, now_ms: int) -> None:
        """Time passed: idle timeout, and in TRANSFER a heartbeat ACK when nothing was sent lately."""
        if not self._machine.is_open or self.state is ConnectionState.READY:
            return
        idle = now_ms - self._last_read_ms
        if idle > self.config.housekeeping_interval_ms:
            self._end(Trigger.CLOSE, f"nothing received from the master for {idle} ms")
            return
        if self.state is TRANSFER and now_ms - self._last_write_ms >= self.config.heartbeat_interval_ms:
            self._report(self.reported_offset, now_ms)

    def close(self, reason: str = "closed by the slave") -> None:
        """Local orderly close (role change, shutdown). Idempotent."""
        if self._machine.is_open:
            self._end(Trigger.CLOSE, reason)

    # -- outputs ---------------------------------------------------------------------------------

    def next_event(self) -> SlaveEvent | None:
        return self._events.popleft() if self._events else None

    def peek_event(self) -> SlaveEvent | None:
        """The event :meth:`next_event` would return, left in the queue."""
        return self._events[0] if self._events else None

    def data_to_send(self) -> bytes:
        data = bytes(self._outbound)
        self._outbound.clear()
        return data

    # -- internals -------------------------------------------------------------------------------

    def _handle_frame(self, frame: Frame) -> None:
        if isinstance(frame, EpochHistoryOffer):
            self._handle_offer(frame)
        else:
            assert isinstance(frame, TransferBatch)  # a master-frame reader decodes nothing else
            self._machine.process(Trigger.TRANSFER_BATCH)
            self._handle_batch(frame)

    def _handle_offer(self, offer: EpochHistoryOffer) -> None:
        decision = decide_truncation(
            self._epochs, self._expected_offset, offer.history(), offer.max_offset, self._min_offset
        )
        if decision is None:
            raise RemoteProtocolError(
                f"the master offers no epoch history (max offset {offer.max_offset}): nothing to "
                f"follow (local epochs {self._epochs.pairs()}, max offset {self._expected_offset})"
            )
        self._machine.process(Trigger.EPOCH_HISTORY_OFFER)
        self.master_max_offset = offer.max_offset
        self._pending = decision
        if decision.reset:
            oldest = offer.history().first()
            assert oldest is not None  # decide_truncation resets only against a master history
            self._events.append(ResetLog(master_start=oldest.start_offset, reason=decision.reason))
        self._events.append(TruncateTo(offset=decision.offset, epochs=decision.epochs))

    def _accept_run(self, run: list[TransferFields]) -> None:
        """Batches with data, straight from the reader. Those that continue the local log in its last
        epoch become one :class:`AppendData`; any other (the first of a new epoch or of an empty log, or
        a bad one) goes through :meth:`_handle_batch`, which applies the general rule or raises. Only the
        last confirm offset of a stretch is set: the shell applies it after the stretch's data anyway."""
        self._machine.process(Trigger.TRANSFER_BATCH)
        last = self._epochs.last()
        parts: list[bytes | memoryview] = []
        start = end = self._expected_offset
        confirm = -1
        for offset, epoch, epoch_start, batch_confirm, data in run:
            if (
                last is not None
                and offset == end
                and epoch == last.epoch
                and epoch_start == last.start_offset
            ):
                parts.append(data)
                end += len(data)
                self._first_transfer = False
                if batch_confirm >= 0:
                    confirm = min(batch_confirm, end)
                continue
            self._flush_stretch(start, end, parts, last, confirm)
            batch = TransferBatch(
                offset=offset,
                epoch=epoch,
                epoch_start_offset=epoch_start,
                confirm_offset=batch_confirm,
                data=data,
            )
            self._handle_batch(batch)
            last = self._epochs.last()
            parts = []
            start = end = self._expected_offset
            confirm = -1
        self._flush_stretch(start, end, parts, last, confirm)

    def _flush_stretch(
        self, start: int, end: int, parts: list[bytes | memoryview], last: EpochEntry | None, confirm: int
    ) -> None:
        if parts:
            assert last is not None  # a stretch continues the last epoch
            self._events.append(AppendData(offset=start, epoch=last.epoch, parts=tuple(parts)))
            self._expected_offset = end
        self._set_confirm(confirm)

    def _handle_batch(self, batch: TransferBatch) -> None:
        if self._first_transfer:
            self._first_transfer = False
            size = self.config.mapped_file_size
            if batch.data and batch.offset > self._expected_offset > 0 and size and batch.offset % size == 0:
                self._reset_to(batch.offset)
        if batch.data:
            self._accept_data(batch)
        elif batch.offset >= 0 and self._expected_offset not in (0, batch.offset):
            raise RemoteProtocolError(
                f"heartbeat says the next offset is {batch.offset} but the local log ends at "
                f"{self._expected_offset}"
            )
        if batch.confirm_offset >= 0:
            self._set_confirm(min(batch.confirm_offset, self._expected_offset))

    def _reset_to(self, master_start: int) -> None:
        """The master streams from ``master_start``, beyond this replica's end: its own log starts there
        (retention deleted what lay between; it clamps a slave's start to its min offset as the reference
        does). Only the first frame of a connection, with data, at a segment base may do this: the replica
        is emptied and takes the stream as an empty replica would (docs/architecture.md §4.2)."""
        reason = (
            f"the master's log starts at {master_start}, beyond the local log end {self._expected_offset}"
        )
        self._events.append(ResetLog(master_start=master_start, reason=reason))
        self._epochs = EpochHistory()
        self._expected_offset = 0

    def _set_confirm(self, confirm: int) -> None:
        """The master's confirm offset capped at the local log end; ``-1``: none came."""
        if confirm >= 0 and confirm != self.confirm_offset:
            self.confirm_offset = confirm
            self._events.append(SetConfirmOffset(offset=confirm))

    def _accept_data(self, batch: TransferBatch) -> None:
        # An empty local log takes the stream wherever the master starts it (its min offset, or the
        # start of its last file); otherwise the batch must continue the local log exactly.
        if self._expected_offset not in (0, batch.offset):
            raise RemoteProtocolError(
                f"batch at offset {batch.offset} but the local log ends at {self._expected_offset}"
            )
        last = self._epochs.last()
        if last is None or batch.epoch > last.epoch:
            if last is not None and batch.epoch_start_offset != batch.offset:
                # A new epoch must begin exactly where the local log ends: its earlier bytes would be
                # here under another epoch, i.e. the logs diverged.
                raise RemoteProtocolError(
                    f"epoch {batch.epoch} starts at {batch.epoch_start_offset}, but its first batch for "
                    f"this replica is at {batch.offset}"
                )
            self._epochs = self._epochs.append(batch.epoch, batch.epoch_start_offset)
            self._events.append(
                AppendEpoch(epoch=batch.epoch, start_offset=batch.epoch_start_offset, epochs=self._epochs)
            )
        elif batch.epoch < last.epoch or batch.epoch_start_offset != last.start_offset:
            raise RemoteProtocolError(
                f"batch labelled epoch {batch.epoch} starting at {batch.epoch_start_offset} conflicts with "
                f"the local last epoch {last.epoch} starting at {last.start_offset}"
            )
        self._events.append(AppendData(offset=batch.offset, epoch=batch.epoch, parts=(batch.data,)))
        self._expected_offset = batch.end_offset

    def _report(self, offset: int, now_ms: int) -> None:
        self.reported_offset = offset
        self._send(OffsetReport(max_offset=offset), now_ms)

    def _send(self, frame: Frame, now_ms: int) -> None:
        self._outbound += encode_frame(frame)
        self._last_write_ms = now_ms

    def _drop_pending(self) -> None:
        self._outbound.clear()
        self._pending = None
