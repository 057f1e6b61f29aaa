"""Events of the HA protocol: the frames peers exchange, and what the connection machines tell shells.

Frozen, keyword-only dataclasses that check their own fields and raise
:class:`~mqha.errors.LocalProtocolError` on impossible values (h11 ``_events.py`` style). The codec
(``frames.py``) turns the four *frame* events into bytes and back; the others never touch the wire.

Frames (docs/reference-behaviour.md §11.1):

* slave → master: :class:`HandshakeRequest`, :class:`OffsetReport` (the ACK), and mqha's
  :class:`SlaveIncarnation` right before the HANDSHAKE (docs/architecture.md §8.5);
* master → slave: :class:`EpochHistoryOffer` (the master's handshake), :class:`TransferBatch`
  (data, or a heartbeat when ``data`` is empty).

Returned by ``MasterConnection.next_event()``: :class:`HandshakeRequest` (the slave's identity),
:class:`CaughtUp`, :class:`SlaveAck`, the action :class:`ReadLog` (answer with
``supply_log``) and :class:`ConnectionClosed`.

Returned by ``SlaveConnection.next_event()``: the actions :class:`TruncateTo` (answer with
``truncation_done`` / ``truncation_failed``), :class:`AppendEpoch`, :class:`AppendData` (then report
``log_appended``), :class:`SetConfirmOffset`, and :class:`ConnectionClosed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqha.epoch.history import EpochHistory
from mqha.errors import LocalProtocolError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _check_int(name: str, value: object, low: int, high: int) -> None:
    # bool is an int subclass; a flag passed where an offset belongs is a caller bug.
    if not isinstance(value, int) or isinstance(value, bool):
        raise LocalProtocolError(f"{name} must be an int, got {value!r}")
    if not low <= value <= high:
        raise LocalProtocolError(f"{name} = {value} is outside [{low}, {high}]")


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise LocalProtocolError(f"{name} must be a bool, got {value!r}")


# -- frames: slave -> master -----------------------------------------------------------------


INCARNATION_HEX_SIZE = 32
"""An incarnation is 16 random bytes as 32 lowercase hex digits (``secrets.token_hex(16)``)."""


def check_incarnation(value: object) -> str:
    """``value`` if it is an incarnation (32 lowercase hex digits), else :class:`LocalProtocolError`."""
    if not isinstance(value, str) or len(value) != INCARNATION_HEX_SIZE or value.strip("0123456789abcdef"):
        raise LocalProtocolError(
            f"an incarnation is {INCARNATION_HEX_SIZE} lowercase hex digits, got {value!r}"
        )
    return value


@dataclass(frozen=True, kw_only=True)
class HandshakeRequest:
    """The slave introduces itself (16 bytes on the wire).

    ``incarnation``: the slave process's incarnation. The codec sends it as a
    :class:`SlaveIncarnation` frame before the 16 bytes (None: the reference's handshake alone); the
    master's machine attaches the one it received to the request it reports (None: unknown).
    """

    slave_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False
    incarnation: str | None = None

    def __post_init__(self) -> None:
        _check_int("slave_id", self.slave_id, 1, INT64_MAX)  # controller broker ids start at 1
        _check_flag("sync_from_last_file", self.sync_from_last_file)
        _check_flag("async_learner", self.async_learner)
        if self.incarnation is not None:
            check_incarnation(self.incarnation)


@dataclass(frozen=True, kw_only=True)
class SlaveIncarnation:
    """mqha's INCARNATION frame: the slave process's incarnation (20 bytes on the wire).

    Sent right before the HANDSHAKE on every connection (docs/architecture.md §8.5).
    """

    incarnation: str

    def __post_init__(self) -> None:
        check_incarnation(self.incarnation)


@dataclass(frozen=True, kw_only=True)
class OffsetReport:
    """The slave's ACK: its commit log ends at ``max_offset`` (12 bytes on the wire)."""

    max_offset: int

    def __post_init__(self) -> None:
        _check_int("max_offset", self.max_offset, 0, INT64_MAX)


# -- frames: master -> slave -----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class EpochHistoryOffer:
    """The master's handshake answer: its epoch entries ``(epoch, start_offset)`` and max offset.

    ``last_epoch`` duplicates the last entry's epoch on the wire (``-1`` with no entries); a
    disagreement is a corrupt frame.
    """

    max_offset: int
    last_epoch: int
    entries: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        _check_int("max_offset", self.max_offset, 0, INT64_MAX)
        _check_int("last_epoch", self.last_epoch, -1, INT32_MAX)
        if not isinstance(self.entries, tuple):
            object.__setattr__(self, "entries", tuple(tuple(pair) for pair in self.entries))
        previous: tuple[int, int] | None = None
        for pair in self.entries:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise LocalProtocolError(f"epoch entry must be an (epoch, start_offset) pair, got {pair!r}")
            epoch, start = pair
            _check_int("entry epoch", epoch, 0, INT32_MAX)
            _check_int("entry start offset", start, 0, INT64_MAX)
            if previous is not None and not (epoch > previous[0] and start > previous[1]):
                raise LocalProtocolError(
                    f"epoch entries must strictly increase in epoch and start offset: {previous} then {pair}"
                )
            previous = pair
        expected_last = self.entries[-1][0] if self.entries else -1
        if self.last_epoch != expected_last:
            raise LocalProtocolError(
                f"last_epoch {self.last_epoch} does not match the entries (last entry epoch {expected_last})"
            )
        if self.entries and self.entries[-1][1] > self.max_offset:
            raise LocalProtocolError(
                f"last epoch starts at {self.entries[-1][1]}, beyond the master max offset {self.max_offset}"
            )

    @classmethod
    def from_history(cls, history: EpochHistory, max_offset: int, limit: int) -> EpochHistoryOffer:
        """The offer for ``history``: its newest ``limit`` entries (the reference's buffer holds 1000)."""
        pairs = tuple(history.pairs()[-limit:]) if limit > 0 else ()
        return cls(max_offset=max_offset, last_epoch=pairs[-1][0] if pairs else -1, entries=pairs)

    def history(self) -> EpochHistory:
        """The offered entries as an (open-ended) :class:`EpochHistory`."""
        return EpochHistory.from_pairs(self.entries)


@dataclass(frozen=True, kw_only=True)
class TransferBatch:
    """Commit-log bytes ``data`` starting at ``offset``, all written in ``epoch`` (36-byte header + data).

    An empty ``data`` is a heartbeat: ``offset`` is then the next offset to transfer (``-1`` when not
    chosen yet) and ``epoch`` / ``epoch_start_offset`` the current transfer epoch (``-1`` if none).
    mqha never lets a batch span epochs (docs/reference-behaviour.md §17 item 12 fixed), so
    ``epoch_start_offset <= offset``.
    """

    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    data: bytes | memoryview = field(default=b"", repr=False)  # a view: borrowed, see FrameReader

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes | memoryview):
            object.__setattr__(self, "data", bytes(self.data))
        if len(self.data) > INT32_MAX:  # the body size is an int32 on the wire
            raise LocalProtocolError(f"batch of {len(self.data)} bytes is too large for one frame")
        low = 0 if self.data else -1
        offset, epoch, start, confirm = self.offset, self.epoch, self.epoch_start_offset, self.confirm_offset
        # One combined test for the usual case (a slave decodes tens of thousands of these a second);
        # the field checks below say which value is wrong.
        if not (
            type(offset) is type(epoch) is type(start) is type(confirm) is int
            and low <= offset <= INT64_MAX
            and low <= epoch <= INT32_MAX
            and low <= start <= INT64_MAX
            and -1 <= confirm <= INT64_MAX
        ):
            _check_int("offset", offset, low, INT64_MAX)
            _check_int("epoch", epoch, low, INT32_MAX)
            _check_int("epoch_start_offset", start, low, INT64_MAX)
            _check_int("confirm_offset", confirm, -1, INT64_MAX)
        if self.data and self.epoch_start_offset > self.offset:
            raise LocalProtocolError(
                f"batch at offset {self.offset} cannot belong to epoch {self.epoch} "
                f"starting later at {self.epoch_start_offset}"
            )

    @property
    def is_heartbeat(self) -> bool:
        return not self.data

    @property
    def end_offset(self) -> int:
        return self.offset + len(self.data)

    def __repr__(self) -> str:
        return (
            f"TransferBatch(offset={self.offset}, epoch={self.epoch}, "
            f"epoch_start_offset={self.epoch_start_offset}, confirm_offset={self.confirm_offset}, "
            f"len(data)={len(self.data)})"
        )


Frame = HandshakeRequest | SlaveIncarnation | OffsetReport | EpochHistoryOffer | TransferBatch


# -- master connection -> its shell ----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ReadLog:
    """Action: read whole messages from the commit log at ``offset``, about ``max_bytes`` of them.

    They come as consecutive batches of at most ``batch_bytes`` each (0: one batch). The shell answers
    with ``MasterConnection.supply_batches(offset, batches, now_ms)`` (one batch:
    ``supply_log(offset, data, now_ms)``); no batches, or an empty one, means nothing is there yet. A
    batch may exceed ``batch_bytes`` only by holding one whole message larger than it. The read must
    not run past the end of the epoch (the machine cuts it there anyway).
    """

    offset: int
    max_bytes: int
    batch_bytes: int = 0


@dataclass(frozen=True, kw_only=True)
class SlaveAck:
    """The slave acknowledged that its log ends at ``offset``.

    The master then wakes waiting producers, recomputes confirmOffset if the slave is in the local
    SyncStateSet, and maybe expands that set (docs/reference-behaviour.md §11.2).
    """

    slave_id: int
    offset: int
    async_learner: bool
    incarnation: str | None = None  # the connection's (None: unknown, it never counts)


@dataclass(frozen=True, kw_only=True)
class CaughtUp:
    """The slave was caught up with the master at ``at_ms``.

    Input of the caught-up tracking of docs/reference-behaviour.md §10.4.
    """

    slave_id: int
    at_ms: int
    incarnation: str | None = None  # the connection's (None: unknown, never caught up)


# -- slave connection -> its shell -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TruncateTo:
    """Action: persist the handshake's epochs, then cut the commit log to ``offset``.

    The handshake's decision (docs/reference-behaviour.md §13). Persist ``epochs`` (the epoch file),
    then cut the commit log to ``offset`` (a no-op when the log already ends there), then call
    ``truncation_done`` — or ``truncation_failed`` if the log refuses (e.g. not a message boundary).

    Epochs first: a crash in between leaves the doomed range attributed to an older epoch, which the
    next handshake cuts again. The other order could leave the epoch file naming an epoch whose data
    is gone, and the broker would report that epoch to the controller, ranking too high in elections.
    """

    offset: int
    epochs: EpochHistory


@dataclass(frozen=True, kw_only=True)
class ResetLog:
    """Action: empty the local replica (commit log and epoch file) durably, then go on.

    The master's log starts at ``master_start``, beyond everything this replica holds (retention deleted
    the rest on the master): the replica continues empty from there (docs/architecture.md §4.2).
    """

    master_start: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class AppendEpoch:
    """Action: persist ``epochs``, which now records that ``epoch`` starts at ``start_offset``.

    Emitted before the first :class:`AppendData` of a new epoch, so a batch's data is never on disk
    under a missing epoch entry.
    """

    epoch: int
    start_offset: int
    epochs: EpochHistory


@dataclass(frozen=True, kw_only=True)
class AppendData:
    """Action: append ``parts`` at ``offset``, then report the new log end.

    ``parts`` are batches of whole messages of ``epoch``, back to back. The new log end goes to
    ``SlaveConnection.log_appended(max_offset, now_ms)``, which triggers the ACK. The parts are views of
    the connection's receive buffer when it borrows (valid until more bytes are received). One action
    carries the consecutive batches of one receive, so the shell writes them with one call.
    """

    offset: int
    epoch: int
    parts: tuple[bytes | memoryview, ...] = field(repr=False)

    @property
    def size(self) -> int:
        return sum(map(len, self.parts))

    @property
    def end_offset(self) -> int:
        return self.offset + self.size

    def __repr__(self) -> str:
        return (
            f"AppendData(offset={self.offset}, epoch={self.epoch}, "
            f"{len(self.parts)} parts of {self.size} bytes)"
        )


@dataclass(frozen=True, kw_only=True)
class SetConfirmOffset:
    """Action: store the slave's confirmOffset.

    The value is min(master confirmOffset, local max) (docs/reference-behaviour.md §14).
    """

    offset: int


# -- both ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ConnectionClosed:
    """The connection is over; the shell closes the socket. ``error`` is set when it failed.

    The last event a machine returns; after it ``next_event()`` returns ``None`` forever.
    """

    reason: str
    error: Exception | None = field(default=None, compare=False)


MasterEvent = HandshakeRequest | CaughtUp | SlaveAck | ReadLog | ConnectionClosed
SlaveEvent = TruncateTo | ResetLog | AppendEpoch | AppendData | SetConfirmOffset | ConnectionClosed
