"""The commit log's scrub: re-verify every record's CRCs, oldest segment first, a bounded slice at a
time (docs/architecture.md §4.7). SHELL.

Recovery verifies only the newest segments at open and reads check only what they return, so a bit
that flips in an older segment would otherwise be found only by the reader who needs it. A
:class:`Scrubber` walks the log from its start to its end, pass after pass; each ``step`` reads at most
``max_bytes`` with its own file handle (``pread``: no map, and never the log's lock while the disk
works), checks the whole units in it with ``scanning.scan_units``, and hands any unit that fails to
``CommitLog.confirm_damage``, which checks it again under the lock (the file may have been cut or
rewritten meanwhile) and notes it in ``bad_records``. The caller paces the steps (the broker's
``IntegrityTask``, ``scrubCommitLogBytesPerSecond``).
"""

from __future__ import annotations

import os
from typing import NamedTuple, Protocol

from mqha.broker.commitlog.codec import UNIT_PREFIX
from mqha.broker.commitlog.scanning import ScanStop, scan_units


class ScrubbedLog(Protocol):
    """What the scrub asks of a ``CommitLog``."""

    def scrub_target(self, offset: int) -> tuple[int, str, int, int] | None: ...

    def confirm_damage(self, offset: int) -> int | None: ...


class Step(NamedTuple):
    """One step's outcome: bytes read, damaged records confirmed, whether a pass ended."""

    read: int
    found: tuple[int, ...]
    pass_done: bool


class Scrubber:
    """Walks one commit log, a step at a time (not thread-safe: one caller at a time)."""

    def __init__(self, log: ScrubbedLog) -> None:
        self.log = log
        self.position = 0  # the next offset to verify
        self._path = ""
        self._fd = -1
        self._unconfirmed = -1  # a damage the log did not confirm, last time

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._path = ""

    def _pread(self, path: str, base: int, offset: int, size: int) -> bytes:
        if path != self._path:
            self.close()
            self._fd = os.open(path, os.O_RDONLY)
            self._path = path
        return os.pread(self._fd, size, offset - base)

    def step(self, max_bytes: int) -> Step:
        """Verify up to ``max_bytes`` (at least one unit) from ``position``; a pass ends at the log end
        and the next step starts again at the log start."""
        target = self.log.scrub_target(self.position)
        if target is None:
            self.position = 0
            self.close()
            return Step(0, (), True)
        offset, path, data_end, segment_end = target
        base = int(os.path.basename(path))
        try:
            data = self._pread(path, base, offset, min(max_bytes, data_end - offset))
            if len(data) >= UNIT_PREFIX.size:
                size = UNIT_PREFIX.unpack_from(data, 0)[0]
                if len(data) < size <= data_end - offset:  # one unit larger than a step: read it whole
                    data = self._pread(path, base, offset, size)
        except FileNotFoundError:  # deleted by retention or a cut since: the next step asks again
            self.close()
            return Step(0, (), False)
        scan = scan_units(data, 0, len(data), offset, segment_end, window=offset + len(data) < data_end)
        if scan.stop is ScanStop.BLANK:
            self.position = segment_end
        elif scan.stop is ScanStop.LIMIT and scan.end:
            self.position = offset + scan.end
        else:  # an invalid unit, zeros before the data end, or a unit running past it
            return Step(len(data), self._damage_at(offset + scan.end, segment_end), False)
        return Step(len(data), (), False)

    def _damage_at(self, bad: int, segment_end: int) -> tuple[int, ...]:
        """Have the log confirm the damage at ``bad`` and move past it."""
        resume = self.log.confirm_damage(bad)
        if resume is not None:
            self.position = resume
            return (bad,)
        # Sound through the log's own map: the file changed under this handle (cut, rewritten). Look
        # again through a fresh one; the same disagreement twice skips the rest of this segment.
        self.close()
        self.position = segment_end if self._unconfirmed == bad else bad
        self._unconfirmed = bad
        return ()
