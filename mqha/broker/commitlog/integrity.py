"""Damaged records after the fact: confirming what the scrub found, serving one verified record to a
peer, and rewriting a damaged record in place with a peer's good copy (part of ``CommitLog``; see
``store`` and docs/architecture.md §4.7). SHELL.

Replicas hold byte-identical logs (the HA path copies units verbatim), so a record another replica
holds at the same offset, below both replicas' confirm offsets, is the one this replica lost to a
flipped bit. A rewrite checks that before it writes: the new bytes are one whole message whose
physicalOffset is the offset and whose CRCs pass, the old bytes there fail their checks, and the unit
after it (or the log end) is where the new one ends, so nothing else moves.
"""

from __future__ import annotations

import logging

from mqha.broker.commitlog.codec import InvalidRecord, RejectReason
from mqha.broker.commitlog.reads import CommitLogReads
from mqha.broker.commitlog.scanning import ScanStop, scan_units
from mqha.broker.commitlog.segment import Segment
from mqha.errors import CorruptRecordError, NotAlignedError, RemoteProtocolError

log = logging.getLogger(__name__)


class CommitLogIntegrity(CommitLogReads):
    """Finds, serves and repairs damaged records (part of ``CommitLog``)."""

    def _unit_error(self, segment: Segment, offset: int) -> InvalidRecord | None:
        """Why the unit at ``offset`` fails its full check, or None when it passes (caller holds the
        lock; ``offset`` lies in the log)."""
        rel = offset - segment.base
        data_end = min(self._max, segment.end) - segment.base
        scan = scan_units(segment.view, rel, data_end, segment.base, segment.end, max_messages=1)
        if scan.end > rel or scan.stop is ScanStop.LIMIT:
            return None
        return scan.error or InvalidRecord(RejectReason.TORN, offset, "zeros where a unit should start")

    def confirm_damage(self, offset: int) -> int | None:
        """Re-check, under the lock, a record the scrub found damaged through its own file handle (the
        file may have been cut or rewritten meanwhile), or one known damaged before it is repaired.
        Returns where valid data goes on after it when it is damaged (and notes it in ``bad_records``),
        else None (and forgets it)."""
        with self._lock:
            self._check_open()
            if not self._min <= offset < self._max or not self._damage_boundary(offset):
                return None
            segment = self._segment_for(offset)
            error = self._unit_error(segment, offset)
            if error is None:
                self._bad.pop(offset, None)  # sound again (rewritten behind the log's back, or repaired)
                return None
            return self._corrupt(segment, offset, error.reason.value).resume

    def scrub_target(self, offset: int) -> tuple[int, str, int, int] | None:
        """Where a scrub at ``offset`` reads next: (offset, moved up to the log start; its segment's
        path; where that segment's data ends now; where the segment ends), or None past the log end."""
        with self._lock:
            self._check_open()
            offset = max(offset, self._min)
            if offset >= self._max:
                return None
            segment = self._segment_for(offset)
            return offset, segment.path, min(self._max, segment.end), segment.end

    def read_unit(self, offset: int, limit: int) -> bytes:
        """The message record at ``offset``, verified in full and ending at or before ``limit``, as
        stored: what a damaged replica asks a peer for (``GET /v1/log/record``). Raises
        :class:`CorruptRecordError` when this copy is damaged too, ``NotAlignedError`` when no record
        starts there or it lies beyond ``limit``."""
        with self._lock:
            self._check_open()
            if not self._min <= offset < min(self._max, limit):
                raise self._not_aligned(offset, f"outside the served log (limit {limit})")
            segment = self._segment_for(offset)
            rel = offset - segment.base
            data_end = min(self._max, segment.end) - segment.base
            scan = scan_units(segment.view, rel, data_end, segment.base, segment.end, max_messages=1)
            if scan.messages != 1:
                if self._damage_boundary(offset):
                    why = scan.error.reason.value if scan.error is not None else "not a message"
                    raise self._corrupt(segment, offset, why)
                raise self._not_aligned(offset, "no message starts here")
            if segment.base + scan.end > limit:
                raise self._not_aligned(offset, f"the record ends past the limit {limit}")
            return segment.read(rel, scan.end - rel)

    def rewrite_unit(self, offset: int, data: bytes) -> None:
        """Replace the damaged record at ``offset`` with ``data``, a peer's copy, and fsync it. Checks
        first (module docstring); a check that fails raises ``RemoteProtocolError`` (bad bytes from the
        peer) or ``NotAlignedError`` (no damaged record here any more) and writes nothing."""
        with self._flush_lock, self._lock:
            self._check_open()
            if not self._min <= offset < self._max or not self._damage_boundary(offset):
                raise self._not_aligned(offset, "no damaged record starts here")
            segment = self._segment_for(offset)
            end = offset + len(data)
            scan = scan_units(data, 0, len(data), offset, segment.end, strict=True, max_messages=1)
            if scan.messages != 1 or scan.end != len(data):
                why = scan.error or "not exactly one message"
                raise RemoteProtocolError(f"repair bytes for offset {offset} rejected: {why}")
            if end > self._max:
                raise RemoteProtocolError(
                    f"repair record [{offset}, {end}) runs past the log end {self._max}"
                )
            if self._unit_error(segment, offset) is None:
                self._bad.pop(offset, None)
                raise self._not_aligned(offset, "the record here passes its checks; nothing to repair")
            if end < min(self._max, segment.end) and self._unit_error(segment, end) is not None:
                raise RemoteProtocolError(
                    f"repair record [{offset}, {end}) does not end where this log's next unit starts"
                )
            segment.write(offset - segment.base, data)
            segment.sync()
            self._bad.pop(offset, None)
            log.warning(
                "commit log: repaired the record at offset %d (%d bytes) in %s",
                offset,
                len(data),
                segment.path,
            )


__all__ = ["CommitLogIntegrity", "CorruptRecordError", "NotAlignedError"]
