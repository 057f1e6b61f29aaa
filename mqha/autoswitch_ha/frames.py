"""The HA wire codec: the four frames of docs/reference-behaviour.md §11.1, big-endian, exactly the RocketMQ
5.1.1+ layouts.

Layouts (offset: size field), as named ``struct`` formats below:

* slave HANDSHAKE, 16 bytes:  0:4 state=1 | 4:2 isSyncFromLastFile | 6:2 isAsyncLearner | 8:8 slave id
* slave ACK, 12 bytes:        0:4 state=2 | 4:8 slave max offset
* master HANDSHAKE, 20 + 12N: 0:4 state=1 | 4:4 body size = 12N | 8:8 master max offset
                              | 16:4 last epoch | then N × (4 epoch, 8 start offset)
* master TRANSFER, 36 + n:    0:4 state=2 | 4:4 body size n | 8:8 offset | 16:4 epoch
                              | 20:8 epoch start offset | 28:8 confirm offset | then n data bytes

With ``authenticationEnabled`` three authentication frames come first (``auth_frames.py``,
docs/architecture.md §4.1). mqha's slave also sends one INCARNATION frame right before its HANDSHAKE
(20 bytes: 0:4 code "MQI1" | 4:16 incarnation, docs/architecture.md §8.5).

The wire carries no version field (docs/architecture.md §4 fixes the layouts), so :data:`PROTOCOL_VERSION`
only names the layout generation in logs. State codes are the explicit numbers of the reference's
``HAConnectionState`` below, never derived from a Python enum.

:class:`FrameReader` is the incremental decoder: feed it bytes as they arrive, take frames out one at a
time. Anything malformed raises :class:`~mqha.errors.RemoteProtocolError`, after which the reader is
poisoned (every later call raises the same error): a byte stream that lost framing cannot resync.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator, Sequence

from mqha.autoswitch_ha.events import (
    EpochHistoryOffer,
    Frame,
    HandshakeRequest,
    OffsetReport,
    SlaveIncarnation,
    TransferBatch,
)
from mqha.autoswitch_ha.state import Role
from mqha.errors import LocalProtocolError, RemoteProtocolError

PROTOCOL_VERSION = "rocketmq-5.1.1-autoswitch"

# -- state codes on the wire (reference HAConnectionState numbering) --------------------------
CODE_READY = 0
CODE_HANDSHAKE = 1
CODE_TRANSFER = 2
CODE_SUSPEND = 3
CODE_SHUTDOWN = 4
CODE_INCARNATION = 0x4D514931  # "MQI1": mqha's INCARNATION frame (far from 0-4, like the auth codes)
CODE_NAMES = {
    CODE_READY: "READY",
    CODE_HANDSHAKE: "HANDSHAKE",
    CODE_TRANSFER: "TRANSFER",
    CODE_SUSPEND: "SUSPEND",
    CODE_SHUTDOWN: "SHUTDOWN",
    CODE_INCARNATION: "INCARNATION",
}

# -- layouts -----------------------------------------------------------------------------------
STATE_CODE = struct.Struct(">i")
SLAVE_HANDSHAKE = struct.Struct(">ihhq")  # state, isSyncFromLastFile, isAsyncLearner, slave id
SLAVE_ACK = struct.Struct(">iq")  # state, slave max offset
SLAVE_INCARNATION = struct.Struct(">i16s")  # code "MQI1", incarnation (16 bytes)
MASTER_HANDSHAKE_HEADER = struct.Struct(">iiqi")  # state, body size, master max offset, last epoch
EPOCH_ENTRY = struct.Struct(">iq")  # epoch, start offset
TRANSFER_HEADER = struct.Struct(">iiqiqq")  # state, body size, offset, epoch, epoch start, confirm

SLAVE_HANDSHAKE_SIZE = SLAVE_HANDSHAKE.size
SLAVE_ACK_SIZE = SLAVE_ACK.size
MASTER_HANDSHAKE_HEADER_SIZE = MASTER_HANDSHAKE_HEADER.size
EPOCH_ENTRY_SIZE = EPOCH_ENTRY.size
TRANSFER_HEADER_SIZE = TRANSFER_HEADER.size
SLAVE_INCARNATION_SIZE = SLAVE_INCARNATION.size
assert (SLAVE_HANDSHAKE_SIZE, SLAVE_ACK_SIZE, SLAVE_INCARNATION_SIZE) == (16, 12, 20)
assert (MASTER_HANDSHAKE_HEADER_SIZE, EPOCH_ENTRY_SIZE, TRANSFER_HEADER_SIZE) == (20, 12, 36)

# Offset of the body-size field in both master headers (they share their first 20 bytes' layout).
BODY_SIZE_FIELD = struct.Struct(">i")
BODY_SIZE_OFFSET = 4

MAX_HANDSHAKE_ENTRIES = 1000
"""The reference master's handshake buffer holds at most this many epoch entries."""

INITIAL_BUFFER_SIZE = 64 * 1024
"""A reader's buffer once the first bytes arrive (none before: a connection that never sends costs no
buffer, and a freed 64 KiB block per idle connection fragmented the heap); it grows to hold the largest
frame met (plus one read)."""

RECEIVES_PER_BUFFER = 8
"""A buffer that grows holds at least this many receives of the size asked for, so the partial frame at
the end of a receive is moved to the front once per several receives, not after every one (with 1 MiB
frames and 1 MiB receives that move copied about half of all bytes a second time)."""

DEFAULT_MAX_BODY_SIZE = 16 * 1024 * 1024
"""Largest TRANSFER body a reader accepts: a batch is ~haTransferBatchSize (32 KiB) but may be one
whole message larger than that (RocketMQ's maxMessageSize is 4 MiB); anything beyond is corrupt."""

_FLAG = {False: 0, True: 1}

TransferFields = tuple[int, int, int, int, bytes | memoryview]
"""A TRANSFER frame with data, undecoded: (offset, epoch, epoch start offset, confirm offset, data)."""


# -- encoding -----------------------------------------------------------------------------------


def encode_frame(frame: Frame) -> bytes:
    """Bytes of ``frame``; :class:`LocalProtocolError` for something that is not a frame.

    The event classes already confined every field to its wire range.
    """
    if isinstance(frame, HandshakeRequest):
        handshake = SLAVE_HANDSHAKE.pack(
            CODE_HANDSHAKE, _FLAG[frame.sync_from_last_file], _FLAG[frame.async_learner], frame.slave_id
        )
        if frame.incarnation is None:
            return handshake
        return encode_frame(SlaveIncarnation(incarnation=frame.incarnation)) + handshake
    if isinstance(frame, SlaveIncarnation):
        return SLAVE_INCARNATION.pack(CODE_INCARNATION, bytes.fromhex(frame.incarnation))
    if isinstance(frame, OffsetReport):
        return SLAVE_ACK.pack(CODE_TRANSFER, frame.max_offset)
    if isinstance(frame, EpochHistoryOffer):
        if len(frame.entries) > MAX_HANDSHAKE_ENTRIES:
            raise LocalProtocolError(
                f"an offer holds at most {MAX_HANDSHAKE_ENTRIES} epoch entries, got {len(frame.entries)}"
            )
        header = MASTER_HANDSHAKE_HEADER.pack(
            CODE_HANDSHAKE, EPOCH_ENTRY_SIZE * len(frame.entries), frame.max_offset, frame.last_epoch
        )
        return header + b"".join(EPOCH_ENTRY.pack(epoch, start) for epoch, start in frame.entries)
    if isinstance(frame, TransferBatch):
        return transfer_header(frame) + frame.data
    raise LocalProtocolError(f"not an HA frame: {frame!r}")


def transfer_frames(
    offset: int,
    epoch: int,
    epoch_start_offset: int,
    confirm_offset: int,
    batches: Sequence[bytes | memoryview],
) -> list[bytes | memoryview]:
    """The TRANSFER frames of ``batches`` (back to back from ``offset``, all of one epoch) as pieces to
    write in order: header, data, header, data... The data is not copied.

    The master's path for a read's worth of batches: the shared fields are checked once, as the
    :class:`TransferBatch` of the first batch; the later headers only move the offset on.
    """
    if not batches:
        return []
    TransferBatch(
        offset=offset,
        epoch=epoch,
        epoch_start_offset=epoch_start_offset,
        confirm_offset=confirm_offset,
        data=batches[0],
    )
    pack = TRANSFER_HEADER.pack
    pieces: list[bytes | memoryview] = []
    for data in batches:
        pieces += (pack(CODE_TRANSFER, len(data), offset, epoch, epoch_start_offset, confirm_offset), data)
        offset += len(data)
    return pieces


def transfer_header(batch: TransferBatch) -> bytes:
    """The 36-byte header of ``batch``."""
    return TRANSFER_HEADER.pack(
        CODE_TRANSFER,
        len(batch.data),
        batch.offset,
        batch.epoch,
        batch.epoch_start_offset,
        batch.confirm_offset,
    )


# -- decoding -----------------------------------------------------------------------------------


def _remote(exc: LocalProtocolError) -> RemoteProtocolError:
    # Field validation in the event classes speaks of the local side; a decoded frame is the peer's.
    return RemoteProtocolError(f"corrupt frame: {exc}")


def _frame_size(
    sender: Role, code: int, buf: bytes | bytearray | memoryview, max_body_size: int
) -> int | None:
    """Total size of the frame starting at ``buf[0]`` with state ``code``; None if more bytes are needed
    to tell. Raises on a bad code or an impossible body size."""
    if sender is Role.SLAVE:
        if code == CODE_HANDSHAKE:
            return SLAVE_HANDSHAKE_SIZE
        if code == CODE_TRANSFER:
            return SLAVE_ACK_SIZE
        if code == CODE_INCARNATION:
            return SLAVE_INCARNATION_SIZE
        raise RemoteProtocolError(f"bad state code {code} in a frame from a slave (expected 1 or 2)")
    if code not in (CODE_HANDSHAKE, CODE_TRANSFER):
        raise RemoteProtocolError(f"bad state code {code} in a frame from a master (expected 1 or 2)")
    header = MASTER_HANDSHAKE_HEADER_SIZE if code == CODE_HANDSHAKE else TRANSFER_HEADER_SIZE
    if len(buf) < BODY_SIZE_OFFSET + BODY_SIZE_FIELD.size:
        return None
    (body_size,) = BODY_SIZE_FIELD.unpack_from(buf, BODY_SIZE_OFFSET)
    if code == CODE_HANDSHAKE:
        if body_size < 0 or body_size % EPOCH_ENTRY_SIZE:
            raise RemoteProtocolError(
                f"impossible handshake body size {body_size}: not a multiple of {EPOCH_ENTRY_SIZE}"
            )
        if body_size > EPOCH_ENTRY_SIZE * MAX_HANDSHAKE_ENTRIES:
            raise RemoteProtocolError(
                f"impossible handshake body size {body_size}: more than {MAX_HANDSHAKE_ENTRIES} epoch entries"
            )
    elif not 0 <= body_size <= max_body_size:
        raise RemoteProtocolError(f"impossible transfer body size {body_size} (limit {max_body_size})")
    return header + body_size


def _decode_complete(sender: Role, code: int, view: memoryview, *, borrow: bool = False) -> Frame:
    """Decode exactly one complete frame (sizes already checked by :func:`_frame_size`). ``borrow``: a
    TRANSFER frame's data is a read-only slice of ``view`` instead of a copy."""
    try:
        if sender is Role.SLAVE:
            if code == CODE_HANDSHAKE:
                _, sync_from_last_file, async_learner, slave_id = SLAVE_HANDSHAKE.unpack_from(view)
                return HandshakeRequest(
                    slave_id=slave_id,
                    sync_from_last_file=_decode_flag("isSyncFromLastFile", sync_from_last_file),
                    async_learner=_decode_flag("isAsyncLearner", async_learner),
                )
            if code == CODE_INCARNATION:
                _, raw = SLAVE_INCARNATION.unpack_from(view)
                return SlaveIncarnation(incarnation=raw.hex())
            _, max_offset = SLAVE_ACK.unpack_from(view)
            return OffsetReport(max_offset=max_offset)
        if code == CODE_HANDSHAKE:
            _, body_size, max_offset, last_epoch = MASTER_HANDSHAKE_HEADER.unpack_from(view)
            entries = tuple(
                EPOCH_ENTRY.unpack_from(view, MASTER_HANDSHAKE_HEADER_SIZE + i * EPOCH_ENTRY_SIZE)
                for i in range(body_size // EPOCH_ENTRY_SIZE)
            )
            return EpochHistoryOffer(max_offset=max_offset, last_epoch=last_epoch, entries=entries)
        _, body_size, offset, epoch, epoch_start, confirm = TRANSFER_HEADER.unpack_from(view)
        body = view[TRANSFER_HEADER_SIZE : TRANSFER_HEADER_SIZE + body_size]
        data = body.toreadonly() if borrow else bytes(body)
        return TransferBatch(
            offset=offset, epoch=epoch, epoch_start_offset=epoch_start, confirm_offset=confirm, data=data
        )
    except LocalProtocolError as exc:
        raise _remote(exc) from None


def _decode_flag(name: str, value: int) -> bool:
    if value not in (0, 1):
        raise RemoteProtocolError(f"corrupt frame: {name} must be 0 or 1, got {value}")
    return value == 1


def decode_frame(
    data: bytes | bytearray | memoryview, sender: Role, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE
) -> Frame:
    """Decode ``data`` holding exactly one frame sent by ``sender``; anything else raises
    :class:`RemoteProtocolError` (short, trailing bytes, bad code, impossible sizes, bad fields)."""
    data = bytes(data)
    if len(data) < STATE_CODE.size:
        raise RemoteProtocolError(f"short frame: {len(data)} bytes")
    (code,) = STATE_CODE.unpack_from(data)
    size = _frame_size(sender, code, data, max_body_size)
    if size is None or len(data) < size:
        raise RemoteProtocolError(f"short frame: {len(data)} bytes, the header announces {size or 'more'}")
    if len(data) > size:
        raise RemoteProtocolError(f"frame of {size} bytes followed by {len(data) - size} stray bytes")
    return _decode_complete(sender, code, memoryview(data))


class FrameReader:
    """Incremental decoder of the frames one peer (``sender``) sends.

    ``feed(data)`` buffers bytes; ``next_frame()`` returns the next complete frame or ``None`` when
    more bytes are needed. ``expected`` (wire state codes) rejects a well-formed frame that the
    connection's current state cannot accept, as soon as its first four bytes are in.

    A socket can also fill the buffer directly: ``receive_buffer()`` is writable free space, and
    ``buffer_updated(n)`` says how much of it was filled (``recv_into``: one copy, kernel to here).

    With ``borrow=True`` a TRANSFER frame's data is a read-only view of this buffer, not a copy. It
    stays valid until the next ``feed`` or ``receive_buffer`` call, which may overwrite it: a caller
    must be done with every borrowed batch before it passes in more bytes.
    """

    def __init__(
        self, sender: Role, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE, borrow: bool = False
    ) -> None:
        self.sender = sender
        self.max_body_size = max_body_size
        self.borrow = borrow
        # Bytes [_start, _end) are received but not decoded. The buffer never resizes in place (a
        # borrowed view would forbid it): it is compacted by copying within, or replaced when too small.
        self._buf = bytearray()  # allocated at the first receive (INITIAL_BUFFER_SIZE)
        self._start = 0
        self._end = 0
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet decoded."""
        return self._end - self._start

    def receive_buffer(self, min_size: int = 1) -> memoryview:
        """Writable space of at least ``min_size`` bytes for the next received bytes; report how many
        were written with :meth:`buffer_updated`. Invalidates borrowed batches (see the class doc)."""
        if self._error is not None:
            raise self._error
        buf, start, end = self._buf, self._start, self._end
        if start == end:
            start = end = self._start = self._end = 0
        if len(buf) - end < min_size:
            pending = end - start
            if pending + min_size <= len(buf):
                buf[:pending] = buf[start:end]  # move the partial frame to the front
            else:
                grown = bytearray(
                    max(pending + min_size, 2 * len(buf), RECEIVES_PER_BUFFER * min_size, INITIAL_BUFFER_SIZE)
                )
                grown[:pending] = buf[start:end]
                self._buf = buf = grown
            self._start, self._end = 0, pending
            end = pending
        return memoryview(buf)[end:]

    def buffer_updated(self, count: int) -> None:
        """``count`` bytes were written at the start of the last :meth:`receive_buffer`."""
        if not 0 <= count <= len(self._buf) - self._end:
            raise ValueError(f"{count} bytes cannot have been written into the receive buffer")
        self._end += count

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise self._error
        size = len(data)
        if size:
            self.receive_buffer(size)[:size] = data
            self.buffer_updated(size)

    def next_frame(self, expected: Collection[int] | None = None) -> Frame | None:
        if self._error is not None:
            raise self._error
        try:
            return self._next_frame(expected)
        except RemoteProtocolError as exc:
            self._error = exc
            raise

    def transfer_run(self) -> list[TransferFields]:
        """The complete TRANSFER frames with data buffered from here on, as :data:`TransferFields`.

        The slave's fast path for a stream of batches: no :class:`TransferBatch` per frame. It stops
        before anything else (a partial frame, another code, a heartbeat, a field out of a
        :class:`TransferBatch`'s range), which :meth:`next_frame` then decodes or rejects. Call it only
        where a TRANSFER frame is expected. A signed wire field cannot exceed its own range, so the
        lower bounds are all there is to check.
        """
        if self._error is not None:
            raise self._error
        buf, start, end = self._buf, self._start, self._end
        view = memoryview(buf)
        unpack = TRANSFER_HEADER.unpack_from
        max_body_size = self.max_body_size
        run: list[TransferFields] = []
        while end - start >= TRANSFER_HEADER_SIZE:
            code, size, offset, epoch, epoch_start, confirm = unpack(buf, start)
            stop = start + TRANSFER_HEADER_SIZE + size
            if not (
                code == CODE_TRANSFER
                and 0 < size <= max_body_size
                and stop <= end
                and 0 <= epoch_start <= offset
                and epoch >= 0
                and confirm >= -1
            ):
                break
            data = view[start + TRANSFER_HEADER_SIZE : stop]
            run.append(
                (offset, epoch, epoch_start, confirm, data.toreadonly() if self.borrow else bytes(data))
            )
            start = stop
        self._start = start
        return run

    def frames(self, expected: Collection[int] | None = None) -> Iterator[Frame]:
        """Every complete frame buffered so far."""
        while (frame := self.next_frame(expected)) is not None:
            yield frame

    def _next_frame(self, expected: Collection[int] | None) -> Frame | None:
        start, available = self._start, self._end - self._start
        if available < STATE_CODE.size:
            return None
        view = memoryview(self._buf)[start : self._end]
        (code,) = STATE_CODE.unpack_from(view)
        size = _frame_size(self.sender, code, view, self.max_body_size)
        if expected is not None and code not in expected:
            wanted = " or ".join(CODE_NAMES.get(c, str(c)) for c in sorted(expected)) or "no frame"
            raise RemoteProtocolError(
                f"out-of-order {CODE_NAMES[code]} frame from the {self.sender.value}: expected {wanted}"
            )
        if size is None or available < size:
            return None
        frame = _decode_complete(self.sender, code, view[:size], borrow=self.borrow)
        self._start = start + size
        return frame
