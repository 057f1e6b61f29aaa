"""Epoch file text format (docs/reference-behaviour.md §12.1): exact bytes, CRC, strict decoding."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.epoch.codec import decode_epoch_file, encode_epoch_file, entry_block_crc, same_generation
from mqha.epoch.history import EpochHistory
from mqha.errors import CorruptFileError

PATH = "/store/epochFileCheckpoint"
SEVEN_EIGHT = EpochHistory.from_pairs([(7, 7000), (8, 8000)])
SEVEN_EIGHT_TEXT = "2\n773307083\n7-7000\n8-8000\n"
ONE_TWO_THREE = EpochHistory.from_pairs([(1, 100), (2, 300), (3, 500)])


def test_encode_matches_the_reference_example_spec_12_1() -> None:
    assert encode_epoch_file(SEVEN_EIGHT) == SEVEN_EIGHT_TEXT


def test_encode_second_reference_crc_spec_12_1() -> None:
    assert encode_epoch_file(ONE_TWO_THREE) == "3\n453994644\n1-100\n2-300\n3-500\n"
    assert entry_block_crc("1-100\n2-300\n3-500\n") == 453994644


def test_encode_empty_history_is_written_deviation_17_11() -> None:
    # CRC of an empty block is 0; the reference never writes an empty list, mqha does.
    assert encode_epoch_file(EpochHistory()) == "0\n0\n"
    assert decode_epoch_file("0\n0\n", PATH) == EpochHistory()


def test_encode_ignores_in_memory_end_offsets_spec_12_1() -> None:
    assert encode_epoch_file(SEVEN_EIGHT.with_last_end(9000)) == SEVEN_EIGHT_TEXT


def test_decode_reference_examples_rebuilds_ends_spec_12_1() -> None:
    assert decode_epoch_file(SEVEN_EIGHT_TEXT, PATH) == SEVEN_EIGHT
    assert decode_epoch_file("3\n453994644\n1-100\n2-300\n3-500\n", PATH) == ONE_TWO_THREE


def test_decode_crc_zero_means_do_not_check_spec_12_1() -> None:
    assert decode_epoch_file("2\n0\n7-7000\n8-8000\n", PATH) == SEVEN_EIGHT


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("2\n773307083\n7-7000\n8-8000", "line separator"),  # torn: last newline missing
        ("2\n", "no CRC line"),
        ("\n0\n", "entry count line is not a number"),
        ("two\n0\n", "entry count line is not a number"),
        ("-1\n0\n", "entry count line is not a number"),
        ("1\nabc\n1-1\n", "CRC line is not a number"),
        ("3\n773307083\n7-7000\n8-8000\n", "header says 3 entries but the file has 2"),
        ("1\n773307083\n7-7000\n8-8000\n", "header says 1 entries but the file has 2"),
        ("2\n773307083\n7-7000\n8-8001\n", "CRC mismatch"),
        ("2\n773307084\n7-7000\n8-8000\n", "CRC mismatch"),
        ("1\n0\n7:7000\n", "line 3 is not '<epoch>-<startOffset>'"),
        ("1\n0\n-7-7000\n", "line 3 is not"),
        ("1\n0\n7-\n", "line 3 is not"),
        ("2\n0\n7-7000\n\n", "line 4 is not"),
        ("1\n0\n7-7000 \n", "line 3 is not"),
        ("1\n0\n7-7000\r\n", "line 3 is not"),
        ("2\r\n0\r\n7-7000\r\n8-8000\r\n", "entry count line is not a number"),
        ("1\n0\n" + "9" * 5000 + "-1\n", "line 3 is not"),
        ("1\n0\n2147483648-1\n", "out of range"),
        ("1\n0\n1-9223372036854775807\n", "out of range"),
        ("2\n0\n8-8000\n7-9000\n", "strictly increase"),
        ("2\n0\n7-8000\n8-8000\n", "strictly increase"),
        ("2\n0\n7-7000\n7-8000\n", "strictly increase"),
    ],
)
def test_decode_rejects_with_corrupt_file_error_naming_the_path_spec_12_1(text: str, reason: str) -> None:
    with pytest.raises(CorruptFileError) as info:
        decode_epoch_file(text, PATH)
    assert info.value.path == PATH
    assert str(info.value).startswith(f"{PATH}: ")
    assert reason in str(info.value)


def test_decode_rejects_every_proper_prefix_of_a_file_spec_12_1() -> None:
    # A torn write is always detected: trailing newline, count and CRC together reject every cut.
    for text in (SEVEN_EIGHT_TEXT, "3\n453994644\n1-100\n2-300\n3-500\n", "0\n0\n"):
        for length in range(len(text)):
            with pytest.raises(CorruptFileError):
                decode_epoch_file(text[:length], PATH)


def test_decode_detects_every_single_digit_change_spec_12_1() -> None:
    for index, char in enumerate(SEVEN_EIGHT_TEXT):
        if not char.isdigit():
            continue
        for digit in "0123456789":
            if digit != char:
                changed = SEVEN_EIGHT_TEXT[:index] + digit + SEVEN_EIGHT_TEXT[index + 1 :]
                with pytest.raises(CorruptFileError):
                    decode_epoch_file(changed, PATH)


# -- same_generation (issue 45: a damaged main file and its backup) ------------------------------


@st.composite
def _histories(draw: st.DrawFn) -> EpochHistory:
    n = draw(st.integers(1, 8))
    epochs = sorted(draw(st.sets(st.integers(0, 1000), min_size=n, max_size=n)))
    starts = sorted(draw(st.sets(st.integers(0, 10**12), min_size=n, max_size=n)))
    return EpochHistory.from_pairs(list(zip(epochs, starts, strict=True)))


@settings(max_examples=200, deadline=None)
@given(history=_histories(), position=st.integers(0, 10**6), byte=st.integers(0, 255))
def test_one_damaged_byte_leaves_the_backup_provable(history: EpochHistory, position: int, byte: int) -> None:
    text = encode_epoch_file(history)
    at = position % len(text)
    damaged = text[:at] + chr(byte) + text[at + 1 :]
    assert same_generation(damaged, history)  # the header or the entries are intact
    older = EpochHistory.from_pairs(history.pairs()[:-1])
    if damaged != text and len(history) > 1:
        assert not same_generation(damaged, older)  # the previous generation is never taken for it


def test_a_torn_header_proves_nothing() -> None:
    history = EpochHistory.from_pairs([(1, 0), (2, 1000)])
    text = encode_epoch_file(history)
    assert same_generation(text[: text.index("\n") + 3], history) == ""
    assert same_generation("", history) == ""
