"""The disk filler refuses every directory that is not a small tmpfs mount (never the real disk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.cluster.tmpfs import DiskFiller, is_tmpfs_mount


def test_the_filler_refuses_a_plain_directory(tmp_path: Path) -> None:
    filler = DiskFiller(tmp_path)
    assert not is_tmpfs_mount(tmp_path)
    assert "not a tmpfs mount point" in (filler.check() or "")
    with pytest.raises(ValueError, match="refusing to fill"):
        filler.fill()
    assert list(tmp_path.iterdir()) == []
    assert filler.free() is False


def test_the_filler_refuses_a_directory_inside_a_tmpfs(tmp_path: Path) -> None:
    if not is_tmpfs_mount("/dev/shm"):
        pytest.skip("no tmpfs on /dev/shm here")
    assert "not a tmpfs mount point" in (DiskFiller("/dev/shm/not-a-mount").check() or "")
