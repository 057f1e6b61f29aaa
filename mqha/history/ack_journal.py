"""The ack journal (shell): a master's PUT_OKs, on disk before the answer leaves (docs/architecture.md §5).

The history writer commits a batch every ``interval`` (50 ms), so a master killed right after an answer
took that answer's ``acks`` row with it, and the proof checked fewer acks than were given (issue 45,
finding 8). Now the put path appends one line per acknowledged message to an append-only file next to
``history.db`` -- one ``os.write`` per answer, into the page cache, before the answer is sent -- and
the history writer thread imports the file into the ``acks`` table. A ``kill -9`` therefore keeps every
answered ack; the writer fsyncs what it imported each pass, so a power cut loses at most the acks
answered in the last ``interval`` (the history is ``synchronous=NORMAL`` anyway).

Files: ``<history.db>-acks-<32 hex>``, one per journal (a process, or a rotation after
``ROTATE_BYTES`` imported); the live one is ``flock``-ed, so another recorder opened on the same
database never takes it for one a crash left. The first line names the ``client``
(``broker@<address>``) and ``brokerName`` of its rows; every line ends with the CRC32 of the rest, so a
torn or flipped line is detected and skipped (logged, counted), never imported. Exactly once: the
import of a range and its new *mark* (file id, byte position) are one SQLite transaction (table
``ack_journal_marks``, not exported); a file that is not the live journal -- left by a crashed
process, or rotated out -- is imported from its mark to its end (a durable commit), then deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import logging
import os
import sqlite3
import threading
import uuid
import zlib
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

SUFFIX = "-acks-"
MAGIC = "mqha-acks"
VERSION = 1
ROTATE_BYTES = 4 * 1024 * 1024
MARKS_TABLE = "ack_journal_marks"
PUT_OK = "PUT_OK"

AckRow = tuple[Any, ...]
"""An ``acks`` row in ``columns(ACKS)`` order."""


def _line(text: str) -> bytes:
    return f"{text} {zlib.crc32(text.encode()):08x}\n".encode()


def _checked(raw: bytes) -> list[str] | None:
    """The fields of one line (without its newline), or None when its CRC does not match."""
    text, _, crc = raw.decode("utf-8", "replace").rpartition(" ")
    try:
        if int(crc, 16) != zlib.crc32(text.encode()):
            return None
    except ValueError:
        return None
    return text.split(" ")


def journal_paths(db_path: str) -> list[str]:
    """Every ack journal of the history database ``db_path``."""
    return sorted(glob.glob(glob.escape(db_path) + SUFFIX + "*"))


def unimported_rows(db_path: str, conn: sqlite3.Connection) -> list[AckRow]:
    """The ``acks`` rows of ``db_path``'s journals past their marks (read through ``conn``): what a
    process that died left for its next start to import, for an export of a stopped run. (Exporting a
    live node this way may give a line twice, once from each side of an import: counted twice, never
    lost.)"""
    marks: dict[str, int] = {}
    with contextlib.suppress(sqlite3.Error):  # an older database has no marks table
        marks = dict(conn.execute(f"SELECT file, position FROM [{MARKS_TABLE}]").fetchall())
    rows: list[AckRow] = []
    for path in journal_paths(db_path):
        reader = JournalFile(path, int(marks.get(os.path.basename(path), 0)))
        with contextlib.suppress(OSError):
            rows += reader.read_new(at_end=True, sync=False)[0]
    return rows


class AckJournal:
    """The live journal of one master's acks; ``append`` runs on the put path (any thread)."""

    def __init__(self, db_path: str, client: str, broker_name: str) -> None:
        self.db_path, self.client, self.broker_name = db_path, client, broker_name
        self._lock = threading.Lock()
        self.path = ""
        self._fd = -1
        self._open_new()

    def _open_new(self) -> None:
        """A fresh file with its header; the put path writes to it from the next ``append`` on."""
        path = f"{self.db_path}{SUFFIX}{uuid.uuid4().hex}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # live: no other recorder takes it as left over
            os.write(fd, _line(f"{MAGIC} {VERSION} {self.client} {self.broker_name}"))
        except OSError:
            os.close(fd)
            os.unlink(path)
            raise
        with self._lock:
            old, self._fd, self.path = self._fd, fd, path
        if old >= 0:
            os.close(old)

    def append(
        self, appended: Sequence[Any], epoch: int, ack_mode: str, ts: int, broker_id: int | None
    ) -> None:
        """One PUT_OK answer: a line per message (``offset``, ``size``, ``msg_id``). Raises OSError."""
        bid = "-" if broker_id is None else str(broker_id)
        data = b"".join(
            _line(f"{a.offset} {a.size} {epoch} {ts} {bid} {a.msg_id} {ack_mode}") for a in appended
        )
        with self._lock:
            os.write(self._fd, data)

    def rotate(self) -> str:
        """Start a new file; returns the old one's path (nothing is written to it any more)."""
        old = self.path
        self._open_new()
        return old

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


class JournalFile:
    """The history writer's reader of one journal file: what is new since the mark, as ``acks`` rows."""

    def __init__(self, path: str, position: int = 0) -> None:
        self.path = path
        self.file_id = os.path.basename(path)
        self.position = position  # bytes imported (the header counts as imported once read)
        self.client: str | None = None
        self.broker_name: str | None = None
        self.failures = 0

    def in_use(self) -> bool:
        """Whether a live journal (of any process) still holds this file's lock."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def read_new(self, *, at_end: bool, sync: bool = True) -> tuple[list[AckRow], int]:
        """Rows of the complete lines after ``position``, and the position after them (the caller sets
        it once they are committed). ``at_end``: nothing more will be written, so an unfinished last
        line is torn (skipped, counted). What was read is fsynced (the power-loss window, module doc)."""
        with open(self.path, "rb") as handle:
            if self.client is None:
                header = handle.readline()
                if not header.endswith(b"\n"):
                    if at_end:
                        self._bad(0, "no header")
                    return [], self.position
                self._header(header[:-1])
                self.position = max(self.position, len(header))
            handle.seek(self.position)
            data = handle.read()
            if data and sync and not at_end:
                with contextlib.suppress(OSError):
                    os.fdatasync(handle.fileno())
        end = data.rfind(b"\n") + 1
        rows = [row for row in map(self._row, data[:end].split(b"\n")[:-1]) if row is not None]
        if at_end and end < len(data):
            self._bad(self.position + end, "a torn last line")
        return rows, self.position + end

    def _header(self, raw: bytes) -> None:
        fields = _checked(raw)
        if fields is None or len(fields) != 4 or fields[0] != MAGIC:
            self._bad(0, "a damaged header")
            self.client, self.broker_name = "", ""
            return
        self.client, self.broker_name = fields[2], fields[3]

    def _row(self, raw: bytes) -> AckRow | None:
        if not self.client:  # its header was damaged (logged once): nothing can be attributed
            self.failures += 1
            return None
        fields = _checked(raw)
        if fields is None or len(fields) != 7:
            self._bad(None, "a damaged line")
            return None
        offset, size, epoch, ts, bid, msg_id, ack_mode = fields
        try:
            return (
                self.client,
                msg_id,
                self.broker_name,
                None if bid == "-" else int(bid),
                int(offset),
                int(size),
                int(epoch),
                PUT_OK,
                ack_mode,
                int(ts),
            )
        except ValueError:
            self._bad(None, "a damaged line")
            return None

    def _bad(self, position: int | None, what: str) -> None:
        self.failures += 1
        where = "" if position is None else f" at byte {position}"
        log.warning("history: ack journal %s has %s%s: skipped, not imported", self.path, what, where)
