"""POP state (mqha.proxy.pop): hand-outs, invisibility, acks, the group's position, receipt handles,
tag filters, moving forward to another proxy's committed offset, and what a commit sends."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqha.proxy.pop import Handle, OffsetCommits, PopQueue, tag_filter


def test_hand_out_ack_and_the_position_moves_over_the_acked_prefix() -> None:
    queue = PopQueue(start=0)
    queue.fetched([10, 20, 30], 31)
    assert queue.due(0, 10) == [10, 20, 30] and queue.committed == 10
    assert [queue.hand_out(o, 0, 1000, f"t{o}") for o in (10, 20, 30)] == [1, 1, 1]
    assert queue.due(500, 10) == []  # invisible
    assert queue.ack(20, "t20") and queue.committed == 10  # 10 still out
    assert queue.ack(10, "t10") and queue.committed == 30
    assert queue.ack(30, "t30") and queue.committed == 31 == queue.fetched_to
    assert not queue.ack(30, "t30")  # once


def test_an_unacknowledged_message_comes_back_with_its_attempt_raised() -> None:
    queue = PopQueue()
    queue.fetched([5], 6)
    queue.hand_out(5, 0, 1000, "a")
    assert queue.due(999, 5) == [] and queue.due(1000, 5) == [5]
    assert queue.hand_out(5, 1000, 1000, "b") == 2 and queue.attempt_of(5) == 2
    assert not queue.ack(5, "a")  # the first hand-out's handle is stale now
    assert queue.ack(5, "b")


def test_change_invisible_gives_a_new_token_and_a_new_deadline() -> None:
    queue = PopQueue()
    queue.fetched([5], 6)
    queue.hand_out(5, 0, 60_000, "a")
    assert queue.change_invisible(5, "a", 100, 0, "b")  # a nack: visible at once
    assert queue.due(100, 5) == [5]
    assert not queue.change_invisible(5, "a", 100, 10, "c") and not queue.ack(5, "a")
    assert queue.ack(5, "b")


def test_skipped_messages_count_as_acknowledged_and_room_is_bounded() -> None:
    queue = PopQueue(max_pending=2)
    queue.fetched([1, 2], 3)
    assert queue.room() == 0
    queue.skip(1)
    queue.skip(2)
    assert queue.committed == 3 and queue.room() == 2
    queue.fetched([], 100)  # nothing more in the queue below 100
    assert queue.committed == 100


@given(st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["ack", "expire", "skip"])), max_size=60))
def test_the_position_never_passes_an_unacknowledged_message(steps: list[tuple[int, str]]) -> None:
    queue = PopQueue()
    offsets = list(range(0, 100, 10))
    queue.fetched(offsets, 100)
    tokens = {o: f"t{o}-1" for o in offsets}
    for o in offsets:
        queue.hand_out(o, 0, 10, tokens[o])
    acked: set[int] = set()
    now = 0
    for index, action in steps:
        offset = offsets[index]
        if action == "ack" and queue.ack(offset, tokens[offset]):
            acked.add(offset)
        elif action == "skip":
            queue.skip(offset)
            acked.add(offset)
        elif action == "expire":
            now += 10
            for o in queue.due(now, 100):
                tokens[o] = f"t{o}-{queue.attempt_of(o) + 1}"
                queue.hand_out(o, now, 10, tokens[o])
        unacked = [o for o in offsets if o not in acked]
        assert queue.committed == (unacked[0] if unacked else 100)


def test_receipt_handles_and_tag_filters() -> None:
    handle = Handle("broker-a", 3, 640, "ab12")
    assert Handle.parse(handle.text()) == handle
    for bad in ("", "a b c", "a x 1 t", "a 1 x t", "a 1 2 "):
        assert Handle.parse(bad) is None
    assert tag_filter("*") is None and tag_filter("") is None
    assert tag_filter("TagA || TagB") == frozenset({"TagA", "TagB"})


def test_a_queue_starts_at_the_committed_offset() -> None:
    queue = PopQueue(start=500)
    assert queue.committed == queue.fetched_to == 500
    queue.fetched([520, 540], 541)
    assert queue.due(0, 10) == [520, 540] and queue.committed == 520


def test_fast_forward_drops_what_is_below_and_keeps_the_rest() -> None:
    queue = PopQueue()
    queue.fetched([10, 20, 30, 40], 41)
    for offset in (10, 20, 30):
        queue.hand_out(offset, 0, 100, f"t{offset}")
    assert not queue.fast_forward(0)  # not ahead: nothing moves
    assert queue.fast_forward(25) and queue.committed == 30
    assert not queue.ack(20, "t20")  # handed out below the group's position: a stale handle now
    assert queue.due(1000, 10) == [30, 40]  # 30 comes back when its time is up, 40 was never out
    assert queue.ack(30, "t30") and queue.committed == 40
    assert queue.fast_forward(100) and queue.committed == queue.fetched_to == 100
    assert queue.due(1000, 10) == []
    queue.fetched([120], 121)  # reading goes on from the new position
    assert queue.committed == 120


@given(st.lists(st.integers(0, 200), min_size=1, max_size=20), st.integers(0, 250))
def test_fast_forward_never_moves_back(offsets: list[int], position: int) -> None:
    queue = PopQueue()
    ordered = sorted(set(offsets))
    queue.fetched(ordered, ordered[-1] + 1)
    before = queue.committed
    queue.fast_forward(position)
    if position > before:  # on to the first message at or after it that the group still needs
        assert queue.committed == min(
            [o for o in ordered if o >= position], default=max(position, ordered[-1] + 1)
        )
    else:
        assert queue.committed == before
    assert all(offset >= queue.committed for offset in queue.due(10**9, 1000))


K1, K2, K3 = ("g", "t", "a", 0), ("g", "t", "a", 1), ("g", "t", "b", 0)


def test_commits_send_raised_positions_and_the_queues_in_use() -> None:
    commits = OffsetCommits(max_entries=10)
    commits.loaded(K1, 100)
    commits.loaded(K2, 0)
    assert commits.due({K1: 100, K2: 0}) == []  # nothing rose, nothing in use
    commits.touched(K2)
    assert commits.due({K1: 150, K2: 0}) == [(K1, 150), (K2, 0)]  # K2: to learn what is stored
    assert commits.due({K1: 150, K2: 0}) == [(K1, 150)]  # not answered yet: sent again
    commits.answered([(K1, 150), (K2, 70)])
    assert commits.stored == {K1: 150, K2: 70}
    assert commits.due({K1: 150, K2: 70}) == []
    commits.answered([(K1, 120)])  # an older answer never lowers what is known stored
    assert commits.stored[K1] == 150


def test_commits_are_bounded_per_request_raised_first() -> None:
    commits = OffsetCommits(max_entries=2)
    commits.touched(K3)
    due = commits.due({K1: 1, K2: 2, K3: 0})
    assert due == [(K1, 1), (K2, 2)]
    commits.answered(due)
    assert commits.due({K1: 1, K2: 2, K3: 0}) == [(K3, 0)]
