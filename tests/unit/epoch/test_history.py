"""Epoch history core (docs/reference-behaviour.md §12.2) and the truncation point of the HA handshake
(docs/reference-behaviour.md §13)."""

from dataclasses import dataclass

import pytest

from mqha.epoch.history import EpochEntry, EpochHistory, find_consistent_point, reader_divergence
from mqha.errors import FencedError, LocalProtocolError
from mqha.ids import MAX_OFFSET

MAX = MAX_OFFSET
EMPTY = EpochHistory()
THREE = EpochHistory.from_pairs([(1, 100), (2, 300), (3, 500)])


def history(*pairs: tuple[int, int], last_end: int | None = None) -> EpochHistory:
    built = EpochHistory.from_pairs(pairs)
    return built if last_end is None else built.with_last_end(last_end)


# -- construction and queries --------------------------------------------------------------


def test_from_pairs_rebuilds_end_offsets_from_neighbours_spec_12_2() -> None:
    assert THREE.entries == (
        EpochEntry(1, 100, 300),
        EpochEntry(2, 300, 500),
        EpochEntry(3, 500, MAX),
    )
    assert THREE.pairs() == [(1, 100), (2, 300), (3, 500)]
    assert EpochHistory.from_pairs([]) == EMPTY


@pytest.mark.parametrize(
    "pairs",
    [
        [(2, 100), (1, 200)],  # epoch goes back
        [(1, 100), (1, 200)],  # epoch repeats
        [(1, 200), (2, 100)],  # start goes back
        [(1, 100), (2, 100)],  # start repeats
        [(-1, 0)],
        [(1, -5)],
    ],
)
def test_from_pairs_rejects_entries_that_do_not_strictly_increase_spec_12_2(
    pairs: list[tuple[int, int]],
) -> None:
    with pytest.raises(ValueError):
        EpochHistory.from_pairs(pairs)


@pytest.mark.parametrize(
    "entries",
    [
        (EpochEntry(1, 100, 250), EpochEntry(2, 300)),  # gap between entries
        (EpochEntry(1, 100, 400), EpochEntry(2, 300)),  # overlap
        (EpochEntry(1, 100, 50),),  # ends before it starts
        (EpochEntry(2, 100, 300), EpochEntry(1, 300)),  # unsorted
    ],
)
def test_constructor_rejects_inconsistent_entries(entries: tuple[EpochEntry, ...]) -> None:
    with pytest.raises(ValueError):
        EpochHistory(entries)


def test_first_last_and_last_epoch_spec_1_3() -> None:
    assert THREE.first() == EpochEntry(1, 100, 300)
    assert THREE.last() == EpochEntry(3, 500, MAX)
    assert THREE.last_epoch() == 3
    assert EMPTY.first() is None
    assert EMPTY.last() is None
    assert EMPTY.last_epoch() == -1


def test_find_by_epoch_spec_12_2() -> None:
    assert THREE.find_by_epoch(2) == EpochEntry(2, 300, 500)
    assert THREE.find_by_epoch(0) is None
    assert THREE.find_by_epoch(4) is None
    assert history((1, 0), (3, 100)).find_by_epoch(2) is None
    assert EMPTY.find_by_epoch(1) is None


@pytest.mark.parametrize(
    ("offset", "epoch"),
    [
        (-1, None),
        (0, None),
        (99, None),  # below the first start
        (100, 1),  # a start belongs to its entry
        (299, 1),
        (300, 2),  # an end belongs to the next entry
        (499, 2),
        (500, 3),
        (MAX - 1, 3),  # the open last entry
        (MAX, None),
    ],
)
def test_find_by_offset_is_start_inclusive_end_exclusive_spec_12_2(offset: int, epoch: int | None) -> None:
    found = THREE.find_by_offset(offset)
    assert (found.epoch if found else None) == epoch


def test_find_by_offset_stops_at_a_closed_last_end_spec_12_2() -> None:
    closed = THREE.with_last_end(700)
    assert closed.find_by_offset(699) == EpochEntry(3, 500, 700)
    assert closed.find_by_offset(700) is None
    assert EMPTY.find_by_offset(0) is None


def test_zero_length_closed_last_entry_holds_no_offset() -> None:
    assert THREE.with_last_end(500).find_by_offset(500) is None


@pytest.mark.parametrize(("epoch", "expected"), [(0, 1), (1, 2), (2, 3), (3, None), (9, None)])
def test_next_entry_is_the_first_with_a_greater_epoch_spec_12_2(epoch: int, expected: int | None) -> None:
    found = THREE.next_entry(epoch)
    assert (found.epoch if found else None) == expected
    assert history((1, 0), (5, 100)).next_entry(3) == EpochEntry(5, 100, MAX)


# -- append (docs/reference-behaviour.md §12.2, docs/architecture.md §7)
# --------------------------------------------------


def test_append_to_empty_is_accepted_spec_12_2() -> None:
    assert EMPTY.append(4, 1000).entries == (EpochEntry(4, 1000, MAX),)


def test_append_newer_epoch_at_later_start_closes_the_previous_entry_spec_12_2() -> None:
    assert THREE.append(4, 800).entries == (
        EpochEntry(1, 100, 300),
        EpochEntry(2, 300, 500),
        EpochEntry(3, 500, 800),
        EpochEntry(4, 800, MAX),
    )


def test_append_overrides_an_end_set_in_memory_spec_12_2() -> None:
    assert THREE.with_last_end(650).append(5, 700).entries[-2:] == (
        EpochEntry(3, 500, 700),
        EpochEntry(5, 700, MAX),
    )


def test_append_at_the_same_start_replaces_the_zero_length_entry_deviation_17_10() -> None:
    # The reference silently rejects the new epoch; mqha replaces the entry that never wrote a byte.
    replaced = THREE.append(4, 500)
    assert replaced.entries == (
        EpochEntry(1, 100, 300),
        EpochEntry(2, 300, 500),
        EpochEntry(4, 500, MAX),
    )
    assert EMPTY.append(1, 0).append(2, 0).entries == (EpochEntry(2, 0, MAX),)


def test_append_same_epoch_and_start_is_idempotent_spec_12_2() -> None:
    assert THREE.append(3, 500) is THREE
    closed = THREE.with_last_end(900)
    assert closed.append(3, 500) is closed


@pytest.mark.parametrize(
    ("epoch", "start"),
    [
        (2, 900),  # older epoch, later start
        (2, 300),  # older epoch, its own start
        (0, 0),
        (3, 600),  # same epoch, another start
        (3, 400),
    ],
)
def test_append_stale_epoch_is_fenced_spec_12_2(epoch: int, start: int) -> None:
    with pytest.raises(FencedError) as info:
        THREE.append(epoch, start)
    message = str(info.value)
    assert f"({epoch}, {start})" in message
    assert "epoch 3" in message and "offset 500" in message


def test_append_newer_epoch_with_backward_start_is_a_local_error_spec_12_2() -> None:
    with pytest.raises(LocalProtocolError) as info:
        THREE.append(4, 499)
    message = str(info.value)
    assert "epoch 4" in message and "offset 499" in message
    assert "epoch 3" in message and "offset 500" in message


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (1, -1)])
def test_append_negative_values_is_a_local_error(epoch: int, start: int) -> None:
    with pytest.raises(LocalProtocolError):
        EMPTY.append(epoch, start)


def test_append_leaves_the_original_unchanged() -> None:
    THREE.append(4, 800)
    assert THREE.pairs() == [(1, 100), (2, 300), (3, 500)]


# -- with_last_end (setLastEpochEntryEndOffset) ---------------------------------------------


def test_with_last_end_closes_the_last_entry_when_not_before_its_start_spec_12_2() -> None:
    assert THREE.with_last_end(700).last() == EpochEntry(3, 500, 700)
    assert THREE.with_last_end(500).last() == EpochEntry(3, 500, 500)
    assert THREE.with_last_end(700).entries[:2] == THREE.entries[:2]


def test_with_last_end_before_the_start_changes_nothing_spec_12_2() -> None:
    assert THREE.with_last_end(499) is THREE
    assert EMPTY.with_last_end(10) is EMPTY


# -- truncation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epoch", "pairs"),
    [
        (3, [(1, 100), (2, 300)]),
        (2, [(1, 100)]),
        (1, []),
        (0, []),
        (4, [(1, 100), (2, 300), (3, 500)]),
    ],
)
def test_truncate_suffix_by_epoch_drops_epochs_at_or_above_spec_12_2(
    epoch: int, pairs: list[tuple[int, int]]
) -> None:
    cut = THREE.truncate_suffix_by_epoch(epoch)
    assert cut.pairs() == pairs
    assert cut.last() is None or cut.last().end_offset == MAX


def test_truncate_suffix_by_epoch_between_epochs_spec_12_2() -> None:
    assert history((1, 0), (3, 100), (5, 200)).truncate_suffix_by_epoch(4).pairs() == [(1, 0), (3, 100)]


@pytest.mark.parametrize(
    ("offset", "pairs"),
    [
        (500, [(1, 100), (2, 300)]),  # a start is cut
        (501, [(1, 100), (2, 300), (3, 500)]),
        (400, [(1, 100), (2, 300)]),
        (300, [(1, 100)]),
        (101, [(1, 100)]),
        (100, []),
        (0, []),
    ],
)
def test_truncate_suffix_by_offset_drops_entries_starting_at_or_after_spec_12_2(
    offset: int, pairs: list[tuple[int, int]]
) -> None:
    cut = THREE.truncate_suffix_by_offset(offset)
    assert cut.pairs() == pairs
    assert cut.last() is None or cut.last().end_offset == MAX


def test_truncation_reopens_the_new_last_entry_spec_12_2() -> None:
    closed = THREE.with_last_end(700)
    assert closed.truncate_suffix_by_offset(600).last() == EpochEntry(3, 500, MAX)
    assert closed.truncate_suffix_by_epoch(9).last() == EpochEntry(3, 500, MAX)
    assert THREE.truncate_suffix_by_offset(600) is THREE


@pytest.mark.parametrize(
    ("offset", "pairs"),
    [
        (299, [(1, 100), (2, 300), (3, 500)]),
        (300, [(2, 300), (3, 500)]),  # end == offset is removed
        (499, [(2, 300), (3, 500)]),
        (500, [(3, 500)]),
        (MAX, [(3, 500)]),  # the open last entry is never removed
        (-1, [(1, 100), (2, 300), (3, 500)]),
    ],
)
def test_truncate_prefix_by_offset_drops_entries_ending_at_or_before_spec_12_2(
    offset: int, pairs: list[tuple[int, int]]
) -> None:
    cut = THREE.truncate_prefix_by_offset(offset)
    assert cut.pairs() == pairs
    # Surviving entries keep their offsets: the first start is not moved up to the cut.
    assert cut.entries == THREE.entries[len(THREE) - len(pairs) :]


def test_truncate_prefix_keeps_a_closed_last_entry_spec_12_2() -> None:
    closed = THREE.with_last_end(600)
    assert closed.truncate_prefix_by_offset(650).entries == (EpochEntry(3, 500, 600),)
    assert EMPTY.truncate_prefix_by_offset(10) == EMPTY


# -- find_consistent_point (docs/reference-behaviour.md §12.2, §13)
# -------------------------------------------------


@dataclass(frozen=True)
class Handshake:
    master: list[tuple[int, int]]
    master_max: int
    slave: list[tuple[int, int]]
    slave_max: int
    point: int | None
    slave_after: list[tuple[int, int]] | None = None


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            Handshake([(1, 0), (2, 1000), (3, 2000)], 2500, [(1, 0), (2, 1000)], 1800,
                      1800, [(1, 0), (2, 1000)]),
            id="A-epoch2-nothing-cut",
        ),
        pytest.param(
            Handshake([(1, 0), (2, 1000), (3, 1200)], 2000, [(1, 0), (2, 1000)], 1500,
                      1200, [(1, 0), (2, 1000)]),
            id="B-epoch2-cut-unreplicated-tail",
        ),
        pytest.param(
            Handshake([(1, 0), (2, 400), (4, 700)], 900, [(1, 0), (3, 500)], 800,
                      400, [(1, 0)]),
            id="C-epoch1-drop-epoch3",
        ),
        pytest.param(
            Handshake([(1, 200), (2, 500)], 900, [(1, 100), (2, 300), (3, 500)], 800,
                      None),
            id="D-no-equal-start",
        ),
        pytest.param(
            Handshake([(1, 0), (3, 1000)], 1500, [(1, 0), (2, 1000)], 1000,
                      1000, [(1, 0)]),
            id="E-epoch1-drop-epoch2",
        ),
    ],
)  # fmt: skip
def test_consistent_point_worked_examples_spec_13(case: Handshake) -> None:
    # Step 2: the last entries end at the replicas' max offsets; the slave's history is "local".
    local = history(*case.slave, last_end=case.slave_max)
    remote = history(*case.master, last_end=case.master_max)
    point = find_consistent_point(local, remote)
    assert point == case.point
    if case.slave_after is not None:
        assert point is not None
        # Step 5: drop local entries starting at or after the point.
        assert local.truncate_suffix_by_offset(point).pairs() == case.slave_after


def test_consistent_point_epoch_file_cache_test_figures_spec_13() -> None:
    local = history((1, 100), (2, 300), (3, 500))
    # Same epoch 3 with another start: epoch 2 matches and the remote's epoch 2 ends first.
    assert find_consistent_point(local, history((1, 100), (2, 300), (3, 450))) == 450
    # Same starts, ends 700 vs 600.
    assert (
        find_consistent_point(
            history((1, 100), (2, 300), (3, 500), last_end=700),
            history((1, 100), (2, 300), (3, 500), last_end=600),
        )
        == 600
    )
    # Evaluated from the four-entry side: epoch 4 is unknown remotely, epoch 3 gives min(800, 700).
    assert (
        find_consistent_point(
            history((1, 100), (2, 300), (3, 500), (4, 800)),
            history((1, 100), (2, 300), (3, 500), last_end=700),
        )
        == 700
    )


def test_consistent_point_with_an_empty_side_is_none_spec_12_2() -> None:
    assert find_consistent_point(EMPTY, THREE) is None
    assert find_consistent_point(THREE, EMPTY) is None


def test_consistent_point_skips_a_same_epoch_with_another_start_spec_12_2() -> None:
    # Walks down past epoch 3 (different start) and epoch 2 (absent remotely) to epoch 1.
    local = history((1, 0), (2, 100), (3, 200), last_end=300)
    remote = history((1, 0), (3, 150), last_end=400)
    assert find_consistent_point(local, remote) == 100


def test_a_reader_past_the_end_of_its_epoch_here_rewinds_to_that_end() -> None:
    # Epoch 1 wrote [0, 100), epoch 3 [100, ...): the log was cut back to 100 when epoch 3 began.
    history = EpochHistory.from_pairs([(1, 0), (3, 100)])
    assert reader_divergence(history, 1, 150) == 100  # read up to 150 in epoch 1 elsewhere: gone here
    assert reader_divergence(history, 2, 150) == 100  # epoch 2 never wrote here: epoch 1's end counts
    assert reader_divergence(history, 1, 100) is None  # at the end: on this lineage
    assert reader_divergence(history, 1, 40) is None
    assert reader_divergence(history, 3, 5_000) is None  # the last epoch never ends
    assert reader_divergence(history, 7, 5_000) is None
    assert reader_divergence(history, 0, 50) == 0  # nothing of epoch 0 is here: from the first start
    cut_to_zero = EpochHistory.from_pairs([(2, 0)])  # epoch 1 lost every byte: replaced at offset 0
    assert reader_divergence(cut_to_zero, 1, 1930) == 0
    kept_by_retention = EpochHistory.from_pairs([(4, 5_000)])  # the front is gone: below it is too small
    assert reader_divergence(kept_by_retention, 3, 4_000) is None
    assert reader_divergence(EpochHistory(), 1, 10) is None
