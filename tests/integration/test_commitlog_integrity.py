"""Damaged records in older segments, on real files (docs/architecture.md §4.7): reads serve the good
messages before one, the HA read path never ships one, and a peer's copy repairs it in place."""

from pathlib import Path

import pytest

from mqha.broker.commitlog import CommitLog, CorruptRecordError, MessageDraft
from mqha.broker.commitlog.scrub import Scrubber
from mqha.broker.commitlog.segment import segment_name
from mqha.errors import NotAlignedError, RemoteProtocolError

SEG = 4096
TS = 1_700_000_000_000


def open_log(path: Path) -> CommitLog:
    return CommitLog.open(str(path), SEG, clock=lambda: TS)


def fill(log: CommitLog, count: int = 120) -> list[tuple[int, int]]:
    """(offset, size) of ``count`` messages of about 150 bytes: several segments."""
    results = log.append_batch(
        [MessageDraft(f"t{i % 2}", bytes([i % 251]) * 60, msg_id=f"m{i:04d}") for i in range(count)]
    )
    log.flush()
    return [(r.offset, r.size) for r in results]


def flip(directory: Path, offset: int, segment_size: int = SEG) -> None:
    """Invert one byte at the global ``offset`` in its segment file (as a disk's flipped bit would)."""
    base = offset - offset % segment_size
    path = directory / segment_name(base)
    with open(path, "r+b") as f:
        f.seek(offset - base)
        byte = f.read(1)[0]
        f.seek(offset - base)
        f.write(bytes([byte ^ 0x10]))


@pytest.mark.parametrize("where", ["body", "size"])
def test_a_read_returns_the_messages_before_a_damaged_record(tmp_path: Path, where: str) -> None:
    with open_log(tmp_path) as log:
        records = fill(log)
    bad, size = records[5]
    flip(tmp_path, bad + (size - 3 if where == "body" else 2))  # a body byte, or the totalSize field
    with open_log(tmp_path) as log:  # clean: older segments are not re-read at open
        assert log.max_offset == records[-1][0] + records[-1][1]
        with pytest.raises(CorruptRecordError) as caught:
            log.read_messages(0, 100, log.max_offset)
        assert caught.value.offset == bad
        assert [m.offset for m in caught.value.messages] == [o for o, _ in records[:5]]
        assert caught.value.resume == records[6][0]  # the next record, found by size or by its magic
        assert log.bad_records().keys() == {bad}
        # A read that starts at the damaged record says so too (it is a boundary, not a wrong offset).
        with pytest.raises(CorruptRecordError) as at_bad:
            log.read_messages(bad, 10, log.max_offset)
        assert at_bad.value.messages == []
        # Reads past it go on as before; a read at a non-boundary is still a 400's NotAlignedError.
        after, _ = log.read_messages(caught.value.resume, 3, log.max_offset)
        assert [m.offset for m in after] == [o for o, _ in records[6:9]]
        with pytest.raises(NotAlignedError):
            log.read_messages(records[8][0] + 1, 3, log.max_offset)


def test_the_ha_read_path_never_ships_a_damaged_record(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        records = fill(log)
    bad, size = records[3]
    flip(tmp_path, bad + size - 1)
    with open_log(tmp_path) as log:
        shipped = b"".join(bytes(b) for b in log.read_batches(0, 1 << 20, 1 << 20))
        assert len(shipped) == bad  # everything before it, nothing of it
        with pytest.raises(CorruptRecordError) as caught:
            log.read_batches(bad, 1 << 20, 1 << 20)
        assert caught.value.offset == bad


def test_a_peer_copy_repairs_a_damaged_record_in_place(tmp_path: Path) -> None:
    good_dir, bad_dir = tmp_path / "good", tmp_path / "bad"
    with open_log(good_dir) as good, open_log(bad_dir) as copy:
        records = fill(good)
        offset = 0
        while batch := good.read_raw(offset, 1 << 20):
            copy.append_raw(offset, batch)
            offset += len(batch)
    bad, size = records[40]
    flip(bad_dir, bad + size - 2)
    with open_log(good_dir) as good, open_log(bad_dir) as copy:
        assert copy.confirm_damage(records[39][0]) is None  # a sound record
        assert copy.confirm_damage(bad) == records[41][0]
        assert copy.bad_records().keys() == {bad}
        with pytest.raises(CorruptRecordError):
            copy.read_unit(bad, copy.max_offset)
        data = good.read_unit(bad, good.max_offset)
        assert len(data) == size
        with pytest.raises(NotAlignedError):
            good.read_unit(bad, bad + size - 1)  # beyond the limit a peer may serve
        with pytest.raises(RemoteProtocolError):
            copy.rewrite_unit(bad, good.read_unit(records[41][0], good.max_offset))  # another record
        with pytest.raises(RemoteProtocolError):
            copy.rewrite_unit(bad, data[:-1] + bytes([data[-1] ^ 1]))  # a damaged copy
        with pytest.raises(NotAlignedError):
            copy.rewrite_unit(records[39][0], good.read_unit(records[39][0], good.max_offset))  # sound
        copy.rewrite_unit(bad, data)
        assert copy.bad_records() == {}
        messages, _ = copy.read_messages(0, 1000, copy.max_offset)
        assert len(messages) == len(records)
    assert (good_dir / segment_name(bad - bad % SEG)).read_bytes() == (
        bad_dir / segment_name(bad - bad % SEG)
    ).read_bytes()


def test_a_cut_forgets_the_damaged_records_it_removes(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        records = fill(log)
    bad, size = records[50]
    flip(tmp_path, bad + size - 1)
    with open_log(tmp_path) as log:
        assert log.confirm_damage(bad) is not None
        log.truncate(records[49][0])
        assert log.bad_records() == {}


def test_the_scrub_walks_every_segment_oldest_first_and_finds_a_flipped_bit(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        records = fill(log, 200)
    end = records[-1][0] + records[-1][1]
    assert end > 5 * SEG
    bad, size = records[20]
    flip(tmp_path, bad + size - 4)
    with open_log(tmp_path) as log:
        scrubber = Scrubber(log)
        found, read, steps = [], 0, 0
        while not (step := scrubber.step(1000)).pass_done:
            found += step.found
            read += step.read
            steps += 1
            assert steps < 1000
        scrubber.close()
        assert found == [bad]
        # every byte, plus what each step read of a unit it left whole to the next step
        assert end - size <= read < end + steps * 200
        assert log.bad_records().keys() == {bad}
        log.append_batch([MessageDraft("t0", b"more")])  # the next pass starts again at the log start
        assert scrubber.step(1 << 20).read > 0 and scrubber.position > 0
