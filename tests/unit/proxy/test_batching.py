"""The proxy's group-commit policy (mqha.proxy.batching.next_batch, hold_until): an idle group
expecting one send puts at once; one expecting more holds the sends until as many wait or the oldest
has waited long enough; sends arriving while a put is out leave together when it returns, a second put
starts only for a full batch, and a batch never exceeds its message and byte limits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqha.proxy.batching import next_batch


def test_an_idle_group_puts_whatever_waits_at_once() -> None:
    assert next_batch(0, []) == 0
    assert next_batch(0, [1024]) == 1
    assert next_batch(0, [1024] * 5) == 5


def test_a_group_expecting_several_sends_holds_until_they_wait_or_the_oldest_waited_long_enough() -> None:
    assert next_batch(0, [1024] * 3, expected=16, waited_s=0.001, max_hold_s=0.01) == 0
    assert next_batch(0, [1024] * 16, expected=16, waited_s=0.0) == 16
    assert next_batch(0, [1024] * 17, expected=16, waited_s=0.0) == 17  # more than expected came
    assert next_batch(0, [1024] * 3, expected=16, waited_s=0.01, max_hold_s=0.01) == 3
    assert next_batch(0, [1024], expected=1, waited_s=0.0) == 1


def test_a_full_batch_leaves_without_holding() -> None:
    assert next_batch(0, [1] * 65, expected=100, max_messages=64) == 64
    assert next_batch(0, [600, 600], expected=16, max_bytes=1000) == 1


def test_while_a_put_is_out_a_partial_batch_waits_for_it() -> None:
    assert next_batch(1, [1024] * 5, max_messages=64) == 0
    assert next_batch(1, [1024] * 5, expected=5, waited_s=1.0, max_messages=64) == 0


def test_a_full_batch_takes_another_slot_up_to_the_limit() -> None:
    assert next_batch(1, [1] * 65, max_messages=64, max_in_flight=4) == 64
    assert next_batch(1, [600, 600], max_bytes=1000, max_in_flight=4) == 1  # the byte limit held one back
    assert next_batch(4, [1] * 65, max_messages=64, max_in_flight=4) == 0


def test_a_body_over_the_byte_limit_still_leaves_alone() -> None:
    assert next_batch(0, [5000, 10], max_bytes=1000) == 1


@given(
    in_flight=st.integers(0, 6),
    sizes=st.lists(st.integers(0, 3000), max_size=40),
    max_in_flight=st.integers(1, 5),
    max_messages=st.integers(1, 30),
    max_bytes=st.integers(1, 20_000),
    expected=st.integers(1, 70),
)
def test_limits_hold_and_nothing_stalls(
    *, in_flight: int, sizes: list[int], max_in_flight: int, max_messages: int, max_bytes: int, expected: int
) -> None:
    limits = {"max_in_flight": max_in_flight, "max_messages": max_messages, "max_bytes": max_bytes}
    count = next_batch(in_flight, sizes, expected=expected, waited_s=1.0, max_hold_s=0.01, **limits)
    held = next_batch(in_flight, sizes, expected=expected, waited_s=0.0, max_hold_s=0.01, **limits)
    assert held in {0, count}  # holding only ever delays a batch, never changes it
    if held == 0 and count:  # held: a batch short of the expected sends, on an idle group
        assert in_flight == 0 and count == len(sizes) < min(expected, max_messages)
    assert 0 <= count <= min(len(sizes), max_messages)
    assert count <= 1 or sum(sizes[:count]) <= max_bytes
    if in_flight >= max_in_flight:
        assert count == 0
    elif in_flight == 0 and sizes:
        assert count >= 1  # an idle group never holds a send beyond its longest hold a send waiting
    if count:  # a batch is the longest prefix that fits
        assert count == len(sizes) or count == max_messages or sum(sizes[: count + 1]) > max_bytes
