"""Reads of the commit log for consumers and the HA master (part of ``CommitLog``; see ``store``). SHELL."""

from __future__ import annotations

import logging
import os

from mqha.broker.commitlog.codec import (
    BLANK_MAGIC,
    BLANK_SIZE,
    InvalidRecord,
    StoredMessage,
    decode_message,
    unit_size_at,
)
from mqha.broker.commitlog.scanning import (
    ScanStop,
    message_walk,
    resume_after,
    scan_units,
)
from mqha.broker.commitlog.segment import Segment
from mqha.broker.commitlog.types import (
    CommitLogState,
)
from mqha.errors import CorruptRecordError, MqhaError

log = logging.getLogger(__name__)


class OffsetTooSmall(MqhaError):
    """Says a read asked for an offset below the log start (deleted by retention).

    RocketMQ's ``GetMessageStatus.OFFSET_TOO_SMALL``; the reader continues from ``min_offset``.
    """

    def __init__(self, offset: int, min_offset: int) -> None:
        super().__init__(f"offset {offset} is below the log start {min_offset} (deleted by retention)")
        self.offset = offset
        self.min_offset = min_offset


class CommitLogReads(CommitLogState):
    """Reads messages and raw batches out of the segments (part of ``CommitLog``)."""

    # The lowest offset a consumer read served since the last ``take_lowest_read``: retention keeps the
    # segment a reader is in for a while (docs/architecture.md §4.2). A plain int: one min() per read.
    _lowest_read: int | None = None

    def read(self, offset: int) -> StoredMessage:
        """The message starting at ``offset``; ``NotAlignedError`` if no message starts there."""
        with self._lock:
            self._check_open()
            if not self._min <= offset < self._max:
                raise self._not_aligned(offset, "outside the log")
            segment = self._segment_for(offset)
            try:
                message = decode_message(segment.view, offset - segment.base, base_offset=segment.base)
            except InvalidRecord as exc:
                raise self._not_aligned(offset, f"no message starts here ({exc.reason.value})") from None
            if message.next_offset > self._max:  # cannot happen for a boundary below max
                raise self._not_aligned(offset, "message runs past the end of the log")
            return message

    def read_messages(
        self, offset: int, max_messages: int, limit_offset: int, *, skip_deleted: bool = False
    ) -> tuple[list[StoredMessage], int]:
        """Up to ``max_messages`` messages starting at ``offset``, each ending at or before
        ``limit_offset`` (the confirmOffset) and ``max_offset``, skipping blank markers across segments.
        Returns the messages and the offset to continue from. Below ``min_offset`` (deleted by
        retention) raises :class:`OffsetTooSmall`, or with ``skip_deleted`` reads from the log start."""
        messages: list[StoredMessage] = []
        with self._lock:
            self._check_open()
            if offset < self._min and not skip_deleted:
                raise OffsetTooSmall(offset, self._min)
            pos = max(offset, self._min)
            limit = min(limit_offset, self._max)
            if not skip_deleted and pos < limit and (self._lowest_read is None or pos < self._lowest_read):
                self._lowest_read = pos
            while len(messages) < max_messages and pos < limit:
                segment = self._segment_for(pos)
                rel = pos - segment.base
                size, magic = unit_size_at(segment.view, rel)
                if magic == BLANK_MAGIC and size == segment.size - rel:
                    pos = (
                        segment.end
                    )  # the blank marker ends the segment; the next message starts the next one
                    continue
                try:
                    message = decode_message(segment.view, rel, base_offset=segment.base)
                except InvalidRecord as exc:
                    if messages or pos != offset or self._damage_boundary(pos):
                        raise self._corrupt(segment, pos, exc.reason.value, messages) from None
                    raise self._not_aligned(pos, f"no message starts here ({exc.reason.value})") from None
                if message.next_offset > limit:
                    break
                messages.append(message)
                pos = message.next_offset
            return messages, pos

    def _corrupt(
        self, segment: Segment, pos: int, why: str, messages: list[StoredMessage] | None = None
    ) -> CorruptRecordError:
        """The error for a damaged record at the boundary ``pos``, noted in ``bad_records`` (caller
        holds the lock)."""
        data_end = min(self._max, segment.end) - segment.base
        resume = segment.base + resume_after(
            segment.view, pos - segment.base, data_end, segment.base, segment.end
        )
        if pos not in self._bad:
            log.error("commit log: corrupt record at offset %d in %s (%s)", pos, segment.path, why)
        self._bad[pos] = why
        return CorruptRecordError(segment.path, pos, why, resume, messages)

    def bad_records(self) -> dict[int, str]:
        """The damaged records known now (offset → why), found by reads, the HA path or the scrub, and
        not yet repaired, cut or deleted."""
        with self._lock:
            return dict(self._bad)

    def take_lowest_read(self) -> int | None:
        """The lowest offset a :meth:`read_messages` read from since the last call (None: no read)."""
        with self._lock:
            lowest, self._lowest_read = self._lowest_read, None
            return lowest

    def segment_times(self) -> list[tuple[int, int]]:
        """(base offset, last modification in wall-clock ms) of each segment, oldest first. The stats run
        outside the lock; a segment deleted meanwhile is left out."""
        with self._lock:
            self._check_open()
            named = [(segment.base, segment.path) for segment in self._segments]
        out = []
        for base, path in named:
            try:
                out.append((base, os.stat(path).st_mtime_ns // 1_000_000))
            except FileNotFoundError:
                continue
        return out

    def read_raw(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole units (messages and blank markers, a blank with its zero filler) starting at ``offset``,
        all within one segment, at most ``max_bytes`` in total except that at least one unit is returned.
        ``b""`` at ``max_offset``. For the HA master: the slave stores them with ``append_raw``.
        Every unit is checked in full (header, physicalOffset, CRCs) before it is shipped: a damaged
        record is never replicated; at ``offset`` it raises :class:`CorruptRecordError`."""
        batches = self.read_batches(offset, max_bytes, max_bytes)
        return batches[0] if batches else b""

    def read_batches(self, offset: int, batch_bytes: int, max_bytes: int) -> list[bytes | memoryview]:
        """:meth:`read_raw` of up to ``max_bytes`` in one read, cut into consecutive batches of whole
        units, each at most ``batch_bytes`` unless it is one unit larger than that. The first batch
        always holds at least one unit; ``[]`` at ``max_offset``.

        The bytes come with ``pread``, not through the map: a catching-up slave's stream copies from the
        page cache without faulting pages into this process (RSS stays flat, no unmapping afterwards).
        """
        with self._lock:  # held for the copy only: the checks below run on the private copy
            self._check_open()
            if offset == self._max:
                return []
            if not self._min <= offset < self._max:
                raise self._not_aligned(offset, "outside the log")
            segment = self._segment_for(offset)
            left = min(self._max, segment.end) - offset  # valid bytes from offset to the segment's data end
            window = min(max(max_bytes, BLANK_SIZE), left)
            data = segment.pread(offset - segment.base, window)
            size = unit_size_at(data, 0)[0] if window >= BLANK_SIZE else 0
            if window < size <= left:  # the first unit alone is larger than max_bytes
                window = size
                data = segment.pread(offset - segment.base, window)
        view = memoryview(data)
        batches: list[bytes | memoryview] = []
        walk = message_walk(view, offset, segment.end)
        pos = 0
        while pos < window:
            # A full check up to the batch size; past ``stop`` the data goes on unless it is the log's
            # end, so a unit cut there ends the batch rather than counting as torn.
            stop = min(pos + batch_bytes, window)
            quick = walk(pos, stop)
            if quick > pos:
                batches.append(view[pos:quick])
                pos = quick
                continue
            scan = scan_units(view, pos, stop, offset, segment.end, window=stop < left)
            if scan.end == pos and scan.stop is ScanStop.LIMIT:  # a sound unit larger than batch_bytes
                scan = scan_units(
                    view, pos, window, offset, segment.end, window=window < left, max_messages=1
                )
                if scan.end == pos and scan.stop is ScanStop.LIMIT:
                    break  # it does not fit in this read: the next one starts with it
            if scan.end == pos:  # neither a sound message nor a blank marker starts here
                if pos == 0:
                    raise self._no_unit_at(offset, scan.error)
                break  # the next read reports it
            batches.append(view[pos : scan.end])
            pos = scan.end
        return batches

    def _no_unit_at(self, offset: int, error: InvalidRecord | None) -> Exception:
        """The error of a read whose first unit fails: a damaged record at a boundary, else no unit."""
        why = error.reason.value if error is not None else "zeros"
        with self._lock:
            if error is not None and self._min <= offset < self._max and self._damage_boundary(offset):
                return self._corrupt(self._segment_for(offset), offset, why)
            return self._not_aligned(offset, f"no unit starts here ({why})")

    def is_boundary(self, offset: int) -> bool:
        """Whether a unit starts at ``offset`` or ``offset`` is the log's min or max offset. Walks the
        headers from the segment start (fast, no CRC): meant for truncation, not for every request."""
        with self._lock:
            self._check_open()
            return self._is_boundary(offset)

    def _damage_boundary(self, offset: int) -> bool:
        """Whether a damaged record at ``offset`` starts at a unit boundary: known when it was found
        before, else by the header walk (a reader retrying at a known damaged record costs no walk)."""
        return offset in self._bad or self._is_boundary(offset)

    def _is_boundary(self, offset: int) -> bool:
        if offset in (self._min, self._max):
            return True
        if not self._min < offset < self._max:
            return False
        segment = self._segment_for(offset)
        rel = offset - segment.base
        if rel == 0:
            return True
        scan = scan_units(segment.view, 0, rel, segment.base, segment.end, verify_crc=False)
        return scan.stop is ScanStop.LIMIT and scan.end == rel
