"""Epoch file on a real filesystem (docs/reference-behaviour.md §12.1, docs/architecture.md §4): atomic save,
``.bak`` recovery."""

import logging
import os
import stat
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
    """Both files hold NEW (a save writes the backup with the main file's content)."""
    epoch_file.save(OLD)
    epoch_file.save(NEW)
    return epoch_file


@pytest.fixture
def legacy(epoch_file: EpochFile) -> EpochFile:
    """As an older mqha (and the reference) left it: main file NEW, backup the previous content OLD."""
    Path(epoch_file.path).write_text(encode_epoch_file(NEW))
    Path(epoch_file.backup_path).write_text(encode_epoch_file(OLD))
    return epoch_file


def read(path: str) -> str:
    return Path(path).read_text()


# -- save and load ----------------------------------------------------------------------------


def test_save_load_round_trip_spec_12_1(epoch_file: EpochFile, tmp_path: Path) -> None:
    epoch_file.save(NEW)
    assert read(epoch_file.path) == encode_epoch_file(NEW)
    assert EpochFile(epoch_file.path).load() == NEW
    assert epoch_file.backup_path == epoch_file.path + ".bak"
    assert sorted(os.listdir(tmp_path)) == ["epochFileCheckpoint", "epochFileCheckpoint.bak"]
    assert read(epoch_file.backup_path) == encode_epoch_file(NEW)


def test_reference_example_bytes_on_disk_spec_12_1(epoch_file: EpochFile) -> None:
    epoch_file.save(EpochHistory.from_pairs([(7, 7000), (8, 8000)]))
    assert Path(epoch_file.path).read_bytes() == b"2\n773307083\n7-7000\n8-8000\n"


def test_save_writes_the_same_content_to_bak_deviation(saved_twice: EpochFile, tmp_path: Path) -> None:
    assert read(saved_twice.path) == encode_epoch_file(NEW)
    assert read(saved_twice.backup_path) == encode_epoch_file(NEW)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in tmp_path.iterdir())
    # Temp files never outlive a save.
    assert sorted(os.listdir(tmp_path)) == ["epochFileCheckpoint", "epochFileCheckpoint.bak"]


def test_saving_the_same_content_again_writes_nothing(saved_twice: EpochFile, tmp_path: Path) -> None:
    before = {p.name: p.stat().st_ino for p in tmp_path.iterdir()}
    saved_twice.save(NEW)
    assert {p.name: p.stat().st_ino for p in tmp_path.iterdir()} == before


def test_a_save_over_a_legacy_store_makes_the_backup_the_same_generation(legacy: EpochFile) -> None:
    legacy.save(NEW)
    assert read(legacy.backup_path) == read(legacy.path) == encode_epoch_file(NEW)


def test_empty_history_is_written_deviation_17_11(saved_twice: EpochFile) -> None:
    saved_twice.save(EpochHistory())
    assert read(saved_twice.path) == read(saved_twice.backup_path) == "0\n0\n"
    assert saved_twice.load() == EpochHistory()


def test_neither_file_exists_loads_empty_and_creates_nothing(epoch_file: EpochFile, tmp_path: Path) -> None:
    assert epoch_file.load() == EpochHistory()
    assert os.listdir(tmp_path) == []


def test_save_creates_missing_directories(tmp_path: Path) -> None:
    epoch_file = EpochFile(str(tmp_path / "store" / "root" / "epochFileCheckpoint"))
    epoch_file.save(OLD)
    assert epoch_file.load() == OLD


# -- recovery from a bad main file --------------------------------------------------------------


def test_torn_main_file_at_every_length_falls_back_to_bak_only_with_its_header(
    saved_twice: EpochFile, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    full = Path(saved_twice.path).read_bytes()
    header = len(b"".join(full.split(b"\n")[:2])) + 2  # the count and CRC lines with their separators
    for length in range(len(full)):
        Path(saved_twice.path).write_bytes(full[:length])
        before = snapshot(tmp_path)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
            # No cut parses as a valid file: the trailing newline, count and CRC catch every one.
            if length >= header:  # the header proves the backup the same generation
                assert saved_twice.load() == NEW, length
                assert f"epoch file {saved_twice.path} is unusable" in caplog.text
            else:
                with pytest.raises(CorruptFileError, match="not provably the same generation"):
                    saved_twice.load()
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
            assert saved_twice.load() == NEW, changed  # the header or the entries prove the backup
        assert saved_twice.path in caplog.text and "the same generation" in caplog.text


def test_entry_digit_flip_reports_crc_mismatch_spec_12_1(
    saved_twice: EpochFile, caplog: pytest.LogCaptureFixture
) -> None:
    Path(saved_twice.path).write_text(read(saved_twice.path).replace("3-2500", "3-2600"))
    with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
        assert saved_twice.load() == NEW
    assert "CRC mismatch" in caplog.text and "count and CRC lines match" in caplog.text


def test_a_backup_of_another_generation_is_refused_issue_45(legacy: EpochFile, tmp_path: Path) -> None:
    """The older generation would label the newest epoch's bytes as the one before: a master would cut
    them as a divergent tail. One error naming the file and the way out; nothing changed."""
    Path(legacy.path).write_text(read(legacy.path).replace("3-2500", "3-2600"))
    before = snapshot(tmp_path)
    with pytest.raises(CorruptFileError) as info:
        legacy.load()
    assert info.value.path == legacy.path
    assert "not provably the same generation" in str(info.value) and "re-syncs from its master" in str(
        info.value
    )
    assert snapshot(tmp_path) == before


def test_missing_main_with_good_bak_is_refused(saved_twice: EpochFile) -> None:
    # A save never leaves a backup without its main file: someone removed it; nothing proves the backup.
    os.remove(saved_twice.path)
    with pytest.raises(CorruptFileError, match=r"missing.*not provably the same generation"):
        saved_twice.load()


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


def test_save_over_a_corrupt_main_writes_the_main_file_first(
    saved_twice: EpochFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    Path(saved_twice.path).write_text("junk")
    targets: list[str] = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (targets.append(dst), real_replace(src, dst)))
    saved_twice.save(NEW.append(4, 3000))
    assert targets == [saved_twice.path, saved_twice.backup_path]
    assert read(saved_twice.backup_path) == encode_epoch_file(NEW.append(4, 3000))
    assert saved_twice.load() == NEW.append(4, 3000)


def test_unreadable_main_is_a_storage_error(epoch_file: EpochFile) -> None:
    os.mkdir(epoch_file.path)  # a directory where the file should be
    with pytest.raises(StorageError) as info:
        epoch_file.load()
    assert info.value.path == epoch_file.path


# -- crash during save ------------------------------------------------------------------------


@pytest.mark.parametrize(("failing_call", "bak"), [(1, NEW), (2, NEW.append(4, 3000))])
def test_crash_during_save_leaves_a_loadable_previous_history(
    saved_twice: EpochFile,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failing_call: int,
    bak: EpochHistory,
) -> None:
    # Rename 1 puts the new content in place as .bak, rename 2 as the main file.
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
    text = Path(path).read_text()
    Path(path).write_text(text[: text.index("2-1000")])  # torn after the header
    with caplog.at_level(logging.WARNING, logger="mqha.epoch.file"):
        assert EpochStore(path).history.pairs() == [(1, 0), (2, 1000)]
    assert path in caplog.text
