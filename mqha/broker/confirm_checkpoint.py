"""The broker's confirm-offset checkpoint file (docs/architecture.md §9.3). SHELL: one small file.

``<storePathRootDir>/confirmOffsetCheckpoint`` holds ``{"confirmOffset":n,"crc32":c}`` padded with
spaces to ``SIZE`` bytes, ``c`` the CRC32 of ``confirmOffset=<n>`` (decimal). Every one-bit change of
the file is caught: in the value or the checksum by the CRC, in a key by the key set, in the padding or
the punctuation by the JSON parser (no character one bit from a space is JSON whitespace). A file that
is damaged, torn or foreign reads as unknown, -1: nothing is exposed until a master says more, and a
start is never called lossy from a number nobody wrote (issue 45: a flip upward did that and forced a
failover; a flip downward went unnoticed). The older format, ``{"confirmOffset": n}`` alone, is still
read (unchecked) and replaced by the next save.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import zlib

from mqha.errors import StorageError

log = logging.getLogger(__name__)

CONFIRM_CHECKPOINT_NAME = "confirmOffsetCheckpoint"


def checksum(value: int) -> int:
    """The ``crc32`` field of a file holding ``value``."""
    return zlib.crc32(b"confirmOffset=%d" % value)


def encode(value: int) -> bytes:
    return b'{"confirmOffset":%d,"crc32":%d}' % (value, checksum(value))


def decode(data: bytes) -> tuple[int, str]:
    """``(value, "")`` for a good file's bytes (either format), else ``(-1, why)``."""
    try:
        document = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        return -1, f"not a checkpoint ({exc})"
    if not isinstance(document, dict) or set(document) not in ({"confirmOffset", "crc32"}, {"confirmOffset"}):
        return -1, f"unexpected content {str(document)[:80]!r}"
    value, crc = document["confirmOffset"], document.get("crc32", None)
    if isinstance(value, bool) or not isinstance(value, int):
        return -1, f"confirmOffset is {value!r}"
    if "crc32" in document and (isinstance(crc, bool) or crc != checksum(value)):
        return -1, f"checksum mismatch: confirmOffset {value} with crc32 {crc!r} (a damaged file)"
    return value, ""


class ConfirmOffsetCheckpoint:
    """Keeps the broker's confirmOffset in one small file, rewritten in place.

    Written through a shared memory map, as the reference keeps its confirm offset in the mapped
    ``checkpoint`` file. A master saves it before answering each put (docs/architecture.md §9.3), so a
    save must cost next to nothing: a store into the mapped page touches no syscall and no journal (a
    ``pwrite`` per put updated the file's mtime and waited behind the commit log's fsyncs, about 10 % of
    asynchronous puts). The page reaches the disk with the kernel's writeback, or at once when
    ``durable``. Not a temp file and a rename: replacing a file frees the old one's blocks, and where the
    file system discards freed blocks the rename waited for the disk. A torn or damaged file fails its
    checksum and reads as ``-1`` (unknown: nothing is exposed until a master says otherwise), which is
    always safe.
    """

    SIZE = 64  # bytes; the record of any int64 fits (57 at most), padded with spaces (JSON ignores them)

    def __init__(self, path: str) -> None:
        self.path = path
        self._written: int | None = None
        self._fd = -1
        self._map: mmap.mmap | None = None

    def load(self) -> int:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(4096)
        except FileNotFoundError:
            return -1
        except OSError as exc:
            log.warning("confirm offset checkpoint %s is unreadable (%s); starting from -1", self.path, exc)
            return -1
        value, problem = decode(data)
        if problem:
            log.warning("confirm offset checkpoint %s: %s; starting from -1", self.path, problem)
            return -1
        self._written = value
        return value

    def save(self, value: int, *, durable: bool = False) -> None:
        if value == self._written and not durable:
            return
        try:
            if self._map is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                os.ftruncate(self._fd, self.SIZE)  # whatever the file held beyond the record goes
                self._map = mmap.mmap(self._fd, self.SIZE)
            self._map[:] = encode(value).ljust(self.SIZE)
            if durable:
                self._map.flush()
                os.fsync(self._fd)
        except (OSError, ValueError) as exc:
            raise StorageError(self.path, f"cannot write the confirm offset checkpoint: {exc}") from exc
        self._written = value

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
