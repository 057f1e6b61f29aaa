"""The store time of a segment's newest record, read from its file, for retention. SHELL.

Retention judges a segment's age by its records' own ``storeTimestamp`` as well as its file's mtime
(docs/architecture.md §4.2, "Clock steps"). Finding the newest record walks the segment's headers (no
CRC; the compiled walk when built) through a read-only map of the file, outside the commit log's lock:
a segment retention looks at is sealed (never the active one), so nothing appends to it meanwhile. An
answer is kept per segment while the file's inode and mtime stay the same (a truncation that rewrites a
sealed segment changes its mtime). Only segments the file times already call expired are asked about
(``Pass.unread``), so a pass reads at most a few segments, each about once.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct

from mqha.broker.commitlog.codec import STORE_TIMESTAMP_POS
from mqha.broker.commitlog.scanning import ScanStop, scan_units
from mqha.broker.commitlog.segment import segment_name

log = logging.getLogger(__name__)

_TIMESTAMP = struct.Struct(">q")


class RecordTimes:
    """Newest-record store times of the segments in one commit-log directory, cached per file version."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._known: dict[int, tuple[tuple[int, int], int | None]] = {}  # base -> ((ino, mtime), time)

    def newest_ms(self, base: int, *, end: int | None = None) -> int | None:
        """The ``storeTimestamp`` of the newest record of the sealed segment at ``base``; None when it is
        gone, holds no record or cannot be walked to a clean end (then retention goes by its mtime alone).
        ``end``: the log's end offset when the segment may be the active one (its records before ``end``
        are complete; not cached)."""
        path = os.path.join(self.directory, segment_name(base))
        try:
            info = os.stat(path)
        except FileNotFoundError:
            self._known.pop(base, None)
            return None
        if end is not None:
            return self._read(path, base, end)
        version = (info.st_ino, info.st_mtime_ns)
        known = self._known.get(base)
        if known is not None and known[0] == version:
            return known[1]
        found = self._read(path, base)
        if len(self._known) >= 1024:  # deleted segments' entries: never asked about again
            self._known.clear()
        self._known[base] = (version, found)
        return found

    def _read(self, path: str, base: int, end: int | None = None) -> int | None:
        try:
            with (
                open(path, "rb") as handle,
                mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
                memoryview(mapped) as view,
            ):
                size = len(view)
                limit = size if end is None else max(0, min(size, end - base))
                scan = scan_units(view, 0, limit, base, base + size, verify_crc=False)
                if scan.last_message < 0:
                    return None
                if scan.stop not in (ScanStop.BLANK, ScanStop.ZEROS, ScanStop.LIMIT):
                    log.warning(
                        "segment %s: its headers stop at %d (%s); retention judges it by its mtime",
                        path,
                        base + scan.end,
                        scan.error,
                    )
                    return None
                (value,) = _TIMESTAMP.unpack_from(view, scan.last_message + STORE_TIMESTAMP_POS)
                return int(value)
        except (OSError, ValueError) as exc:  # gone meanwhile, or empty (mmap of 0 bytes)
            log.debug("segment %s: no record time (%s)", path, exc)
            return None
