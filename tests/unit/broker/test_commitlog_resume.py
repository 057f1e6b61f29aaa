"""Where valid data goes on after a damaged record (``scanning.resume_after``, docs/architecture.md §4.7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.broker.commitlog import scanning
from mqha.broker.commitlog.codec import MessageDraft, encode_blank, encode_message
from mqha.broker.commitlog.scanning import resume_after

SEGMENT = 8192
TS = 1_700_000_000_000


def segment(sizes: list[int]) -> tuple[bytearray, list[int]]:
    """A full segment of messages with these body sizes, closed by a blank marker: (bytes, offsets)."""
    data, offsets = bytearray(), []
    for i, size in enumerate(sizes):
        offsets.append(len(data))
        data += encode_message(MessageDraft("t", bytes([i % 251]) * size), len(data), TS, msg_id=f"m{i}")
    offsets.append(len(data))
    data += encode_blank(SEGMENT - len(data))
    return data + bytes(SEGMENT - len(data)), offsets


@given(
    sizes=st.lists(st.integers(0, 300), min_size=2, max_size=12),
    victim=st.integers(0, 100),
    where=st.integers(0, 400),
    bit=st.integers(0, 7),
)
def test_a_flipped_bit_anywhere_in_a_record_resumes_at_the_next_unit(
    sizes: list[int], victim: int, where: int, bit: int
) -> None:
    data, offsets = segment(sizes)
    index = victim % len(sizes)
    start, end = offsets[index], offsets[index + 1]
    data[start + where % (end - start)] ^= 1 << bit
    assert resume_after(data, start, SEGMENT, 0, SEGMENT) == end


def test_the_last_record_of_a_log_resumes_at_the_log_end() -> None:
    data, offsets = segment([50, 60])
    data[offsets[1] + 60] ^= 1  # the last message's body; the log ends where the blank marker starts
    assert resume_after(data, offsets[1], offsets[2], 0, SEGMENT) == offsets[2]
    data[offsets[1]] ^= 0x40  # its size too: no later message to find
    assert resume_after(data, offsets[1], offsets[2], 0, SEGMENT) == offsets[2]


def test_the_search_goes_window_by_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scanning, "_SEARCH_WINDOW", 37)  # many windows, magics across their edges
    data, offsets = segment([300, 10, 500, 20])
    for victim in range(4):
        damaged = bytearray(data)
        damaged[offsets[victim] + 1] ^= 0x08  # its totalSize: found by the magic search
        assert scanning.resume_after(damaged, offsets[victim], SEGMENT, 0, SEGMENT) == offsets[victim + 1]
