"""The confirm offset checkpoint file (mqha/broker/confirm_checkpoint.py): rewritten in place, checksummed,
unreadable or damaged means -1."""

import json
import stat
from pathlib import Path

from mqha.broker.confirm_checkpoint import ConfirmOffsetCheckpoint, checksum, decode, encode


def test_saves_in_place_and_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "confirmOffsetCheckpoint"
    checkpoint = ConfirmOffsetCheckpoint(str(path))
    assert checkpoint.load() == -1  # no file yet
    checkpoint.save(2**63 - 1)
    inode = path.stat().st_ino
    checkpoint.save(7, durable=True)  # shorter than before: the padding covers the old digits
    assert path.stat().st_ino == inode and path.stat().st_size == ConfirmOffsetCheckpoint.SIZE
    assert json.loads(path.read_text()) == {"confirmOffset": 7, "crc32": checksum(7)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    checkpoint.close()
    assert ConfirmOffsetCheckpoint(str(path)).load() == 7


def test_the_older_unchecked_format_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "confirmOffsetCheckpoint"
    path.write_text(json.dumps({"confirmOffset": 5}) + " " * 200 + "\n")
    checkpoint = ConfirmOffsetCheckpoint(str(path))
    assert checkpoint.load() == 5
    checkpoint.save(6)
    checkpoint.close()
    assert path.stat().st_size == ConfirmOffsetCheckpoint.SIZE
    assert ConfirmOffsetCheckpoint(str(path)).load() == 6
    assert b'"crc32"' in path.read_bytes()  # the next save writes the checked format


def test_a_torn_or_foreign_file_reads_as_unknown(tmp_path: Path) -> None:
    path = tmp_path / "confirmOffsetCheckpoint"
    for content in (b'{"confirmOff', b"\0" * 64, b'{"confirmOffset": true}', b'{"other": 1}', encode(9)[:-3]):
        path.write_bytes(content)
        assert ConfirmOffsetCheckpoint(str(path)).load() == -1


def test_every_one_bit_flip_reads_as_unknown() -> None:
    """Issue 45: a flip upward made a false lossy start, a flip downward went unnoticed."""
    for value in (-1, 0, 7, 317_890, 2**63 - 1):
        good = encode(value).ljust(ConfirmOffsetCheckpoint.SIZE)
        assert decode(good) == (value, "")
        for index in range(len(good)):
            for bit in range(8):
                damaged = bytearray(good)
                damaged[index] ^= 1 << bit
                got, why = decode(bytes(damaged))
                assert (got, bool(why)) == (-1, True), (value, index, bit, bytes(damaged))
