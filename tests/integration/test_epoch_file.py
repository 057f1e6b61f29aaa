"""Epoch file on a real filesystem (docs/reference-behaviour.md §12.1, docs/architecture.md §4): atomic save,
``.bak`` recovery."""

import logging
import os
from pathlib import Path

import pytest

from mqha.epoch.codec import encode_epoch_file
from mqha.epoch.file import EpochFile, EpochStore
from mqha.epoch.history import EpochEntry, EpochHistory
from mqha.errors import CorruptFileError, FencedError, StorageError

OLD = EpochHistory.from_pairs([(1, 0), (2, 1000)])
NEW = EpochHistory.from_pairs([(1, 0), (2, 1000), (3, 2500)])


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def epoch_file(tmp_path: Path) -> EpochFile:
    return EpochFile(str(tmp_path / "epochFileCheckpoint"))


@pytest.fixture
def saved_twice(epoch_file: EpochFile) -> EpochFile:
    """Main file holds NEW, backup holds OLD."""
    epoch_file.save(OLD)
    epoch_file.save(NEW)
    return epoch_file


def read(path: str) -> str:
    return Path(path).read_text()


# -- save and load ----------------------------------------------------------------------------


def test_save_load_round_trip_spec_12_1(epoch_file: EpochFile, tmp_path: Path) -> None:
    epoch_file.save(NEW)
    assert read(epoch_file.path) == encode_epoch_file(NEW)
    assert EpochFile(epoch_file.path).load() == NEW
    assert epoch_file.backup_path == epoch_file.path + ".bak"
    assert sorted(os.listdir(tmp_path)) == ["epochFileCheckpoint"]  # no .bak without a previous file


def test_reference_example_bytes_on_disk_spec_12_1(epoch_file: EpochFile) -> None:
    epoch_file.save(EpochHistory.from_pairs([(7, 7000), (8, 8000)]))
    assert Path(epoch_file.path).read_bytes() == b"2\n773307083\n7-7000\n8-8000\n"


def test_save_copies_the_previous_content_to_bak_spec_12_1(saved_twice: EpochFile, tmp_path: Path) -> None:
    assert read(saved_twice.path) == encode_epoch_file(NEW)
    assert read(saved_twice.backup_path) == encode_epoch_file(OLD)
    # Temp files never outlive a save.
    assert sorted(os.listdir(tmp_path)) == ["epochFileCheckpoint", "epochFileCheckpoint.bak"]


def test_saving_the_same_content_again_keeps_the_older_backup(saved_twice: EpochFile) -> None:
    saved_twice.save(NEW)
    assert read(saved_twice.backup_path) == encode_epoch_file(OLD)


def test_empty_history_is_written_deviation_17_11(saved_twice: EpochFile) -> None:
    saved_twice.save(EpochHistory())
    assert read(saved_twice.path) == "0\n0\n"
    assert read(saved_twice.backup_path) == encode_epoch_file(NEW)
    assert saved_twice.load() == EpochHistory()


def test_neither_file_exists_loads_empty_and_creates_nothing(epoch_file: EpochFile, tmp_path: Path) -> None:
    assert epoch_file.load() == EpochHistory()
    assert os.listdir(tmp_path) == []


def test_save_creates_missing_directories(tmp_path: Path) -> None:
    epoch_file = EpochFile(str(tmp_path / "store" / "root" / "epochFileCheckpoint"))
    epoch_file.save(OLD)
    assert epoch_file.load() == OLD


# -- recovery from a bad main file --------------------------------------------------------------


def test_torn_main_file_at_every_length_falls_back_to_bak_spec_12_1(
    saved_twice: EpochFile, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    full = Path(saved_twice.path).read_bytes()
    for length in range(len(full)):
        Path(saved_twice.path).write_bytes(full[:length])
        before = snapshot(tmp_path)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
            # No cut parses as a valid file: the trailing newline, count and CRC catch every one.
            assert saved_twice.load() == OLD, length
        assert f"epoch file {saved_twice.path} is unusable" in caplog.text
        assert snapshot(tmp_path) == before  # load never rewrites or deletes
    Path(saved_twice.path).write_bytes(full)
    assert saved_twice.load() == NEW


def test_flipped_digit_in_main_is_caught_by_the_crc_spec_12_1(
    saved_twice: EpochFile, caplog: pytest.LogCaptureFixture
) -> None:
    full = read(saved_twice.path)
    for index, char in enumerate(full):
        if not char.isdigit():
            continue
        changed = full[:index] + str((int(char) + 1) % 10) + full[index + 1 :]
        Path(saved_twice.path).write_text(changed)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
            assert saved_twice.load() == OLD, changed
        assert saved_twice.path in caplog.text


def test_entry_digit_flip_reports_crc_mismatch_spec_12_1(
    saved_twice: EpochFile, caplog: pytest.LogCaptureFixture
) -> None:
    Path(saved_twice.path).write_text(read(saved_twice.path).replace("3-2500", "3-2600"))
    with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
        assert saved_twice.load() == OLD
    assert "CRC mismatch" in caplog.text


def test_missing_main_with_good_bak_loads_bak_spec_12_1(
    saved_twice: EpochFile, caplog: pytest.LogCaptureFixture
) -> None:
    os.remove(saved_twice.path)
    with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
        assert saved_twice.load() == OLD
    assert saved_twice.path in caplog.text and "missing" in caplog.text


def test_corrupt_main_without_bak_is_an_error_not_an_empty_history(
    epoch_file: EpochFile, tmp_path: Path
) -> None:
    Path(epoch_file.path).write_text("2\n1\n7-7000\n8-8000\n")
    before = snapshot(tmp_path)
    with pytest.raises(CorruptFileError) as info:
        epoch_file.load()
    assert info.value.path == epoch_file.path
    assert "CRC mismatch" in str(info.value) and "missing" in str(info.value)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("main", "bak"),
    [
        (b"garbage\n", b"2\n0\n7-7000\n"),
        (b"", b"\xff\xfe"),
        (None, b"1\n0\nx\n"),
        (b"\x00" * 10, b""),
    ],
)
def test_both_files_unusable_raises_corrupt_file_error_naming_the_file(
    epoch_file: EpochFile, tmp_path: Path, main: bytes | None, bak: bytes
) -> None:
    if main is not None:
        Path(epoch_file.path).write_bytes(main)
    Path(epoch_file.backup_path).write_bytes(bak)
    before = snapshot(tmp_path)
    with pytest.raises(CorruptFileError) as info:
        epoch_file.load()
    message = str(info.value)
    assert info.value.path == epoch_file.path
    assert message.startswith(epoch_file.path + ": ")
    assert epoch_file.backup_path in message
    assert snapshot(tmp_path) == before  # nothing deleted or rewritten on error


def test_save_over_a_corrupt_main_keeps_the_good_bak(saved_twice: EpochFile) -> None:
    Path(saved_twice.path).write_text("junk")
    saved_twice.save(NEW.append(4, 3000))
    assert read(saved_twice.backup_path) == encode_epoch_file(OLD)
    assert saved_twice.load() == NEW.append(4, 3000)


def test_unreadable_main_is_a_storage_error(epoch_file: EpochFile) -> None:
    os.mkdir(epoch_file.path)  # a directory where the file should be
    with pytest.raises(StorageError) as info:
        epoch_file.load()
    assert info.value.path == epoch_file.path


# -- crash during save ------------------------------------------------------------------------


@pytest.mark.parametrize(("failing_call", "bak"), [(1, OLD), (2, NEW)])
def test_crash_during_save_leaves_a_loadable_previous_history(
    saved_twice: EpochFile,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failing_call: int,
    bak: EpochHistory,
) -> None:
    # Rename 1 puts the copy of the main file in place as .bak, rename 2 the new main file.
    real_replace, calls = os.replace, []

    def replace(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == failing_call:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(StorageError, match="No space left"):
        saved_twice.save(NEW.append(4, 3000))
    monkeypatch.undo()
    assert calls[-1] == (saved_twice.backup_path if failing_call == 1 else saved_twice.path)
    assert saved_twice.load() == NEW
    assert read(saved_twice.backup_path) == encode_epoch_file(bak)
    assert sorted(os.listdir(tmp_path)) == ["epochFileCheckpoint", "epochFileCheckpoint.bak"]


# -- EpochStore ---------------------------------------------------------------------------------


def test_store_saves_every_change_before_returning(tmp_path: Path) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    store = EpochStore(path)
    assert store.last_epoch() == -1
    store.append(1, 0)
    store.append(2, 1000)
    assert EpochFile(path).load() == store.history == OLD
    store.truncate_suffix_by_offset(1000)
    assert EpochFile(path).load().pairs() == [(1, 0)]
    store.append(3, 500)
    store.truncate_suffix_by_epoch(3)
    assert EpochFile(path).load().pairs() == [(1, 0)]
    store.append(4, 800)
    store.truncate_prefix_by_offset(800)
    assert EpochFile(path).load().pairs() == [(4, 800)]
    assert EpochStore(path).history == store.history


def test_store_rejected_append_changes_neither_memory_nor_disk(tmp_path: Path) -> None:
    store = EpochStore(str(tmp_path / "epochFileCheckpoint"))
    store.append(2, 1000)
    before = snapshot(tmp_path)
    with pytest.raises(FencedError):
        store.append(1, 2000)
    assert store.history.pairs() == [(2, 1000)]
    assert snapshot(tmp_path) == before


def test_store_with_last_end_is_memory_only(tmp_path: Path) -> None:
    store = EpochStore(str(tmp_path / "epochFileCheckpoint"))
    store.append(1, 0)
    before = snapshot(tmp_path)
    assert store.with_last_end(700).last() == EpochEntry(1, 0, 700)
    assert store.history.last() == EpochEntry(1, 0, 700)
    assert snapshot(tmp_path) == before
    assert EpochStore(store.file.path).history.last() == EpochEntry(1, 0)


def test_store_truncating_everything_writes_an_empty_file_deviation_17_11(tmp_path: Path) -> None:
    store = EpochStore(str(tmp_path / "epochFileCheckpoint"))
    store.append(1, 0)
    store.truncate_suffix_by_epoch(1)
    assert read(store.file.path) == "0\n0\n"
    assert EpochStore(store.file.path).history == EpochHistory()


def test_store_failed_save_keeps_the_old_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = EpochStore(str(tmp_path / "epochFileCheckpoint"))
    store.append(1, 0)

    def fail(src: str, dst: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(StorageError):
        store.append(2, 100)
    assert store.history.pairs() == [(1, 0)]


def test_store_loads_from_bak_when_main_is_torn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    store = EpochStore(path)
    store.append(1, 0)
    store.append(2, 1000)
    Path(path).write_text("2\n12345")
    with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
        assert EpochStore(path).history.pairs() == [(1, 0)]
    assert path in caplog.text
