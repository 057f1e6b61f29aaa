"""The confirm offset checkpoint file (mqha/broker/store.py): rewritten in place, unreadable means -1."""

import json
from pathlib import Path

from mqha.broker.store import ConfirmOffsetCheckpoint


def test_saves_in_place_and_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "confirmOffsetCheckpoint"
    checkpoint = ConfirmOffsetCheckpoint(str(path))
    assert checkpoint.load() == -1  # no file yet
    checkpoint.save(2**63 - 1)
    inode = path.stat().st_ino
    checkpoint.save(7, durable=True)  # shorter than before: the padding covers the old digits
    assert path.stat().st_ino == inode and path.stat().st_size == ConfirmOffsetCheckpoint.SIZE
    assert json.loads(path.read_text()) == {"confirmOffset": 7}
    checkpoint.close()
    assert ConfirmOffsetCheckpoint(str(path)).load() == 7


def test_a_longer_file_from_elsewhere_is_cut_to_the_record(tmp_path: Path) -> None:
    path = tmp_path / "confirmOffsetCheckpoint"
    path.write_text(json.dumps({"confirmOffset": 5}) + " " * 200 + "\n")
    checkpoint = ConfirmOffsetCheckpoint(str(path))
    assert checkpoint.load() == 5
    checkpoint.save(6)
    checkpoint.close()
    assert path.stat().st_size == ConfirmOffsetCheckpoint.SIZE
    assert ConfirmOffsetCheckpoint(str(path)).load() == 6


def test_a_torn_or_foreign_file_reads_as_unknown(tmp_path: Path) -> None:
    path = tmp_path / "confirmOffsetCheckpoint"
    for content in (b'{"confirmOff', b"\0" * 64, b'{"confirmOffset": true}', b'{"other": 1}'):
        path.write_bytes(content)
        assert ConfirmOffsetCheckpoint(str(path)).load() == -1
