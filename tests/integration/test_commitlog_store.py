"""Commit log on real files (docs/architecture.md §4): append, read, HA copy, truncate, delete, reopen,
flushing."""

import itertools
import os
import threading
import time
from pathlib import Path

import pytest

from mqha.broker.commitlog import CommitLog, FlushMode, InvalidDraft, MessageDraft, OffsetTooSmall
from mqha.broker.commitlog import flushing as commitlog_flushing
from mqha.broker.commitlog.codec import BLANK_MAGIC, BLANK_SIZE, decode_message, encode_message
from mqha.broker.commitlog.segment import IOV_MAX, SPARE_NAME, Segment, parse_segment_name, segment_name
from mqha.errors import NotAlignedError, RemoteProtocolError, StorageError

SEG = 4096
TS = 1_700_000_000_000


def clock() -> int:
    return TS


def open_log(path: Path, segment_size: int = SEG, **kwargs: object) -> CommitLog:
    return CommitLog.open(str(path), segment_size, clock=clock, **kwargs)  # type: ignore[arg-type]


def draft(i: int, size: int = 100) -> MessageDraft:
    return MessageDraft(f"topic-{i % 3}", bytes([i % 251]) * size, keys=f"key{i}", properties={"i": str(i)})


def segment_files(path: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name not in ("checkpoint", SPARE_NAME)
    }


def test_append_single_and_batch_then_read(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        assert (log.min_offset, log.max_offset) == (0, 0)
        first = log.append(draft(0))
        batch = log.append_batch([draft(i) for i in range(1, 6)])
        assert first.offset == 0 and batch[0].offset == first.offset + first.size
        for a, b in itertools.pairwise(batch):
            assert b.offset == a.offset + a.size
        assert log.max_offset == batch[-1].offset + batch[-1].size
        for i, result in enumerate([first, *batch]):
            message = log.read(result.offset)
            assert (message.offset, message.size, message.msg_id) == (
                result.offset,
                result.size,
                result.msg_id,
            )
            assert (message.topic, message.body, message.keys) == (
                f"topic-{i % 3}",
                bytes([i]) * 100,
                f"key{i}",
            )
            assert message.properties == {"i": str(i)} and message.store_ts == message.born_ts == TS
        assert log.append_batch([]) == []


def test_msg_ids_are_generated_unique_or_kept(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        ids = [log.append(MessageDraft("t", b"x")).msg_id for _ in range(50)]
        ids += [r.msg_id for r in log.append_batch([MessageDraft("t", b"x")] * 50)]
        assert len(set(ids)) == 100 and all(len(i) == 32 and i == i.upper() for i in ids)
        kept = log.append(MessageDraft("t", b"x", msg_id="MY-ID", born_ts=5))
        assert kept.msg_id == "MY-ID" and log.read(kept.offset).born_ts == 5


def test_segments_roll_with_a_blank_marker(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        results = [log.append(draft(i, 300)) for i in range(30)]
        rolled = [r for r in results if r.offset % SEG == 0 and r.offset]
        assert rolled, "expected a message to start a new segment"
        for r in rolled:
            before = max(x for x in results if x.offset < r.offset)
            blank_at = before.offset + before.size
            raw = log.read_raw(blank_at, 1)
            assert len(raw) == r.offset - blank_at >= BLANK_SIZE
            assert int.from_bytes(raw[4:8], "big") == BLANK_MAGIC and raw[8:] == bytes(len(raw) - 8)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[-2:] == ["checkpoint", SPARE_NAME]  # the next segment's file, prepared ahead
    assert names[:-2] == [segment_name(i * SEG) for i in range(len(names) - 2)]
    assert segment_name(1073741824) == "00000000001073741824"
    assert all(os.path.getsize(tmp_path / n) == SEG for n in names if n != "checkpoint")


def spare_inode(path: Path) -> int | None:
    spare = path / SPARE_NAME
    return spare.stat().st_ino if spare.exists() else None


def test_the_next_segment_file_is_prepared_ahead_and_renamed_at_the_roll_over(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        log.append(draft(0, 1500))
        log._spare.wait()
        assert spare_inode(tmp_path) is None  # under half a segment: no spare yet
        log.append(draft(1, 1500))  # past the middle of segment 0
        log._spare.wait()
        inode = spare_inode(tmp_path)
        assert inode is not None and os.path.getsize(tmp_path / SPARE_NAME) == SEG
        rolled = log.append(draft(2, 1500))
        assert rolled.offset == SEG  # the third does not fit segment 0
        assert (tmp_path / segment_name(SEG)).stat().st_ino == inode and spare_inode(tmp_path) is None
        assert log.read(rolled.offset).body == bytes([2]) * 1500
        log.append(draft(3, 1500))  # past the middle of segment 1: the next spare
        log._spare.wait()
        assert spare_inode(tmp_path) not in (None, inode)
    assert spare_inode(tmp_path) is not None
    with open_log(tmp_path) as log:  # recovery passes the spare by; open deletes it
        assert log.max_offset == SEG + 2 * rolled.size and log.recovery.cut_offset is None
        assert spare_inode(tmp_path) is None
        assert log.append(draft(4, 1500)).offset == 2 * SEG  # created at the roll-over, then a spare
        log._spare.wait()
        assert os.path.getsize(tmp_path / SPARE_NAME) == SEG


def test_a_leftover_spare_is_deleted_at_open_and_made_anew(tmp_path: Path) -> None:
    (tmp_path / SPARE_NAME).write_bytes(b"x" * SEG)  # e.g. a segment whose rename never reached the disk
    with open_log(tmp_path) as log:
        assert not (tmp_path / SPARE_NAME).exists()
        log.append_batch([draft(i, 1500) for i in range(2)])
        log._spare.wait()
        assert (tmp_path / SPARE_NAME).read_bytes() == bytes(SEG)


def test_a_failed_preallocation_leaves_the_segment_to_the_roll_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.posix_fallocate

    def no_room_for_the_spare(fd: int, offset: int, length: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(SPARE_NAME):
            raise OSError(28, "No space left on device")
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", no_room_for_the_spare)
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 1500) for i in range(2)])
        log._spare.wait()
        assert not (tmp_path / SPARE_NAME).exists()  # the space given back
        rolled = log.append(draft(2, 1500))
        assert rolled.offset == SEG and os.path.getsize(tmp_path / segment_name(SEG)) == SEG
        assert [log.read(r.offset).body for r in [*results, rolled]] == [bytes([i]) * 1500 for i in range(3)]


def test_a_new_segment_name_is_made_durable_by_the_next_flush_even_after_a_failed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def fsync_directory(directory: str) -> None:
        calls.append(directory)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")

    with open_log(tmp_path, flush_interval_ms=600_000) as log:
        monkeypatch.setattr(commitlog_flushing, "fsync_directory", fsync_directory)
        log.append(draft(0))  # creates segment 0: a name not yet durable
        assert calls == []  # no fsync at creation
        with pytest.raises(OSError):
            log.flush()
        log.flush()
        log.flush()  # no new name since: no directory fsync
        assert calls == [str(tmp_path)] * 2


def test_batch_spanning_segments_equals_single_appends(tmp_path: Path) -> None:
    drafts = [MessageDraft("t", bytes([i]) * 250, msg_id=f"id{i}") for i in range(40)]
    with open_log(tmp_path / "a") as a, open_log(tmp_path / "b") as b:
        batch = a.append_batch(drafts)
        singles = [b.append(d) for d in drafts]
        assert [(r.offset, r.size) for r in batch] == [(r.offset, r.size) for r in singles]
    assert segment_files(tmp_path / "a") == segment_files(tmp_path / "b")


def test_a_bad_draft_stores_nothing_of_its_batch(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        log.append(draft(0))
        before = log.max_offset
        with pytest.raises(InvalidDraft) as info:
            log.append_batch([draft(1), MessageDraft("", b"no topic"), draft(2)])
        assert "message 1 of the batch" in "".join(info.value.__notes__)
        assert log.max_offset == before
        with pytest.raises(InvalidDraft):
            log.append(MessageDraft("t", b"x" * SEG))  # larger than a segment can hold
        assert log.max_offset == before
        assert log.max_message_size == SEG - BLANK_SIZE


def test_read_rejects_non_message_offsets(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        results = [log.append(draft(i, 300)) for i in range(15)]
        for bad in (results[1].offset + 1, log.max_offset, log.max_offset + 100, -1):
            with pytest.raises(NotAlignedError):
                log.read(bad)
        blank_at = next(r.offset + r.size for r, n in itertools.pairwise(results) if n.offset % SEG == 0)
        with pytest.raises(NotAlignedError, match="no message starts here"):
            log.read(blank_at)


def test_read_messages_respects_limit_and_skips_blank_markers(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 500) for i in range(30)])
        assert len(os.listdir(tmp_path)) > 3
        messages, next_offset = log.read_messages(0, 1000, log.max_offset)
        assert [m.offset for m in messages] == [r.offset for r in results]
        assert next_offset == log.max_offset
        # limit_offset (confirmOffset): a message ending exactly there is included, one crossing it is not
        cut = results[10]
        messages, next_offset = log.read_messages(0, 1000, cut.offset + cut.size)
        assert len(messages) == 11 and next_offset == cut.offset + cut.size
        messages, next_offset = log.read_messages(0, 1000, cut.offset + cut.size - 1)
        assert len(messages) == 10 and next_offset == cut.offset
        # paging with max_messages, across segment ends
        seen, offset = [], 0
        while True:
            page, offset = log.read_messages(offset, 3, log.max_offset)
            if not page:
                break
            seen += page
        assert [m.msg_id for m in seen] == [r.msg_id for r in results]
        assert log.read_messages(log.max_offset, 10, log.max_offset + 999) == ([], log.max_offset)
        with pytest.raises(NotAlignedError):
            log.read_messages(results[3].offset + 7, 10, log.max_offset)


def test_read_raw_returns_whole_units_within_one_segment(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 200) for i in range(40)])
        assert log.read_raw(log.max_offset, 100) == b""
        one = log.read_raw(0, 1)  # at least one unit
        assert one == encode_message(draft(0, 200), 0, TS, msg_id=results[0].msg_id)
        chunk = log.read_raw(0, 1000)
        assert len(chunk) == sum(r.size for r in results[: 1000 // results[0].size])
        whole = log.read_raw(0, 1 << 20)
        assert len(whole) == SEG  # stops at the segment end, blank marker included
        with pytest.raises(NotAlignedError):
            log.read_raw(5, 1000)


def test_read_batches_cuts_one_read_into_whole_unit_batches(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        log.append_batch([draft(i, 40 + 90 * (i % 7)) for i in range(60)])  # 2+ segments of 4 KiB
        log.append(MessageDraft("big", b"x" * 1500))  # larger than a batch: it goes alone
        offset, seen = 0, []
        while offset < log.max_offset:
            batches = log.read_batches(offset, 1000, 3000)
            assert batches and sum(map(len, batches)) <= max(3000, len(batches[0]))
            for batch in batches:
                assert len(batch) <= 1000 or log.read(offset).topic == "big"
                assert bytes(batch) == bytes(log.read_raw(offset, len(batch)))  # whole units
                assert offset // SEG == (offset + len(batch) - 1) // SEG  # within one segment
                seen.append(bytes(batch))
                offset += len(batch)
        assert log.read_batches(log.max_offset, 1000, 3000) == []
        with pytest.raises(NotAlignedError, match="no unit starts here"):
            log.read_batches(5, 1000, 3000)
    copied = b"".join(seen)
    assert copied == b"".join(segment_files(tmp_path).values())[: len(copied)]


@pytest.mark.parametrize("chunk", [1, 700, 1 << 20])
def test_read_raw_append_raw_copies_byte_identical_files(tmp_path: Path, chunk: int) -> None:
    with open_log(tmp_path / "master") as master, open_log(tmp_path / "slave") as slave:
        master.append_batch([draft(i, 37 * (i % 11)) for i in range(120)])
        offset = 0
        while offset < master.max_offset:
            data = master.read_raw(offset, chunk)
            slave.append_raw(offset, data)
            offset += len(data)
            assert slave.max_offset == offset
        assert slave.read_messages(0, 1000, slave.max_offset) == master.read_messages(
            0, 1000, master.max_offset
        )
    assert segment_files(tmp_path / "master") == segment_files(tmp_path / "slave")


def test_append_raw_takes_many_parts_across_segments_in_one_call(tmp_path: Path) -> None:
    """The parts of one receive go in with one call: split per segment (a part ending in a blank
    marker closes one), byte-identical to the master; one bad part anywhere writes nothing."""
    with open_log(tmp_path / "master") as master, open_log(tmp_path / "slave") as slave:
        master.append_batch([draft(i, 150) for i in range(150)])  # about 7 segments of 4 KiB
        parts, offset = [], 0
        while offset < master.max_offset:
            parts.append(master.read_raw(offset, 700))
            offset += len(parts[-1])
        damaged = bytearray(parts[-2])
        damaged[-1] ^= 1
        with pytest.raises(RemoteProtocolError, match="body CRC"):
            slave.append_raw(0, *parts[:-2], bytes(damaged), parts[-1])
        assert slave.max_offset == 0 and not (tmp_path / "slave" / segment_name(0)).exists()
        with pytest.raises(RemoteProtocolError, match="cross the segment end"):
            slave.append_raw(0, b"".join(parts[:10]))
        half = len(parts) // 2
        slave.append_raw(0, *parts[:half])
        slave.append_raw(slave.max_offset, *(memoryview(part) for part in parts[half:]))
        assert slave.max_offset == master.max_offset
    assert segment_files(tmp_path / "master") == segment_files(tmp_path / "slave")


def test_segment_write_parts_beyond_one_pwritev(tmp_path: Path) -> None:
    parts = [bytes([i % 256]) * 33 for i in range(IOV_MAX + 5)]  # two pwritev calls
    segment = Segment.create(str(tmp_path), 0, 1 << 20)
    segment.write_parts(10, parts)
    segment.write_parts(0, [b"head", b"er"])  # small: copied into the map
    assert segment.read(0, 10 + 33 * len(parts)) == b"header" + bytes(4) + b"".join(parts)
    segment.close()


def test_append_raw_rejects_bad_bytes_and_offsets(tmp_path: Path) -> None:
    with open_log(tmp_path / "m") as master, open_log(tmp_path / "s") as slave:
        master.append_batch([draft(i, 300) for i in range(20)])
        data = master.read_raw(0, 2000)
        with pytest.raises(NotAlignedError, match="log ends at 0"):
            slave.append_raw(100, data)
        damaged = bytearray(data)
        damaged[-1] ^= 1
        with pytest.raises(RemoteProtocolError, match="body CRC"):
            slave.append_raw(0, bytes(damaged))
        with pytest.raises(RemoteProtocolError, match="torn"):
            slave.append_raw(0, data[:-1])
        with pytest.raises(RemoteProtocolError, match="physicalOffset"):
            slave.append_raw(0, data[results_size(data) :])
        assert slave.max_offset == 0 and not (tmp_path / "s" / segment_name(0)).exists()
        slave.append_raw(0, data)
        with pytest.raises(RemoteProtocolError, match="cross"):
            slave.append_raw(slave.max_offset, bytes(SEG))
        slave.append_raw(slave.max_offset, b"")  # nothing to do
        assert slave.max_offset == len(data)


def results_size(data: bytes) -> int:
    return int.from_bytes(data[:4], "big")


def test_empty_slave_may_start_at_a_segment_base(tmp_path: Path) -> None:
    with open_log(tmp_path / "m") as master:
        master.append_batch([draft(i, 300) for i in range(40)])
        master.delete_segments_before(2 * SEG)
        start = master.min_offset
        assert start == 2 * SEG
        with open_log(tmp_path / "s") as slave:
            with pytest.raises(NotAlignedError):
                slave.append_raw(start + 5, master.read_raw(start, 1))
            offset = start
            while offset < master.max_offset:
                data = master.read_raw(offset, 1000)
                slave.append_raw(offset, data)
                offset += len(data)
            assert (slave.min_offset, slave.max_offset) == (start, master.max_offset)
        with open_log(tmp_path / "s") as slave:
            assert (slave.min_offset, slave.max_offset) == (start, master.max_offset)


def test_truncate_at_boundaries(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 300) for i in range(40)])
        # the spare segment is prepared in the background: count the segments alone
        files_before = len(set(os.listdir(tmp_path)) - {SPARE_NAME})
        assert log.is_boundary(results[25].offset) and not log.is_boundary(results[25].offset + 1)
        with pytest.raises(NotAlignedError, match="not a message boundary"):
            log.truncate(results[25].offset + 1)
        with pytest.raises(NotAlignedError):
            log.truncate(-1)
        # no-op, as is anything past the end (docs/reference-behaviour.md §13 step 4)
        log.truncate(log.max_offset)
        log.truncate(log.max_offset + 1)
        assert log.max_offset == results[-1].offset + results[-1].size
        log.truncate(results[25].offset)
        assert log.max_offset == results[25].offset
        assert len(set(os.listdir(tmp_path)) - {SPARE_NAME}) < files_before
        with pytest.raises(NotAlignedError):
            log.read(results[26].offset)
        again = log.append(draft(99, 10))
        assert again.offset == results[25].offset and log.read(again.offset).keys == "key99"
        log.truncate(SEG)  # a segment base: that file goes too, segment 0 (complete) ends the log
        assert log.max_offset == SEG
        assert sorted(set(os.listdir(tmp_path)) - {SPARE_NAME}) == [segment_name(0), "checkpoint"]
        assert log.append(draft(3)).offset == SEG
        log.truncate(0)  # everything
        assert (log.min_offset, log.max_offset) == (0, 0)
        assert log.append(draft(1)).offset == 0
    with open_log(tmp_path) as log:
        assert log.max_offset == log.read(0).size


def test_truncate_at_a_blank_marker_start(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 300) for i in range(20)])
        rolled = next(i for i, r in enumerate(results) if i and r.offset % SEG == 0)
        blank_at = results[rolled - 1].offset + results[rolled - 1].size
        assert log.is_boundary(blank_at) and not log.is_boundary(blank_at + BLANK_SIZE)
        log.truncate(blank_at)
        assert log.max_offset == blank_at
        small = log.append(MessageDraft("t", b"", msg_id="x"))  # 54 bytes: fits where the blank marker was
        assert small.offset == blank_at


def test_delete_segments_before(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        log.append_batch([draft(i, 300) for i in range(40)])
        # The segments: the spare is prepared in the background, so it may not be there yet (under load).
        count = sum(parse_segment_name(name) is not None for name in os.listdir(tmp_path))
        assert log.delete_segments_before(SEG - 1) == 0
        assert log.delete_segments_before(2 * SEG) == 2
        assert log.min_offset == 2 * SEG and not (tmp_path / segment_name(0)).exists()
        with pytest.raises(OffsetTooSmall) as caught:  # below the log start: a status, not later data
            log.read_messages(0, 5, log.max_offset)
        assert caught.value.min_offset == 2 * SEG
        messages, _ = log.read_messages(0, 5, log.max_offset, skip_deleted=True)
        assert messages[0].offset == 2 * SEG
        assert log.delete_segments_before(1 << 40) == count - 3  # never the last one
        assert log.min_offset == (count - 1) * SEG
        assert log.read_messages(0, 100, log.max_offset, skip_deleted=True)[1] == log.max_offset
    with open_log(tmp_path) as log:
        assert log.min_offset == (count - 1) * SEG


def test_reopen_after_close_gives_identical_state(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        log.append_batch([draft(i, 300) for i in range(33)])
        state = (log.min_offset, log.max_offset, log.read_messages(0, 1000, log.max_offset))
        files = segment_files(tmp_path)
    with open_log(tmp_path) as log:
        assert (log.min_offset, log.max_offset, log.read_messages(0, 1000, log.max_offset)) == state
        assert log.recovery.clean and log.recovery.cut_offset is None
        assert log.recovery.verified_from == max(
            int(n) for n in files
        )  # the clean path verifies the last file
    assert segment_files(tmp_path) == files


def test_async_flusher_makes_appends_durable(tmp_path: Path) -> None:
    with open_log(tmp_path, flush_interval_ms=10) as log:
        log.append_batch([draft(i) for i in range(10)])
        deadline = time.monotonic() + 5
        while log.flushed_offset < log.max_offset and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.flushed_offset == log.max_offset


def test_sync_flush_is_durable_on_return(tmp_path: Path) -> None:
    with open_log(tmp_path, flush_mode=FlushMode.SYNC_FLUSH, flush_interval_ms=60_000) as log:
        log.append(draft(0))
        assert log.flushed_offset == log.max_offset
        log.append_batch([draft(i, 900) for i in range(12)])
        assert log.flushed_offset == log.max_offset


def test_concurrent_appends_get_distinct_contiguous_offsets(tmp_path: Path) -> None:
    with open_log(tmp_path, flush_mode=FlushMode.SYNC_FLUSH) as log:
        results: list = []

        def writer(n: int) -> None:
            for i in range(25):
                results.extend(
                    log.append_batch([draft(n * 100 + i, 50)]) if i % 2 else [log.append(draft(i, 50))]
                )

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        messages, _ = log.read_messages(0, 1000, log.max_offset)
        assert sorted(r.offset for r in results) == [m.offset for m in messages]
        assert len(messages) == 100 and log.flushed_offset == log.max_offset


def test_closed_log_refuses_work_and_close_is_idempotent(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(draft(0))
    log.close()
    log.close()
    with pytest.raises(StorageError, match="closed"):
        log.append(draft(1))
    with pytest.raises(StorageError, match="closed"):
        log.read(0)


def test_bad_open_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="segment_size"):
        CommitLog.open(str(tmp_path), 100)
    with pytest.raises(ValueError, match="flush_interval_ms"):
        CommitLog.open(str(tmp_path), SEG, flush_interval_ms=0)


def test_records_on_disk_decode_with_the_codec(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        result = log.append(draft(7))
    data = (tmp_path / segment_name(0)).read_bytes()
    assert decode_message(data, result.offset, base_offset=0).msg_id == result.msg_id


def _mapped_rss_kib(directory: Path) -> int:
    """This process's resident KiB of mappings of files in ``directory`` (from /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = len(fields) >= 6 and fields[5].startswith(str(directory))
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


def test_flushed_pages_leave_the_process_rss(tmp_path: Path) -> None:
    """RSS does not grow with the log: large appends (these 256 KB batches) write around the map
    (pwrite), and the flusher unmaps the flushed pages that reads mapped in (the page cache keeps them)."""
    segment = 8 * 1024 * 1024
    with open_log(tmp_path, segment, flush_interval_ms=300) as log:  # reads outpace the first release
        body = MessageDraft("t", b"x" * 4000)
        while log.max_offset < 3 * segment:
            log.append_batch([body] * 64)
        assert _mapped_rss_kib(tmp_path) <= 1024  # writing mapped nothing in
        offset, touched = 0, 0
        while offset < log.max_offset:  # consumers' reads map the segments in
            messages, offset = log.read_messages(offset, 500, log.max_offset)
            assert messages
            touched = max(touched, _mapped_rss_kib(tmp_path))
        assert touched > 4 * 1024
        deadline = time.monotonic() + 10
        while _mapped_rss_kib(tmp_path) > 1024 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _mapped_rss_kib(tmp_path) <= 1024
        # The data is intact and reads fault it back in.
        assert log.read(0).body == b"x" * 4000
        assert log.read_raw(segment, 4096)
