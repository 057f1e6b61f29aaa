"""Epoch file shell: load with torn-write recovery, atomic save with a ``.bak`` (docs/reference-behaviour.md
§12.1, docs/architecture.md §4).

Shell module: all file IO of the epoch package lives here; the decisions live in ``history.py`` and
the format in ``codec.py``.

Crash safety of :meth:`EpochFile.save`: both files get the new content, each through a temp file in
the same directory, ``fsync`` and ``os.replace`` (so each is always its old or its new complete
content): the backup first while the main file is good (a crash leaves the main file as the last
completed save), else the main file first. A backup is therefore the main file's own generation (or,
after a crash, one newer), and :meth:`EpochFile.load` takes it for a damaged main file only when the
damaged text proves it the same generation (``codec.same_generation``); an older generation would label
this replica's newest bytes with an older epoch, and a master would cut them as a divergent tail (issue
45: 326,700 good bytes). The reference copies the previous content to ``.bak`` instead
(docs/architecture.md §7).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from mqha.durable import write_atomically
from mqha.epoch.codec import decode_epoch_file, encode_epoch_file, same_generation
from mqha.epoch.history import EpochHistory
from mqha.errors import CorruptFileError, StorageError

log = logging.getLogger(__name__)

BACKUP_SUFFIX = ".bak"
_MISSING = "missing"


class EpochFile:
    """The epoch file at ``path`` and its backup ``path + ".bak"``."""

    def __init__(self, path: str) -> None:
        self._path = os.fspath(path)

    @property
    def path(self) -> str:
        return self._path

    @property
    def backup_path(self) -> str:
        return self._path + BACKUP_SUFFIX

    def load(self) -> EpochHistory:
        """Read the history: the main file; else its backup when the damaged main file proves it the same
        generation (a WARNING says so); else an empty history when neither file exists.

        Raises :class:`CorruptFileError` naming the main file otherwise (a damaged main file with no
        backup, a backup of another generation, a backup without its main file): no history is better
        than a wrong one (an empty or older history would let this replica skip or misplace truncation).
        Never deletes or rewrites anything.
        """
        history, problem = self._read(self._path)
        if history is not None:
            return history
        backup, backup_problem = self._read(self.backup_path)
        if problem == _MISSING and backup_problem == _MISSING:
            return EpochHistory()
        if backup is None:
            raise CorruptFileError(
                self._path, f"no usable epoch file: {problem}; backup {self.backup_path}: {backup_problem}"
            )
        proof = "" if problem == _MISSING else same_generation(self._text(self._path), backup)
        if not proof:
            raise CorruptFileError(
                self._path,
                f"{problem}, and its backup {self.backup_path} is not provably the same "
                f"generation ({len(backup)} entries, last epoch {backup.last_epoch()}): refusing to start "
                "rather than mislabel this replica's data; restore the file, or move this replica's "
                "commitlog/, epoch files and confirmOffsetCheckpoint aside so that it re-syncs from its "
                "master (docs/architecture.md §9.2)",
            )
        log.warning(
            "epoch file %s is unusable (%s); using its backup %s, the same generation: %s (%d entries, "
            "last epoch %d)",
            self._path,
            problem,
            self.backup_path,
            proof,
            len(backup),
            backup.last_epoch(),
        )
        return backup

    def save(self, history: EpochHistory) -> None:
        """Persist ``history`` atomically into both files; an empty history is written too
        (docs/architecture.md §7). The backup goes first while the main file is good, else the main file
        (the module docstring). Saving what both files already hold is a no-op."""
        text = encode_epoch_file(history)
        current = self._good_text(self._path)
        backup = self._good_text(self.backup_path)
        if current == text and backup == text:
            return
        directory = os.path.dirname(os.path.abspath(self._path))
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StorageError(self._path, f"cannot create directory {directory}: {exc}") from exc
        order = (self.backup_path, self._path) if current is not None else (self._path, self.backup_path)
        for path in order:
            if (current if path == self._path else backup) != text:
                _write_atomically(path, text)

    def _text(self, path: str) -> str:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")

    def _read(self, path: str) -> tuple[EpochHistory | None, str]:
        """``(history, "")`` when ``path`` is good, else ``(None, why)``.

        OS errors other than absence raise :class:`StorageError`.
        """
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None, _MISSING
        except OSError as exc:
            # Unreadable is not the same as corrupt: falling back would hide an operator problem.
            raise StorageError(path, f"cannot read epoch file: {exc.strerror or exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None, "not text (invalid UTF-8)"
        try:
            return decode_epoch_file(text, path), ""
        except CorruptFileError as exc:
            return None, exc.reason

    def _good_text(self, path: str) -> str | None:
        history, _ = self._read(path)
        return None if history is None else encode_epoch_file(history)


def _write_atomically(path: str, text: str) -> None:
    """``mqha.durable.write_atomically``, its failure named as an epoch file write."""
    try:
        write_atomically(path, text, mode=0o600)
    except OSError as exc:
        raise StorageError(path, f"cannot write epoch file: {exc}") from exc


class EpochStore:
    """The broker's current epoch history, persisted before every change returns.

    Mutators compute the new history with the pure core, save it, and only then publish it, so a
    failed save (``StorageError``) leaves memory and disk on the old history. A lock serializes
    changes because the HA client (truncation) and the role-change path (append) may run on
    different threads.
    """

    def __init__(self, path: str) -> None:
        self._file = EpochFile(path)
        self._lock = threading.Lock()
        self._history = self._file.load()

    @property
    def file(self) -> EpochFile:
        return self._file

    @property
    def history(self) -> EpochHistory:
        return self._history

    def last_epoch(self) -> int:
        return self._history.last_epoch()

    def append(self, epoch: int, start_offset: int) -> EpochHistory:
        """:meth:`EpochHistory.append`, saved; raises as it does and then changes nothing."""
        return self._change(lambda history: history.append(epoch, start_offset))

    def truncate_suffix_by_epoch(self, epoch: int) -> EpochHistory:
        return self._change(lambda history: history.truncate_suffix_by_epoch(epoch))

    def truncate_suffix_by_offset(self, offset: int) -> EpochHistory:
        return self._change(lambda history: history.truncate_suffix_by_offset(offset))

    def truncate_prefix_by_offset(self, offset: int) -> EpochHistory:
        return self._change(lambda history: history.truncate_prefix_by_offset(offset))

    def clear(self) -> EpochHistory:
        """Drop every entry (a replica emptied to re-sync from its master's log start)."""
        return self._change(lambda history: EpochHistory())

    def with_last_end(self, end_offset: int) -> EpochHistory:
        """Close the last entry in memory only: end offsets are not stored in the file."""
        with self._lock:
            self._history = self._history.with_last_end(end_offset)
            return self._history

    def _change(self, operation: Callable[[EpochHistory], EpochHistory]) -> EpochHistory:
        with self._lock:
            updated = operation(self._history)
            # Only (epoch, start) pairs are stored; a change of end offsets alone needs no write.
            if updated.pairs() != self._history.pairs():
                self._file.save(updated)
            self._history = updated
            return updated
