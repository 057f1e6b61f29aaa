"""Small file systems for broker stores, and filling them up (shell: mounts, files).

A full disk is only safe to provoke on a file system of its own: ``mount_tmpfs`` puts a tmpfs of a few
MiB on a directory (root only), and :class:`DiskFiller` writes a filler file into such a mount until
``ENOSPC`` and deletes it again. The filler refuses any directory that is not the root of a tmpfs
mount no larger than ``FILL_MAX_BYTES``: it can never fill the machine's real disk. Used by the local
cluster (``LocalCluster(store_tmpfs_mib=N)``), ``mqha chaos``'s ``disk-full`` fault and the tests.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

FILLER_NAME = "disk-filler"
FILL_MAX_BYTES = 1 << 30
"""The largest file system the filler agrees to fill (a test or chaos tmpfs is a few dozen MiB)."""
_CHUNK = 1 << 20
_MOUNT_TIMEOUT_S = 10.0


def cannot_mount() -> str | None:
    """Why tmpfs mounts are unavailable here (a reason to skip), or None when they are."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root (CI runs as root)"
    return None


def mount_tmpfs(directory: str | os.PathLike[str], size_mib: int) -> None:
    """Mount a tmpfs of ``size_mib`` MiB on ``directory`` (created if needed). Raises OSError."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    if is_tmpfs_mount(path):
        return  # mounted by an earlier start of the same run
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={int(size_mib)}m,mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        timeout=_MOUNT_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(errno.EPERM, f"cannot mount a tmpfs on {path}: {done.stderr.strip()}")


def unmount(directory: str | os.PathLike[str]) -> None:
    """Unmount ``directory`` if it is a tmpfs mount (lazily when something still holds it open)."""
    path = Path(directory)
    if not is_tmpfs_mount(path):
        return
    done = subprocess.run(["umount", str(path)], capture_output=True, timeout=_MOUNT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        subprocess.run(
            ["umount", "-l", str(path)], capture_output=True, timeout=_MOUNT_TIMEOUT_S, check=False
        )


def unmount_keeping_files(directory: str | os.PathLike[str]) -> None:
    """Unmount the tmpfs on ``directory`` and leave its files (but a filler) in the directory on the
    disk below, so a run's stores can be read after their file systems are gone. Stop the processes
    using them first."""
    path = Path(directory)
    if not is_tmpfs_mount(path):
        return
    copy = path.with_name(path.name + ".unmounting")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns(FILLER_NAME), symlinks=True)
    unmount(path)
    shutil.rmtree(path, ignore_errors=True)  # empty unless the unmount was lazy
    copy.rename(path)


@contextlib.contextmanager
def tmpfs(directory: str | os.PathLike[str], size_mib: int) -> Iterator[Path]:
    """A tmpfs on ``directory`` for the ``with`` block, unmounted in a ``finally``."""
    mount_tmpfs(directory, size_mib)
    try:
        yield Path(directory)
    finally:
        unmount(directory)


def is_tmpfs_mount(directory: str | os.PathLike[str]) -> bool:
    """``directory`` is the mount point of a tmpfs (per ``/proc/self/mounts``)."""
    target = os.path.realpath(directory)
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            lines = mounts.read().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        # Mount points with spaces are octal-escaped in /proc/self/mounts.
        if len(fields) >= 3 and fields[2] == "tmpfs" and _unescape(fields[1]) == target:
            return True
    return False


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


class DiskFiller:
    """Fills one small tmpfs with a filler file until ``ENOSPC``, and frees it again."""

    def __init__(self, mount_point: str | os.PathLike[str]) -> None:
        self.path = Path(mount_point) / FILLER_NAME
        self.mount_point = Path(mount_point)

    def check(self) -> str | None:
        """Why this directory must not be filled (not a small tmpfs mount), or None."""
        if not is_tmpfs_mount(self.mount_point):
            return f"{self.mount_point} is not a tmpfs mount point: refusing to fill it"
        stat = os.statvfs(self.mount_point)
        if stat.f_blocks * stat.f_frsize > FILL_MAX_BYTES:
            return f"{self.mount_point} is larger than {FILL_MAX_BYTES >> 20} MiB: refusing to fill it"
        return None

    def fill(self, leave_bytes: int = 0) -> int:
        """Write the filler until ``ENOSPC`` (or until only ``leave_bytes`` are free). Returns the bytes
        written by this call. Raises ``ValueError`` when :meth:`check` refuses the directory."""
        problem = self.check()
        if problem is not None:
            raise ValueError(problem)
        written = 0
        chunk = bytes(_CHUNK)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while True:
                stat = os.statvfs(self.mount_point)
                room = stat.f_bavail * stat.f_frsize - leave_bytes
                if room <= 0:
                    return written
                try:
                    written += os.write(fd, chunk[: min(_CHUNK, room)])
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        return written
                    raise
        finally:
            os.close(fd)

    def free(self) -> bool:
        """Delete the filler; True if there was one."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True
