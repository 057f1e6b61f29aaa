"""mqha.durable: the one atomic-replace helper (temp file, fsync, rename, fsync of the directory)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from mqha import durable


def test_write_replaces_the_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    durable.write_atomically(str(target), "old")
    durable.write_atomically(str(target), b"new\xff")
    assert target.read_bytes() == b"new\xff"
    assert os.listdir(tmp_path) == ["f"]


def test_text_is_written_as_utf8(tmp_path: Path) -> None:
    target = tmp_path / "f"
    durable.write_atomically(str(target), "épée")
    assert target.read_text(encoding="utf-8") == "épée"


def test_mode_sets_exact_bits_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    old = os.umask(0)
    try:
        durable.write_atomically(str(target), "x", mode=0o600)
    finally:
        os.umask(old)
    assert target.stat().st_mode & 0o777 == 0o600


def test_the_default_mode_is_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "plain"
    old = os.umask(0)
    try:
        durable.write_atomically(str(target), "x", make_dirs=True)
    finally:
        os.umask(old)
    assert target.stat().st_mode & 0o777 == 0o600  # issue 45: data and secrets are owner-only


def test_make_private_dirs_creates_every_missing_level_0700(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        durable.make_private_dirs(tmp_path / "a" / "b" / "c")
        durable.make_private_dirs(tmp_path / "a" / "b" / "c")  # exists: nothing to do
    finally:
        os.umask(old)
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert path.stat().st_mode & 0o777 == 0o700


def test_make_dirs_creates_the_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "f"
    with pytest.raises(FileNotFoundError):
        durable.write_atomically(str(target), "x")
    durable.write_atomically(str(target), "x", make_dirs=True)
    assert target.read_text() == "x"


def test_a_failed_rename_keeps_the_old_content_and_removes_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f"
    target.write_text("old")

    def refuse(src: str, dst: str) -> None:
        raise OSError(errno.EIO, "rename refused")

    monkeypatch.setattr(durable.os, "replace", refuse)
    with pytest.raises(OSError, match="rename refused"):
        durable.write_atomically(str(target), "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["f"]


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths fsynced, in order."""
    calls: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(durable.os, "fsync", spy)
    return calls


def test_the_file_and_its_directory_are_fsynced(tmp_path: Path, synced: list[str]) -> None:
    durable.write_atomically(str(tmp_path / "f"), "x")
    assert len(synced) == 2
    assert synced[0].startswith(str(tmp_path / ".f."))  # the temp file, before the rename
    assert synced[1] == str(tmp_path)


def test_a_directory_that_refuses_fsync_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync

    def picky(fd: int) -> None:
        if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.EINVAL, "not on a directory")
        real_fsync(fd)

    monkeypatch.setattr(durable.os, "fsync", picky)
    durable.write_atomically(str(tmp_path / "f"), "x")
    assert (tmp_path / "f").read_text() == "x"


def test_rename_durably_fsyncs_the_file_then_the_directory(tmp_path: Path, synced: list[str]) -> None:
    source, target = tmp_path / "f.new", tmp_path / "f"
    target.write_text("old")
    source.write_text("new")
    durable.rename_durably(str(source), str(target))
    assert target.read_text() == "new"
    assert os.listdir(tmp_path) == ["f"]
    assert synced == [str(source), str(tmp_path)]  # the file before the rename, the directory after


def test_remove_durably(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("x")
    assert durable.remove_durably(str(target)) is True
    assert not target.exists()
    assert durable.remove_durably(str(target)) is False


def _failing_directory_fsync(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    real_fsync = os.fsync

    def failing(fd: int) -> None:
        if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(code, os.strerror(code))
        real_fsync(fd)

    monkeypatch.setattr(durable.os, "fsync", failing)


def test_a_directory_write_error_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO means the names did not reach the disk: the caller (e.g. the commit log's flush) must know."""
    _failing_directory_fsync(monkeypatch, errno.EIO)
    with pytest.raises(OSError) as raised:
        durable.fsync_directory(str(tmp_path))
    assert raised.value.errno == errno.EIO


def test_an_unsupported_directory_fsync_is_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _failing_directory_fsync(monkeypatch, errno.EINVAL)
    for _ in range(3):
        durable.fsync_directory(str(tmp_path))
    assert [r.getMessage() for r in caplog.records].count(
        f"cannot fsync directory {tmp_path} ([Errno {errno.EINVAL}] {os.strerror(errno.EINVAL)}): "
        "names made there may not survive a power loss"
    ) == 1


def test_fsync_directory_refuses_a_file(tmp_path: Path) -> None:
    """O_DIRECTORY: a file path passed by mistake fails instead of silently syncing the file."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError):
        durable.fsync_directory(str(tmp_path / "f"))


def test_fsync_file(tmp_path: Path, synced: list[str]) -> None:
    (tmp_path / "dump").write_bytes(b"d")
    assert durable.fsync_file(str(tmp_path / "dump")) is True
    assert durable.fsync_file(str(tmp_path / "missing")) is False  # nothing to make durable
    assert synced == [str(tmp_path / "dump")]
