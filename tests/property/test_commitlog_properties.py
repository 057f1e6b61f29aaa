"""Commit-log properties (Hypothesis, real files in a temporary directory):

* the same messages, appended singly or in any batching, give byte-identical segment files, and so do
  replicas built from ``read_raw``/``append_raw`` in any chunking (replicas cut files identically);
* ``truncate`` at a boundary followed by new appends equals appending the prefix and the new messages.
"""

import itertools
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.broker.commitlog import CommitLog, MessageDraft

TS = 1_700_000_000_000
SETTINGS = settings(max_examples=40, deadline=None)

segment_sizes = st.sampled_from([512, 1024, 2048])
text = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=8)


@st.composite
def drafts(draw: st.DrawFn) -> MessageDraft:
    return MessageDraft(
        topic=draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=6)),
        body=draw(st.binary(max_size=300)),
        msg_id=draw(st.text(st.characters(codec="ascii"), min_size=1, max_size=32)),
        keys=draw(text),
        properties=draw(st.dictionaries(text.filter(bool), text, max_size=3)),
        born_ts=draw(st.integers(0, 2**62)),
    )


def open_log(path: Path, segment_size: int) -> CommitLog:
    return CommitLog.open(str(path), segment_size, flush_interval_ms=600_000, clock=lambda: TS)


def files(path: Path) -> dict[str, bytes]:
    """Segment files by name. An all-zero file holds no data and stands for no file: truncating a log
    to its first offset keeps that segment (zeroed) so ``min_offset`` survives a restart."""
    found = {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != "checkpoint"}
    return {name: data for name, data in found.items() if any(data)}


def batches(items: list[MessageDraft], cuts: list[int]) -> list[list[MessageDraft]]:
    bounds = sorted({0, len(items), *(c % (len(items) + 1) for c in cuts)})
    return [items[a:b] for a, b in itertools.pairwise(bounds)]


@SETTINGS
@given(
    segment_size=segment_sizes,
    messages=st.lists(drafts(), max_size=40),
    cuts=st.lists(st.integers(0, 100), max_size=6),
    chunk=st.integers(1, 3000),
)
def test_replay_is_byte_identical_whatever_the_batching_or_copying(
    segment_size: int, messages: list[MessageDraft], cuts: list[int], chunk: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with open_log(root / "single", segment_size) as single:
            results = [single.append(m) for m in messages]
        with open_log(root / "batched", segment_size) as batched:
            batched_results = [r for batch in batches(messages, cuts) for r in batched.append_batch(batch)]
            with open_log(root / "replica", segment_size) as replica:
                offset = batched.min_offset
                while offset < batched.max_offset:
                    data = batched.read_raw(offset, chunk)
                    replica.append_raw(offset, data)
                    offset += len(data)
        assert batched_results == results
        assert files(root / "single") == files(root / "batched") == files(root / "replica")
        with open_log(root / "single", segment_size) as reopened:
            read, _ = reopened.read_messages(0, len(messages) + 1, reopened.max_offset)
        assert [(m.msg_id, m.topic, m.keys, m.properties, m.body, m.born_ts) for m in read] == [
            (m.msg_id, m.topic, m.keys, m.properties or {}, m.body, m.born_ts) for m in messages
        ]


@SETTINGS
@given(
    segment_size=segment_sizes,
    old=st.lists(drafts(), max_size=30),
    keep=st.integers(0, 30),
    new=st.lists(drafts(), max_size=15),
)
def test_truncate_then_append_equals_prefix_then_append(
    segment_size: int, old: list[MessageDraft], keep: int, new: list[MessageDraft]
) -> None:
    keep = min(keep, len(old))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with open_log(root / "truncated", segment_size) as log:
            results = log.append_batch(old)
            boundary = results[keep - 1].offset + results[keep - 1].size if keep else log.min_offset
            assert log.is_boundary(boundary)
            log.truncate(boundary)
            assert log.max_offset == boundary
            for message in new:
                log.append(message)
            truncated = log.read_messages(0, 100, log.max_offset)
        with open_log(root / "prefix", segment_size) as log:
            log.append_batch(old[:keep])
            log.append_batch(new)
            prefix = log.read_messages(0, 100, log.max_offset)
        assert truncated == prefix
        assert files(root / "truncated") == files(root / "prefix")
