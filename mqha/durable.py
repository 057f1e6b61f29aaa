"""Durable file writes: the one atomic-replace and directory-fsync helper of mqha (kernel; blocking IO).

``write_atomically`` replaces a file so that a crash at any instant leaves either its old complete
content or its new one, never a torn mix, and so that the new content survives a power loss once the
call returns: write a temp file in the same directory, ``fsync`` it, ``os.replace`` it over the target,
then ``fsync`` the directory (the rename itself lives in the directory). Callers: the epoch file and
its backup (docs/reference-behaviour.md §12.1), the broker identity files (§9.3), the controller's
config store and ``storage.json``, the Raft ``.meta`` file, the cluster layout's files.

``fsync_directory`` makes the creations, renames and unlinks in a directory durable (also for the commit
log's segment names); ``fsync_file`` a file renamed into place by someone else (the Raft dump).
No other module renames files or fsyncs directories (``tests/unit/layout/test_durable_writes.py``).

The functions block; shells call them from a worker thread when they run on an event loop.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from collections.abc import Callable

log = logging.getLogger(__name__)

# Errors a file system (or the directory's permissions) answers to fsync on a directory it cannot sync
# at all: a fixed property of the place, not of this write, so raising would fail every later write
# there too. The rename is still atomic; only its durability is up to the file system. Write errors
# (EIO, ENOSPC, EROFS, ...) are raised: the caller's write did not become durable.
_DIRECTORY_SYNC_UNSUPPORTED = frozenset(
    {errno.EINVAL, errno.ENOTSUP, errno.EBADF, errno.EACCES, errno.EISDIR}
)
_warned_directories: set[str] = set()  # one warning per directory, not one per write
PRIVATE_FILE_MODE = 0o600  # data and secret files (docs/architecture.md §12.9)


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """Create the directory ``path`` and each missing parent 0700 (``os.makedirs``' mode covers only
    the last one, and the umask applies to it too)."""
    missing = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        missing.append(current)
        current = os.path.dirname(current)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        os.chmod(directory, 0o700)


def fsync_directory(directory: str) -> None:
    """Make the creations, renames and unlinks done in ``directory`` durable. Raises ``OSError``, except
    where the file system cannot sync a directory (logged once per directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        _unsupported_or_raise(directory, exc)
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        _unsupported_or_raise(directory, exc)
    finally:
        os.close(fd)


def _unsupported_or_raise(directory: str, exc: OSError) -> None:
    if exc.errno not in _DIRECTORY_SYNC_UNSUPPORTED:
        raise exc
    if directory not in _warned_directories and len(_warned_directories) < 64:
        _warned_directories.add(directory)
        log.warning(
            "cannot fsync directory %s (%s): names made there may not survive a power loss", directory, exc
        )


def fsync_file(path: str) -> bool:
    """fsync the file ``path`` (e.g. one another library renamed into place without syncing it); False
    when it does not exist (nothing to make durable). The caller fsyncs the directory if the name is new."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def write_atomically(
    path: str, data: bytes | str, *, mode: int | None = None, make_dirs: bool = False
) -> None:
    """Replace ``path`` with ``data`` (``str`` is written as UTF-8): temp file, fsync, rename, fsync
    of the directory. ``mode``: the file's exact permission bits, set before any byte is written;
    default ``0o600`` (what mqha writes this way is data or secrets). ``make_dirs`` creates the missing
    parent directories, 0700. Raises ``OSError``; the temp file never outlives a failure."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if make_dirs:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    temp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    mode = PRIVATE_FILE_MODE if mode is None else mode
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            os.fchmod(fd, mode)  # exact bits, whatever the umask
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_directory(directory)


def rename_durably(source: str, target: str) -> None:
    """Replace ``target`` with the file ``source`` (written by the caller, e.g. through a library's
    own writer): fsync ``source``, rename it over ``target``, fsync the directory. Both in one
    directory."""
    fsync_file(source)
    os.replace(source, target)
    fsync_directory(os.path.dirname(os.path.abspath(target)))


def remove_durably(path: str) -> bool:
    """Unlink ``path`` and make the removal durable; False when it did not exist."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_directory(os.path.dirname(os.path.abspath(path)))
    return True


def rewrite_atomically(
    path: str, change: Callable[[str], str], *, mode: int | None = None, make_dirs: bool = False
) -> None:
    """Replace the text file ``path`` with ``change(its text)`` (``""`` when it does not exist yet)
    through ``write_atomically``; the file's permission bits are kept unless ``mode`` is given."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        kept = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        text, kept = "", None
    write_atomically(path, change(text), mode=mode if mode is not None else kept, make_dirs=make_dirs)
