"""One commit-log segment file. SHELL: a file handle and a memory map, no decisions.

A segment is a fixed-size file named by the global offset of its first byte, 20 digits zero-padded
(``00000000000000000000``, ``00000000001073741824``). It is preallocated at creation
(``posix_fallocate``), so a full disk fails the creation with ``OSError`` instead of a ``SIGBUS`` on a
later write through the map, and unwritten bytes read as zeros.

Reads go through a shared memory map of the file, except the HA master's bulk reads, which use
``os.pread`` (``Segment.pread``: a copy that maps nothing into the process). Writes go through the
map when small and through ``os.pwrite`` / ``os.pwritev`` from ``PWRITE_MIN_BYTES`` up (one page
cache either way, so a read sees every write at once). A small copy into the map is cheaper than a
system call, but a large one faults in each fresh page of the preallocated file one by one, which
``pwrite`` avoids (batched appends and replicated batches got faster with it;
``tests/bench/test_commitlog_bench.py`` prints both mechanisms). Either way the bytes are in the page
cache before ``append`` returns, so a killed process loses nothing. ``sync`` (``fdatasync`` on the
file) makes them durable.

The file and the map are opened lazily: recovery after a clean shutdown never touches old segments.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import threading
from collections.abc import Sequence

log = logging.getLogger(__name__)

SEGMENT_NAME_DIGITS = 20
SPARE_NAME = "spare.segment"
"""The preallocated next segment (:class:`SpareFile`): the one file besides the segments and the
checkpoint that a commit log directory may hold."""
_ZERO_CHUNK = 1 << 20
PWRITE_MIN_BYTES = 16 * 1024
"""Writes of at least this many bytes use ``os.pwrite``; smaller ones are copied into the map."""
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
"""Most pieces one ``os.pwritev`` takes."""


def segment_name(base: int) -> str:
    return f"{base:0{SEGMENT_NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    """The base offset a file name stands for, or None when it is not a segment name."""
    if len(name) == SEGMENT_NAME_DIGITS and name.isascii() and name.isdigit():
        return int(name)
    return None


class Segment:
    """The file ``<directory>/<20-digit base>`` of ``size`` bytes, holding offsets [base, base + size)."""

    __slots__ = ("_fd", "_mm", "_view", "base", "end", "path", "size")

    def __init__(self, directory: str, base: int, size: int) -> None:
        self.base = base
        self.size = size
        self.end = base + size
        self.path = os.path.join(directory, segment_name(base))
        self._fd = -1
        self._mm: mmap.mmap | None = None
        self._view: memoryview | None = None

    def __repr__(self) -> str:
        return f"Segment({self.path!r}, base={self.base}, size={self.size})"

    @classmethod
    def create(cls, directory: str, base: int, size: int) -> Segment:
        """A new preallocated, zero-filled segment file. The caller fsyncs the directory."""
        segment = cls(directory, base, size)
        fd = os.open(segment.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        except BaseException:
            os.close(fd)
            os.unlink(segment.path)
            raise
        segment._attach(fd)
        return segment

    @classmethod
    def adopt(cls, spare_path: str, directory: str, base: int, size: int) -> Segment:
        """Segment ``base`` made from a zero-filled file of ``size`` bytes (a :class:`SpareFile`),
        renamed to the segment's name. The caller fsyncs the directory."""
        segment = cls(directory, base, size)
        os.rename(spare_path, segment.path)
        segment._attach(os.open(segment.path, os.O_RDWR))
        return segment

    def extend_if_short(self) -> bool:
        """Bring a short file (a crash while it was being created) to full size; True if it was short."""
        fd = self._open_fd()
        if os.fstat(fd).st_size >= self.size:
            return False
        os.posix_fallocate(fd, 0, self.size)
        return True

    def _open_fd(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR)
        return self._fd

    def _attach(self, fd: int) -> None:
        self._fd = fd
        self._mm = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._view = memoryview(self._mm)

    @property
    def view(self) -> memoryview:
        """The whole file as a writable memoryview (mapped on first use). Never hand out slices of it
        beyond a call: a live slice keeps the map from closing."""
        if self._view is None:
            self._attach(self._open_fd())
        assert self._view is not None
        return self._view

    def advise(self, advice: int) -> None:
        """``madvise`` the map (e.g. ``mmap.MADV_SEQUENTIAL`` while recovery scans it)."""
        self.view  # noqa: B018 - maps the file
        assert self._mm is not None
        self._mm.madvise(advice)

    @property
    def mapped(self) -> bool:
        return self._mm is not None

    def release(self, start: int, stop: int) -> None:
        """Drop this process's mappings of ``[start, stop)`` (whole pages inside it). The data stays in
        the page cache (dirty pages stay dirty: the kernel keeps a shared mapping's writes) and the next
        access faults it back in, so RSS follows what is touched, not the size of the log."""
        start += -start % mmap.PAGESIZE
        stop -= stop % mmap.PAGESIZE
        if self._mm is not None and stop > start:
            self._mm.madvise(mmap.MADV_DONTNEED, start, stop - start)

    def write(self, pos: int, data: bytes) -> None:
        if len(data) < PWRITE_MIN_BYTES:
            view = self._view if self._view is not None else self.view  # hot path: skip the property
            view[pos : pos + len(data)] = data
            return
        fd = self._fd if self._fd >= 0 else self._open_fd()
        written = os.pwrite(fd, data, pos)
        while written < len(data):  # a short write (interrupted): finish it, never leave a torn unit
            written += os.pwrite(fd, memoryview(data)[written:], pos + written)

    def write_parts(self, pos: int, parts: Sequence[bytes | memoryview]) -> None:
        """Write ``parts`` back to back from ``pos``: one ``os.pwritev`` per ``IOV_MAX`` pieces."""
        if len(parts) == 1 or sum(map(len, parts)) < PWRITE_MIN_BYTES:
            for part in parts:
                self.write(pos, part)
                pos += len(part)
            return
        fd = self._fd if self._fd >= 0 else self._open_fd()
        for first in range(0, len(parts), IOV_MAX):
            group = parts[first : first + IOV_MAX]
            written = os.pwritev(fd, group, pos)
            for part in group:  # after a short write (interrupted), finish the pieces it cut or skipped
                if written < len(part):
                    self.write(pos + written, memoryview(part)[written:])
                written = max(0, written - len(part))
                pos += len(part)

    def read(self, pos: int, n: int) -> bytes:
        return bytes(self.view[pos : pos + n])

    def pread(self, pos: int, n: int) -> bytes:
        """``n`` bytes from ``pos`` with ``os.pread``: a copy from the page cache that maps nothing in."""
        fd = self._fd if self._fd >= 0 else self._open_fd()
        data = os.pread(fd, n, pos)
        if len(data) < n:  # the file is preallocated: short only if someone truncated it under us
            raise OSError(errno.EIO, f"short read of {len(data)} of {n} bytes at {pos}", self.path)
        return data

    def sync(self) -> None:
        if self._fd >= 0:
            os.fdatasync(self._fd)

    def zero(self, start: int, stop: int) -> int:
        """Zero ``[start, stop)``, touching only the non-zero parts. Returns how many bytes were not zero
        (0: nothing written). Holes and unwritten extents are skipped with SEEK_DATA/SEEK_HOLE, so
        clearing the tail of a mostly empty 1 GiB segment costs a few page reads. The ranges are listed
        before anything is read: reading pulls zero pages of unwritten extents into the page cache (by
        readahead), and SEEK_DATA reports cached pages as data."""
        view = self.view
        fd = self._open_fd()
        ranges = []
        pos = start
        while pos < stop:
            data_start, data_end = _next_data_range(fd, pos, stop)
            if data_start >= stop:
                break
            ranges.append((data_start, data_end))
            pos = data_end
        found = 0
        for data_start, data_end in ranges:
            for chunk_start in range(data_start, data_end, _ZERO_CHUNK):
                chunk_end = min(chunk_start + _ZERO_CHUNK, data_end)
                chunk = bytes(view[chunk_start:chunk_end])
                nonzero = len(chunk) - chunk.count(0)
                if nonzero:
                    found += nonzero
                    view[chunk_start:chunk_end] = bytes(chunk_end - chunk_start)
        return found

    def close(self) -> None:
        if self._view is not None:
            self._view.release()
            self._view = None
        if self._mm is not None:
            # A slice still alive somewhere (e.g. in a traceback) keeps the map open: leave it to the GC.
            with contextlib.suppress(BufferError):
                self._mm.close()
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        os.unlink(self.path)


def _next_data_range(fd: int, pos: int, stop: int) -> tuple[int, int]:
    """The next range at or after ``pos`` that may hold data, clipped to ``stop``; file systems
    without SEEK_DATA report everything as data."""
    try:
        data_start = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no data after pos
            return stop, stop
        return pos, stop  # SEEK_DATA unsupported here
    try:
        data_end = os.lseek(fd, data_start, os.SEEK_HOLE)
    except OSError:
        data_end = stop
    return min(data_start, stop), min(data_end, stop)


class SpareFile:
    """The next segment's file, preallocated ahead by a background thread.

    ``posix_fallocate`` may wait for the file system to read block bitmaps: measured here, a slave
    catching up with 64 MiB segments spent 7 % of its time there, inside the append that rolled over.
    The reference creates the next mapped file ahead for the same reason (``AllocateMappedFileService``).
    The spare is a zero-filled file of the segment size named :data:`SPARE_NAME`; a roll-over renames it
    to the new segment's name (:meth:`Segment.adopt`); the log's next flush makes that name durable.
    A spare found at open is deleted, never reused: after a crash it may be a segment whose rename
    never reached the disk, holding bytes that must not come back as messages.
    """

    def __init__(self, directory: str, size: int) -> None:
        self.path = os.path.join(directory, SPARE_NAME)
        self.size = size
        self._thread: threading.Thread | None = None

    def discard_leftover(self) -> None:
        """Delete a spare left by an earlier run (see the class docstring)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def prepare(self) -> None:
        """Start making the spare in the background, unless that is already under way."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._make, name=f"segment-spare:{self.path}", daemon=True)
            self._thread.start()

    def take(self) -> str | None:
        """The spare's path once it is ready (waiting for a preparation under way), or None if there is
        none (never prepared, or the preparation failed: the caller creates the segment itself and meets
        the error, e.g. a full disk, where it can report it)."""
        self.wait()
        try:
            return self.path if os.path.getsize(self.path) == self.size else None
        except FileNotFoundError:
            return None

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _make(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return  # made earlier in this run and not taken yet (leftovers are deleted at open)
        except OSError as exc:
            log.warning("cannot create the spare segment %s: %s", self.path, exc)
            return
        try:
            os.posix_fallocate(fd, 0, self.size)
        except OSError as exc:
            log.warning("cannot preallocate the spare segment %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # give the space back; the roll-over creates the segment itself
        finally:
            os.close(fd)
