"""The retention decision and the disk-state machine (mqha.broker.retention; docs/architecture.md §4.2)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.broker.config import parse_delete_when
from mqha.broker.retention import (
    BATCH_MAX,
    HOUR_MS,
    DiskState,
    RetentionClock,
    RetentionSettings,
    Segment,
    disk_state,
    retention_pass,
)

SIZE = 1024
DEFAULTS = {  # RocketMQ's defaults (mqha/broker/config.py)
    "fileReservedTime": 72,
    "diskMaxUsedSpaceRatio": 75,
    "diskSpaceCleanForciblyRatio": 85,
    "diskSpaceWarningLevelRatio": 90,
    "cleanFileForciblyEnable": True,
    "destroyMapedFileIntervalForcibly": 120_000,
}
HOURS = parse_delete_when("04")
assert HOURS is not None
SETTINGS = RetentionSettings.from_config(DEFAULTS, HOURS)
NOW = 1_000 * HOUR_MS


def segments(ages_h: list[int]) -> list[Segment]:
    """Segments oldest first, the i-th last written ``ages_h[i]`` hours ago."""
    return [Segment(i * SIZE, NOW - age * HOUR_MS) for i, age in enumerate(ages_h)]


def run(
    segs: list[Segment],
    state: DiskState,
    *,
    hour: int = 12,
    reading: int | None = None,
    due=None,
    now=NOW,
    mono=0,
):
    return retention_pass(
        segs,
        now_ms=now,
        mono_ms=mono,
        hour=hour,
        state=state,
        reading_from=reading,
        due_since=due or {},
        settings=SETTINGS,
    )


def test_disk_states_follow_rocketmqs_ratios_with_the_full_hysteresis() -> None:
    assert [disk_state(u, False, SETTINGS) for u in (0.5, 0.76, 0.86, 0.91)] == [
        DiskState.OK,
        DiskState.CLEAN,
        DiskState.CLEAN_FORCIBLY,
        DiskState.FULL,
    ]
    assert disk_state(0.87, True, SETTINGS) is DiskState.FULL  # stays full until under 85 %
    assert disk_state(0.84, True, SETTINGS) is DiskState.CLEAN


def test_expired_segments_go_at_delete_when_or_above_the_max_used_ratio() -> None:
    segs = segments([100, 90, 80, 10, 0])
    assert run(segs, DiskState.OK).delete == ()
    assert run(segs, DiskState.OK, hour=4).delete == (0, SIZE, 2 * SIZE)
    assert run(segs, DiskState.CLEAN).delete == (0, SIZE, 2 * SIZE)
    assert run(segs, DiskState.CLEAN_FORCIBLY).delete == (0, SIZE, 2 * SIZE, 3 * SIZE)  # not the active one


def test_forcible_cleaning_needs_clean_file_forcibly_enable() -> None:
    off = RetentionSettings.from_config({**DEFAULTS, "cleanFileForciblyEnable": False}, HOURS)
    segs = segments([1, 1, 0])
    assert (
        retention_pass(
            segs,
            now_ms=NOW,
            mono_ms=0,
            hour=12,
            state=DiskState.FULL,
            reading_from=None,
            due_since={},
            settings=off,
        ).delete
        == ()
    )


def test_a_segment_being_read_is_kept_until_due_for_the_forcible_destroy_interval() -> None:
    segs = segments([100, 100, 100, 0])
    first = run(segs, DiskState.CLEAN, reading=SIZE + 10, mono=5)  # a reader inside the second segment
    assert first.delete == (0,) and first.due_since == {SIZE: 5}
    # The interval is monotonic: a wall clock step does not end it.
    later = run(
        segs[1:], DiskState.CLEAN, reading=SIZE + 10, due=first.due_since, now=NOW + 10**9, mono=120_004
    )
    assert later.delete == () and later.due_since == {SIZE: 5}
    due = run(segs[1:], DiskState.CLEAN, reading=SIZE + 10, due=later.due_since, mono=120_005)
    assert due.delete == (SIZE, 2 * SIZE)


ages = st.lists(st.integers(0, 200), min_size=0, max_size=40)
states = st.sampled_from(list(DiskState))


@settings(max_examples=300, deadline=None)
@given(ages=ages, state=states, hour=st.integers(0, 23), reading=st.none() | st.integers(0, 41 * SIZE))
def test_a_pass_deletes_a_bounded_prefix_never_the_active_segment(ages, state, hour, reading) -> None:
    segs = segments(ages)
    decision = run(segs, state, hour=hour, reading=reading)
    bases = [s.base_offset for s in segs]
    assert list(decision.delete) == bases[: len(decision.delete)]  # a prefix, oldest first
    assert len(decision.delete) <= BATCH_MAX
    assert not segs or segs[-1].base_offset not in decision.delete  # never the active segment
    if state is DiskState.OK and hour not in HOURS:
        assert decision.delete == ()
    if reading is not None:  # nothing a reader is in (or after) goes before it was due long enough
        assert all(base + SIZE <= reading for base in decision.delete)
    for segment in segs[: len(decision.delete)]:
        expired = segment.written_ms + SETTINGS.reserved_ms <= NOW
        assert expired or state in (DiskState.CLEAN_FORCIBLY, DiskState.FULL)


@settings(max_examples=200, deadline=None)
@given(used=st.floats(0, 1), was_full=st.booleans())
def test_full_only_above_the_warning_ratio_or_while_clearing(used: float, was_full: bool) -> None:
    state = disk_state(used, was_full, SETTINGS)
    if used > SETTINGS.warning:
        assert state is DiskState.FULL
    elif used <= SETTINGS.clean_forcibly:
        assert state is not DiskState.FULL
    else:
        assert (state is DiskState.FULL) == was_full


# -- clock steps (issue 45) ---------------------------------------------------------------------


def test_the_newest_record_time_keeps_a_segment_whose_file_looks_old() -> None:
    old_file = [Segment(0, NOW - 100 * HOUR_MS), Segment(SIZE, NOW)]
    first = run(old_file, DiskState.OK, hour=4)
    assert first.delete == (0,) and first.unread == (0,)  # expired by its mtime: the shell reads its records
    young = [Segment(0, NOW - 100 * HOUR_MS, NOW - 71 * HOUR_MS), Segment(SIZE, NOW)]
    assert run(young, DiskState.OK, hour=4).delete == ()
    expired = [Segment(0, NOW - 100 * HOUR_MS, NOW - 73 * HOUR_MS), Segment(SIZE, NOW)]
    decision = run(expired, DiskState.OK, hour=4)
    assert decision.delete == (0,) and decision.unread == ()
    fresh_file = [
        Segment(0, NOW - HOUR_MS, NOW - 100 * HOUR_MS),
        Segment(SIZE, NOW),
    ]  # records from a skewed master
    assert run(fresh_file, DiskState.OK, hour=4).delete == ()  # the later of the two counts


def test_forcible_cleaning_needs_no_record_times() -> None:
    decision = run(segments([1, 1, 0]), DiskState.FULL)
    assert decision.delete == (0, SIZE) and decision.unread == ()


def test_the_retention_clock_takes_no_forward_step_and_every_backward_one() -> None:
    clock = RetentionClock.start(wall_ms=NOW, mono_ms=0, newest_record_ms=None)
    assert clock == RetentionClock(NOW, 0)
    stepped = clock.advance(wall_ms=NOW + 83 * HOUR_MS, mono_ms=10_000)  # +83 h in 10 s
    assert stepped == RetentionClock(NOW + 10_000, 10_000)
    assert stepped.advance(NOW + 83 * HOUR_MS + 5_000, 15_000).now_ms == NOW + 15_000  # stays behind
    back = stepped.advance(wall_ms=NOW - HOUR_MS, mono_ms=20_000)
    assert back.now_ms == NOW - HOUR_MS  # behind: followed (deletes later, never earlier)
    assert back.advance(NOW - HOUR_MS + 10_000, 30_000).now_ms == NOW - HOUR_MS + 10_000
    # A start is no later than the log's newest record; a record from the future changes nothing.
    assert RetentionClock.start(NOW, 7, NOW - 83 * HOUR_MS) == RetentionClock(NOW - 83 * HOUR_MS, 7)
    assert RetentionClock.start(NOW, 7, NOW + HOUR_MS) == RetentionClock(NOW, 7)


@settings(max_examples=300, deadline=None)
@given(
    readings=st.lists(
        st.tuples(st.integers(0, 10**7), st.integers(-(10**9), 10**9)), min_size=1, max_size=30
    ),  # (monotonic ms elapsed, wall clock step ms) per reading
    newest=st.none() | st.integers(0, 2 * NOW),
)
def test_the_retention_clock_never_runs_ahead_of_the_monotonic_clock_or_the_wall(readings, newest) -> None:
    clock = RetentionClock.start(NOW, 0, newest)
    start, mono, wall = clock.now_ms, 0, NOW
    for elapsed, step in readings:
        mono += elapsed
        wall += elapsed + step
        clock = clock.advance(wall, mono)
        assert clock.now_ms <= wall  # never ahead of the wall clock
        assert clock.now_ms <= start + mono  # never further than the monotonic clock went


@settings(max_examples=300, deadline=None)
@given(ages=ages, step_h=st.integers(0, 10_000), state=states)
def test_a_forward_step_deletes_nothing_the_unstepped_clock_keeps(ages, step_h, state) -> None:
    """The issue's finding: +83 h on a running master deleted fresh segments. With the retention clock,
    what a pass deletes after any forward step is what it deleted without one."""
    segs = segments(ages)
    clock = RetentionClock.start(NOW, 0, newest_record_ms=NOW)
    stepped = clock.advance(NOW + step_h * HOUR_MS + 1_000, 1_000)
    plain = clock.advance(NOW + 1_000, 1_000)
    got = run(segs, state, hour=4, now=stepped.now_ms, mono=stepped.mono_ms)
    assert got == run(segs, state, hour=4, now=plain.now_ms, mono=plain.mono_ms)
