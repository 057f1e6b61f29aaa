"""Commit-log crash recovery on real files: torn tails at every byte, flipped bytes, garbage, foreign
files, both recovery paths (clean shutdown / crash), and a killed writer process.

A "crash image" is the directory as a crash would leave it: segment bytes plus a DIRTY checkpoint,
built by copying files of a log that is still open (its flusher never ran, so the checkpoint's flushed
offset is where the log was opened).
"""

import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mqha.broker.commitlog import CommitLog, MessageDraft
from mqha.broker.commitlog.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from mqha.broker.commitlog.segment import SPARE_NAME, segment_name
from mqha.errors import CorruptFileError, ForeignFileError, NotAlignedError, StorageError

SEG = 4096
TS = 1_700_000_000_000
REPO = Path(__file__).resolve().parents[2]


def open_log(path: Path, **kwargs: object) -> CommitLog:
    kwargs.setdefault("flush_interval_ms", 600_000)  # no background flush: images stay "crashed early"
    return CommitLog.open(str(path), SEG, clock=lambda: TS, **kwargs)  # type: ignore[arg-type]


def draft(i: int, size: int = 300) -> MessageDraft:
    return MessageDraft("crash-topic", bytes([i % 256]) * size, msg_id=f"M{i:04d}")


def snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def crash_image(log: CommitLog, dst: Path) -> Path:
    """The open log's directory copied as a crash would leave it (DIRTY checkpoint)."""
    shutil.copytree(log.directory, dst)
    checkpoint = decode_checkpoint((dst / "checkpoint").read_bytes())
    assert checkpoint is not None and not checkpoint.clean
    return dst


def cut_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "cut" in r.getMessage()
    ]


@pytest.fixture
def two_segments(tmp_path: Path) -> tuple[Path, list]:
    """A crash image: segment 0 full (ends with a blank marker), segment 1 holding three messages."""
    with open_log(tmp_path / "live") as log:
        results = []
        while not results or results[-1].offset < SEG:
            results.append(log.append(draft(len(results), 300)))
        results += [log.append(draft(len(results) + k, 60)) for k in range(2)]
        image = crash_image(log, tmp_path / "image")
    return image, results


# --- torn tails ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["shortened", "zeroed"])
def test_tail_cut_at_every_byte_of_the_last_message(
    two_segments: tuple[Path, list], tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    image, results = two_segments
    last = results[-1]
    seg_name = segment_name(SEG)
    original = (image / seg_name).read_bytes()
    checkpoint = (image / "checkpoint").read_bytes()
    rel = last.offset - SEG
    for cut in range(rel, rel + last.size):
        work = tmp_path / f"{how}-{cut}"
        work.mkdir()
        (work / segment_name(0)).write_bytes((image / segment_name(0)).read_bytes())
        (work / "checkpoint").write_bytes(checkpoint)
        torn = original[:cut] if how == "shortened" else original[:cut] + bytes(SEG - cut)
        (work / seg_name).write_bytes(torn)
        caplog.clear()
        with open_log(work) as log:
            assert log.max_offset == last.offset, cut
            assert not log.recovery.clean
            warned = cut_warnings(caplog)
            if any(original[rel:cut]):  # something of the torn message was on disk
                assert len(warned) == 1 and seg_name in warned[0] and f"offset {last.offset}" in warned[0]
                assert log.recovery.cut_offset == last.offset
            else:
                assert warned == [] and log.recovery.cut_offset is None
            again = log.append(draft(999, 10))
            assert again.offset == last.offset
        with open_log(work) as log:
            assert log.max_offset == last.offset + again.size and log.recovery.cut_offset is None
            assert log.read(again.offset).msg_id == "M0999"
        shutil.rmtree(work)


def test_torn_blank_marker_cuts_there_and_deletes_later_segments(
    two_segments: tuple[Path, list], caplog: pytest.LogCaptureFixture
) -> None:
    image, results = two_segments
    in_first = [r for r in results if r.offset < SEG]
    blank_at = in_first[-1].offset + in_first[-1].size
    with open(
        image / segment_name(0), "r+b"
    ) as f:  # the page holding the blank marker never reached the disk
        f.seek(blank_at)
        f.write(bytes(8))
    with open_log(image) as log:
        assert log.max_offset == blank_at
        assert not (image / segment_name(SEG)).exists()
        [warned] = cut_warnings(caplog)
        assert segment_name(0) in warned and segment_name(SEG) in warned and f"offset {blank_at}" in warned
        assert log.recovery.deleted_files == (str(image / segment_name(SEG)),)
        assert log.append(draft(1, 10)).offset == SEG  # 48 bytes left: a fresh blank marker, then segment 1
        assert log.is_boundary(blank_at) and len(log.read_raw(blank_at, 1)) == SEG - blank_at


def test_empty_last_segment_file_from_a_crash_during_creation(two_segments: tuple[Path, list]) -> None:
    image, _ = two_segments
    (image / segment_name(SEG)).write_bytes(b"")  # segment 1 created, crash before its preallocation
    with open_log(image) as log:
        assert log.max_offset == SEG and os.path.getsize(image / segment_name(SEG)) == SEG


# --- flipped bytes, garbage, misplaced records ---------------------------------------------------------
def test_flipped_body_byte_is_caught_by_crc_and_recovery_cuts_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_log(tmp_path / "live") as log:
        results = log.append_batch([draft(i, 100) for i in range(12)])
        image = crash_image(log, tmp_path / "image")
    victim = results[7]
    data = bytearray((image / segment_name(0)).read_bytes())
    data[victim.offset + victim.size - 3] ^= 0x40  # inside the body
    (image / segment_name(0)).write_bytes(bytes(data))
    with open_log(image) as log:
        assert log.max_offset == victim.offset
        [warned] = cut_warnings(caplog)
        assert (
            "body CRC mismatch" in warned
            and segment_name(0) in warned
            and f"offset {victim.offset}" in warned
        )
        assert [m.msg_id for m in log.read_messages(0, 100, log.max_offset)[0]] == [
            f"M{i:04d}" for i in range(7)
        ]
        assert (image / segment_name(0)).read_bytes()[victim.offset :] == bytes(SEG - victim.offset)


def test_flipped_topic_byte_is_caught_by_the_record_crc(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 100) for i in range(5)])
    data = bytearray((tmp_path / segment_name(0)).read_bytes())
    data[results[3].offset + 52 + 5 + 2] ^= 0x01  # a byte of the topic (after the 5-byte msgId)
    (tmp_path / segment_name(0)).write_bytes(bytes(data))
    with open_log(tmp_path) as log:  # clean path: the last segment is verified in full
        assert log.recovery.clean and log.max_offset == results[3].offset
        assert "record CRC mismatch" in cut_warnings(caplog)[0]


def test_clean_path_trusts_older_segments_and_reads_still_check_crcs(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 300) for i in range(30)])
    data = bytearray((tmp_path / segment_name(0)).read_bytes())
    data[results[2].offset + results[2].size - 1] ^= 0x01
    (tmp_path / segment_name(0)).write_bytes(bytes(data))
    with open_log(tmp_path) as log:  # by design: after a clean shutdown only the last segment is re-verified
        assert log.recovery.clean and log.max_offset == results[-1].offset + results[-1].size
        with pytest.raises(NotAlignedError, match="body CRC"):
            log.read(results[2].offset)
    (tmp_path / "checkpoint").write_bytes(encode_checkpoint(Checkpoint(False, SEG, 0)))  # as after a crash
    with open_log(tmp_path) as log:
        assert not log.recovery.clean and log.max_offset == results[2].offset


@pytest.mark.parametrize("gap", [0, 1, 500])
def test_garbage_after_the_last_message_is_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, gap: int
) -> None:
    with open_log(tmp_path) as log:
        log.append_batch([draft(i, 100) for i in range(5)])
        end = log.max_offset
    with open(tmp_path / segment_name(0), "r+b") as f:
        f.seek(end + gap)
        f.write(random.Random(gap).randbytes(200) + b"\xff")
    with open_log(tmp_path) as log:
        assert log.max_offset == end
        [warned] = cut_warnings(caplog)
        assert segment_name(0) in warned and f"offset {end}" in warned
        assert log.append(draft(9, 10)).offset == end
    with open_log(tmp_path) as log:  # the garbage is gone for good
        assert log.recovery.cut_offset is None
        assert (tmp_path / segment_name(0)).read_bytes()[log.max_offset :] == bytes(SEG - log.max_offset)


def test_a_record_copied_to_the_wrong_place_is_rejected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_log(tmp_path) as log:
        results = log.append_batch([draft(i, 100) for i in range(5)])
        end = log.max_offset
    data = bytearray((tmp_path / segment_name(0)).read_bytes())
    data[end : end + results[1].size] = data[results[1].offset : results[1].offset + results[1].size]
    (tmp_path / segment_name(0)).write_bytes(bytes(data))
    with open_log(tmp_path) as log:
        assert log.max_offset == end
        assert "physicalOffset" in cut_warnings(caplog)[0]


def test_torn_checkpoint_takes_the_crash_path(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with open_log(tmp_path) as log:
        log.append_batch([draft(i, 300) for i in range(30)])
        end = log.max_offset
    (tmp_path / "checkpoint").write_bytes(b"\x00" * 7)
    with open_log(tmp_path) as log:
        assert (log.recovery.clean, log.recovery.verified_from, log.max_offset) == (False, 0, end)
        assert any("unreadable checkpoint" in r.getMessage() for r in caplog.records)


def test_crash_path_starts_at_the_flushed_offset_segment(tmp_path: Path) -> None:
    with open_log(tmp_path / "live") as log:
        log.append_batch([draft(i, 300) for i in range(15)])
        log.flush()  # checkpoint: everything so far is durable
        flushed = log.flushed_offset
        log.append_batch([draft(i, 300) for i in range(15, 40)])
        image = crash_image(log, tmp_path / "image")
        end = log.max_offset
    assert decode_checkpoint((image / "checkpoint").read_bytes()) == Checkpoint(False, SEG, flushed)
    with open_log(image) as log:
        assert not log.recovery.clean and log.max_offset == end
        assert log.recovery.verified_from == flushed - flushed % SEG
        assert log.recovery.verified_bytes == end - log.recovery.verified_from


def test_truncation_is_not_undone_by_a_crash(tmp_path: Path) -> None:
    with open_log(tmp_path / "live") as log:
        results = log.append_batch([draft(i, 300) for i in range(30)])
        log.flush()
        log.truncate(results[5].offset)
        image = crash_image(log, tmp_path / "image")
    with open_log(image) as log:
        assert log.max_offset == results[5].offset
        assert sorted(set(os.listdir(image)) - {SPARE_NAME}) == [segment_name(0), "checkpoint"]


def test_killed_writer_process_loses_no_acknowledged_message(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from mqha.broker.commitlog import CommitLog, MessageDraft
        log = CommitLog.open({str(tmp_path)!r}, {SEG}, flush_interval_ms=600000)
        i = 0
        while True:
            r = log.append(MessageDraft("t", bytes(150), msg_id=f"K{{i}}"))
            print(r.offset + r.size, flush=True)
            i += 1
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    acked = [int(child.stdout.readline()) for _ in range(300)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    with open_log(tmp_path) as log:
        assert not log.recovery.clean and log.max_offset >= acked[-1]
        messages, _ = log.read_messages(0, 10_000, log.max_offset)
        assert [m.msg_id for m in messages[: len(acked)]] == [f"K{i}" for i in range(len(acked))]


# --- files that are not ours: one clear error, nothing deleted -----------------------------------------
@pytest.fixture
def three_segments(tmp_path: Path) -> Path:
    with open_log(tmp_path / "log") as log:
        log.append_batch([draft(i, 300) for i in range(30)])
    assert len(list((tmp_path / "log").iterdir())) == 5  # and the checkpoint and the spare segment
    return tmp_path / "log"


def refuses(path: Path, error: type[StorageError], culprit: str, match: str, segment_size: int = SEG) -> None:
    before = snapshot(path)
    with pytest.raises(error, match=match) as info:
        CommitLog.open(str(path), segment_size)
    assert info.value.path == str(path / culprit)
    assert str(info.value).startswith(str(path / culprit))
    assert snapshot(path) == before  # nothing deleted, nothing rewritten


def test_foreign_file_is_refused(three_segments: Path) -> None:
    (three_segments / "notes.txt").write_text("hello")
    refuses(three_segments, ForeignFileError, "notes.txt", "not a commit-log segment")


def test_directory_with_a_segment_name_is_refused(three_segments: Path) -> None:
    (three_segments / segment_name(3 * SEG)).mkdir()
    refuses(three_segments, ForeignFileError, segment_name(3 * SEG), "not a commit-log segment")


@pytest.mark.parametrize("name", ["checkpoint", SPARE_NAME])
def test_checkpoint_or_spare_that_is_not_a_file_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / name).mkdir()
    refuses(tmp_path, ForeignFileError, name, name)


def test_wrong_sized_middle_segment_is_refused(three_segments: Path) -> None:
    os.truncate(three_segments / segment_name(SEG), SEG - 1)
    refuses(three_segments, CorruptFileError, segment_name(SEG), "size 4095 bytes, expected 4096")


def test_oversized_last_segment_is_refused(three_segments: Path) -> None:
    os.truncate(three_segments / segment_name(2 * SEG), SEG + 1)
    refuses(three_segments, CorruptFileError, segment_name(2 * SEG), "size 4097")


def test_gap_between_segments_is_refused(three_segments: Path) -> None:
    (three_segments / segment_name(SEG)).unlink()
    refuses(three_segments, CorruptFileError, segment_name(2 * SEG), "gap")


def test_other_segment_size_is_refused(three_segments: Path) -> None:
    refuses(
        three_segments, CorruptFileError, segment_name(SEG), "not a multiple of the segment size", 2 * SEG
    )
    refuses(three_segments, CorruptFileError, segment_name(0), "expected 2048", SEG // 2)
    for name in (segment_name(SEG), segment_name(2 * SEG)):
        (three_segments / name).unlink()
    refuses(three_segments, CorruptFileError, "checkpoint", "written with segment size 4096", 2 * SEG)
