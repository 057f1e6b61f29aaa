"""The clock-stall core: when a node that verifies signatures must say its own clock is off."""

from __future__ import annotations

import pytest

from mqha.controller.signature_watch import SignatureWatch, clock_alarm, own_clock_off


def test_nothing_seen_is_no_stall() -> None:
    watch = SignatureWatch(stall_ms=1000)
    assert not watch.stalled(10**9) and watch.stalled_for_ms(10**9) == 0 and watch.last_skew_ms is None


def test_clock_refusals_with_none_accepted_for_the_stall_period_are_a_stall() -> None:
    watch = SignatureWatch(stall_ms=1000)
    for now in range(0, 1001, 100):
        watch.on_clock_refused(-3_600_000, now)
        assert watch.stalled(now) is (now >= 1000)
    assert watch.stalled_for_ms(1000) == 1000 and watch.last_skew_ms == -3_600_000


def test_one_accepted_signature_ends_the_stall_and_restarts_the_count() -> None:
    watch = SignatureWatch(stall_ms=1000)
    for now in range(0, 2001, 100):
        watch.on_clock_refused(90_000, now)
    assert watch.stalled(2000)
    watch.on_verified(5)
    assert not watch.stalled(2000) and watch.last_skew_ms == 5 and watch.verified_total == 1
    watch.on_clock_refused(90_000, 2100)
    assert not watch.stalled(2500) and watch.stalled_for_ms(2500) == 400
    assert watch.stalled(3100)


@pytest.mark.parametrize("silence_ms", [1001, 5000])
def test_refusals_that_stopped_end_the_stall(silence_ms: int) -> None:
    """Senders that gave up (or a clock fixed with nobody calling) leave no stall behind."""
    watch = SignatureWatch(stall_ms=1000)
    for now in range(0, 3001, 100):
        watch.on_clock_refused(90_000, now)
    assert watch.stalled(3000)
    assert not watch.stalled(3000 + silence_ms) and watch.stalled_for_ms(3000 + silence_ms) == 0


def test_accepted_signatures_between_refusals_never_stall() -> None:
    """Some brokers skewed, others fine: the node's own clock is not the problem."""
    watch = SignatureWatch(stall_ms=1000)
    for now in range(0, 10_000, 100):
        watch.on_clock_refused(90_000, now)
        if now % 500 == 0:
            watch.on_verified(10)
        assert not watch.stalled(now)


@pytest.mark.parametrize(
    ("offsets", "peers", "off"),
    [
        ((), 0, True),  # alone: the stall decides
        ((), 2, False),  # peers that do not answer: a partition, not a clock
        ((3_600_000, 3_600_000), 2, True),  # both peers an hour ahead of us: ours is behind
        ((-31_000,), 2, True),
        ((29_000, 31_000), 2, True),  # the median (upper of two) decides
        ((0, 1000), 2, False),  # the peers agree with us: a broker's clock, not ours
        ((0, 3_600_000, 1000), 3, False),  # one peer off is that peer's problem
        ((30_000,), 2, False),  # half the window exactly: not off
    ],
)
def test_the_peers_clocks_decide_whether_a_stall_is_ours(
    offsets: tuple[int, ...], peers: int, off: bool
) -> None:
    assert own_clock_off(offsets, 60_000, peers) is off


OFFSETS = [(), (0,), (3_600_000,), (0, 3_600_000), (3_600_000, 3_600_000, 0)]


@pytest.mark.parametrize("peers", [0, 1, 2])
@pytest.mark.parametrize("offsets", OFFSETS)
@pytest.mark.parametrize("verified", [False, True])
@pytest.mark.parametrize("stalled", [False, True])
@pytest.mark.parametrize("alarmed", [False, True])
def test_the_clock_alarm_starts_on_a_confirmed_stall_and_ends_only_when_the_clock_checks_out(
    alarmed: bool, stalled: bool, verified: bool, offsets: tuple[int, ...], peers: int
) -> None:
    window = 60_000
    on = clock_alarm(
        alarmed,
        stalled=stalled,
        verified_since_alarm=verified,
        peer_offsets_ms=offsets,
        window_ms=window,
        peers=peers,
    )
    if not alarmed:
        assert on is (stalled and own_clock_off(offsets, window, peers))
    elif verified:
        assert not on  # a signature verified: this clock is good enough
    elif peers == 0:
        assert on is stalled  # alone: the stall decides
    else:
        agree = bool(offsets) and not own_clock_off(offsets, window, peers)
        assert on is not agree  # only peers that answer and agree end it; the stall's end does not
