"""Transfer batches never span an epoch boundary (docs/reference-behaviour.md §11.2;
docs/reference-behaviour.md §17 item 12 fixed)."""

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.autoswitch_ha.batching import BatchPlan, fit_to_epoch, plan_batch, plan_batches
from mqha.autoswitch_ha.events import ReadLog, TransferBatch
from mqha.autoswitch_ha.frames import FrameReader
from mqha.autoswitch_ha.master import LogView, MasterConfig, MasterConnection
from mqha.autoswitch_ha.slave import SlaveConnection
from mqha.autoswitch_ha.state import Role
from mqha.epoch.history import EpochEntry, EpochHistory
from mqha.ids import MAX_OFFSET

TWO = EpochHistory.from_pairs([(1, 0), (2, 1000)])


def test_open_last_epoch_reads_a_full_batch() -> None:
    assert plan_batch(TWO, 1500, 32768) == BatchPlan(
        offset=1500, max_bytes=32768, epoch=2, epoch_start_offset=1000, epoch_end_offset=MAX_OFFSET
    )


def test_batch_is_cut_at_the_epoch_end_and_labelled_with_its_own_epoch() -> None:
    # The reference would label these last 100 bytes of epoch 1 with epoch 2 (docs/reference-behaviour.md §17
    # item 12).
    plan = plan_batch(TWO, 900, 32768)
    assert plan == BatchPlan(offset=900, max_bytes=100, epoch=1, epoch_start_offset=0, epoch_end_offset=1000)
    assert plan is not None and plan.room == 100
    assert plan_batch(TWO, 1000, 32768) == BatchPlan(
        offset=1000, max_bytes=32768, epoch=2, epoch_start_offset=1000, epoch_end_offset=MAX_OFFSET
    )


def test_small_batch_size_is_respected_inside_an_epoch() -> None:
    assert plan_batch(TWO, 100, 64) == BatchPlan(
        offset=100, max_bytes=64, epoch=1, epoch_start_offset=0, epoch_end_offset=1000
    )


@pytest.mark.parametrize("offset", [-1, 5])
def test_offset_outside_every_epoch_has_no_plan(offset: int) -> None:
    history = EpochHistory.from_pairs([(3, 10), (4, 20)]).with_last_end(30)
    assert plan_batch(history, offset, 100) is None
    assert plan_batch(history, 30, 100) is None  # past a closed last entry
    assert plan_batch(EpochHistory(), 0, 100) is None


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        plan_batch(TWO, 0, 0)


def test_fit_to_epoch_cuts_data_that_would_cross_into_a_new_epoch() -> None:
    assert fit_to_epoch(TWO, 900, [b"x" * 150]) == (EpochEntry(1, 0, 1000), [b"x" * 100])
    assert fit_to_epoch(TWO, 900, [b"x" * 100]) == (EpochEntry(1, 0, 1000), [b"x" * 100])
    assert fit_to_epoch(TWO, 1000, [b"y" * 5000]) == (EpochEntry(2, 1000), [b"y" * 5000])
    assert fit_to_epoch(EpochHistory(), 0, [b"z"]) is None
    # Several batches of one read: the one crossing the end is cut, the rest waits for the next epoch.
    assert fit_to_epoch(TWO, 900, [b"a" * 60, b"b" * 60, b"c" * 10]) == (
        EpochEntry(1, 0, 1000),
        [b"a" * 60, b"b" * 40],
    )


def test_plan_batches_covers_a_range_across_epochs() -> None:
    history = EpochHistory.from_pairs([(1, 0), (2, 250), (5, 300)])
    plans = plan_batches(history, 0, 520, 100)
    assert [(p.offset, p.max_bytes, p.epoch) for p in plans] == [
        (0, 100, 1),
        (100, 100, 1),
        (200, 50, 1),
        (250, 50, 2),
        (300, 100, 5),
        (400, 100, 5),
        (500, 20, 5),
    ]
    assert plan_batches(history.with_last_end(350), 300, 400, 100)[-1].max_bytes == 50


# -- properties -----------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> EpochHistory:
    pairs, epoch, start = [], draw(st.integers(0, 3)), draw(st.integers(0, 50))
    for _ in range(draw(st.integers(1, 8))):
        pairs.append((epoch, start))
        epoch += draw(st.integers(1, 3))
        start += draw(st.integers(1, 300))
    return EpochHistory.from_pairs(pairs)


@given(histories(), st.integers(1, 400), st.integers(0, 600), st.integers(0, 2000))
def test_plans_never_span_epochs_and_cover_the_range(history, batch_size, skip, length) -> None:
    first = history.entries[0].start_offset
    start, end = first + skip, first + skip + length
    plans = plan_batches(history, start, end, batch_size)
    offset = start
    for plan in plans:
        entry = history.find_by_offset(plan.offset)
        assert plan.offset == offset
        assert 0 < plan.max_bytes <= batch_size
        assert entry is not None and (plan.epoch, plan.epoch_start_offset) == (
            entry.epoch,
            entry.start_offset,
        )
        assert plan.offset + plan.max_bytes <= entry.end_offset  # never crosses into the next epoch
        offset += plan.max_bytes
    assert offset == end


@st.composite
def logs(draw: st.DrawFn) -> tuple[dict[int, bytes], EpochHistory]:
    """A master log of whole messages and an epoch history whose starts are message boundaries."""
    messages, offset, pairs, epoch = {}, 0, [], 1
    for _ in range(draw(st.integers(1, 40))):
        if not pairs or draw(st.integers(0, 4)) == 0:
            pairs.append((epoch, offset))
            epoch += draw(st.integers(1, 2))
        size = draw(st.integers(1, 90))
        messages[offset] = bytes([pairs[-1][0] % 256]) * size
        offset += size
    return messages, EpochHistory.from_pairs(pairs)


def read_whole(messages: dict[int, bytes], offset: int, max_bytes: int) -> bytes:
    """Whole messages from ``offset``: at least one, then more while they fit in ``max_bytes``."""
    starts = sorted(messages)
    index = bisect.bisect_left(starts, offset)
    out = b""
    while index < len(starts) and (not out or len(out) + len(messages[starts[index]]) <= max_bytes):
        out += messages[starts[index]]
        index += 1
    return out


def read_batches(messages: dict[int, bytes], offset: int, batch_bytes: int, max_bytes: int) -> list[bytes]:
    """``CommitLog.read_batches`` over ``messages``: batches of ``read_whole`` until ``max_bytes``."""
    batches: list[bytes] = []
    total = 0
    while total < max_bytes and (batch := read_whole(messages, offset, min(batch_bytes, max_bytes - total))):
        batches.append(batch)
        offset += len(batch)
        total += len(batch)
    return batches


@settings(max_examples=150, deadline=None)
@given(logs(), st.integers(1, 300))
def test_master_machine_labels_every_batch_with_the_epoch_that_wrote_it(log, batch_size) -> None:
    messages, epochs = log
    top = max(messages) + len(messages[max(messages)])
    view = LogView(min_offset=0, max_offset=top, confirm_offset=top, epochs=epochs)
    master = MasterConnection(view, 0, MasterConfig(transfer_batch_size=batch_size))
    slave = SlaveConnection(broker_id=2, epochs=EpochHistory(), max_offset=0)
    slave.connection_made(0)
    master.receive_data(slave.data_to_send(), 0)
    master.receive_data(b"\x00\x00\x00\x02" + bytes(8), 0)  # ACK 0: a new replica
    reader = FrameReader(Role.MASTER)
    batches: list[TransferBatch] = []
    while (event := master.next_event()) is not None:
        if isinstance(event, ReadLog):
            read = read_batches(messages, event.offset, event.batch_bytes, event.max_bytes)
            master.supply_batches(event.offset, read, 0)
        reader.feed(master.data_to_send())
        batches += [f for f in reader.frames() if isinstance(f, TransferBatch)]
    offset = 0
    for batch in batches:
        entry = epochs.find_by_offset(batch.offset)
        assert entry is not None and batch.offset == offset
        assert (batch.epoch, batch.epoch_start_offset) == (entry.epoch, entry.start_offset)
        assert batch.end_offset <= entry.end_offset
        assert batch.offset in messages and (batch.end_offset in messages or batch.end_offset == top)
        assert len(batch.data) <= batch_size or len(batch.data) == len(messages[batch.offset])
        offset = batch.end_offset
    assert offset == top
