"""The per-(topic, queue) index built from the log (mqha.broker.queue_index, docs/architecture.md §4.4)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.broker.protocol import parse_queue_read_request
from mqha.broker.queue_index import QueueIndex, QueueSpan, QueueStats, queue_id_of
from mqha.broker.queue_stats import parse_queue_stats_request
from mqha.errors import RequestError


@dataclass(frozen=True)
class Stored:
    offset: int
    topic: str
    properties: dict[str, str] = field(default_factory=dict)


def at(offset: int, topic: str, queue: int | None) -> Stored:
    return Stored(offset, topic, {} if queue is None else {"QUEUE_ID": str(queue)})


def test_queue_of_a_record() -> None:
    assert queue_id_of({"QUEUE_ID": "7"}) == 7
    assert queue_id_of({}) == 0  # mqha's own client writes no queue: queue 0
    assert queue_id_of({"QUEUE_ID": "-1"}) == 0 and queue_id_of({"QUEUE_ID": "x"}) == 0
    assert queue_id_of({"QUEUE_ID": "70000"}) == 0


def test_reads_a_queue_from_a_position_in_log_order() -> None:
    index = QueueIndex(start=0)
    index.add([at(0, "a", 1), at(100, "a", 2), at(200, "b", 1), at(300, "a", 1), at(400, "a", None)], 500)
    assert index.indexed_to == 500
    assert index.read("a", 1, 0, 10) == [0, 300]
    assert index.read("a", 1, 1, 10) == [300]  # any position: the first message at or after it
    assert index.read("a", 1, 301, 10) == [] and index.read("a", 0, 0, 10) == [400]
    assert index.read("a", 1, 0, 1) == [0] and index.read("zzz", 1, 0, 5) == []
    assert index.spans("a") == {0: QueueSpan(400, 400, 1), 1: QueueSpan(0, 300, 2), 2: QueueSpan(100, 100, 1)}
    # A later read continues where the last one stopped (a blank marker's jump included).
    index.add([at(1_048_576, "a", 1)], 1_048_700)
    assert index.read("a", 1, 301, 10) == [1_048_576] and index.indexed_to == 1_048_700


def test_out_of_order_input_is_refused_and_reset_forgets() -> None:
    index = QueueIndex(start=100, generation=1)
    with pytest.raises(ValueError, match="below the indexed offset"):
        index.add([at(50, "a", 0)], 150)
    index.add([at(100, "a", 0)], 150)
    with pytest.raises(ValueError, match="below the last message"):
        index.add([], 120)
    index.reset(0, 2)
    assert (index.indexed_to, index.generation, index.read("a", 0, 0, 5)) == (0, 2, [])


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(1, 50)), max_size=80),
    st.integers(0, 2000),
    st.integers(1, 20),
)
def test_against_filtering_the_log(records: list[tuple[str, int, int]], position: int, count: int) -> None:
    log, offset = [], 0
    for topic, queue, size in records:
        log.append(at(offset, topic, queue))
        offset += size
    index = QueueIndex()
    for start in range(0, len(log), 7):  # indexed over several reads, as the broker does
        chunk = log[start : start + 7]
        index.add(chunk, chunk[-1].offset + 1 if start + 7 < len(log) else offset)
    for topic in ("a", "b"):
        for queue in range(4):
            expected = [m.offset for m in log if m.topic == topic and queue_id_of(m.properties) == queue]
            assert index.read(topic, queue, position, count) == [o for o in expected if o >= position][:count]


def test_queue_read_query() -> None:
    read = parse_queue_read_request({"topic": "orders", "queueId": "3", "offset": "640", "maxMessages": "5"})
    assert (read.topic, read.queue_id, read.offset, read.max_messages) == ("orders", 3, 640, 5)
    assert parse_queue_read_request({"topic": "t"}).queue_id == 0
    for bad in ({}, {"topic": "a b"}, {"topic": "t", "queueId": "-1"}, {"topic": "t", "maxMessages": "0"}):
        with pytest.raises(RequestError):
            parse_queue_read_request(bad)


def test_queue_stats_count_messages_and_a_consumers_backlog_below_the_limit() -> None:
    index = QueueIndex(start=0)
    index.add([at(0, "a", 1), at(100, "a", 2), at(200, "b", 1), at(300, "a", 1), at(400, "a", 1)], 500)
    stats = index.queue_stats("a", 500, {1: 300, 5: 0})
    assert stats == [QueueStats(1, 0, 401, 3, 2), QueueStats(2, 100, 101, 1, None)]
    # Below the limit only (a slave's confirm offset): the message at 400 is not counted yet.
    assert index.queue_stats("a", 400, {1: 1}) == [QueueStats(1, 0, 301, 2, 1), QueueStats(2, 100, 101, 1)]
    assert index.queue_stats("a", 500, {1: 10_000})[0].pending == 0  # consumed past the end
    assert index.queue_stats("nothing", 500, {}) == []


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from("ab")), max_size=40), st.integers(0, 4000))
def test_queue_stats_pending_is_what_a_read_from_the_position_returns(
    layout: list[tuple[int, str]], position: int
) -> None:
    index = QueueIndex(start=0)
    index.add([at(i * 100, topic, queue) for i, (queue, topic) in enumerate(layout)], len(layout) * 100)
    limit = index.indexed_to
    for stats in index.queue_stats("a", limit, dict.fromkeys(range(4), position)):
        assert stats.pending == len(index.read("a", stats.queue_id, position, 10_000))
        assert stats.count == len(index.read("a", stats.queue_id, 0, 10_000))


def test_queue_stats_request_parses_consumer_offsets() -> None:
    request = parse_queue_stats_request({"topic": "t", "consumerOffsets": "0:120,3:7"})
    assert request.topic == "t" and request.positions == {0: 120, 3: 7}
    assert parse_queue_stats_request({"topic": "t"}).positions == {}
    for bad in (
        {"topic": "a b"},
        {"topic": "t", "consumerOffsets": "x:1"},
        {"topic": "t", "consumerOffsets": "1"},
    ):
        with pytest.raises(RequestError):
            parse_queue_stats_request(bad)


def test_a_damaged_record_is_flagged_and_passed_over() -> None:
    """docs/architecture.md §4.7: what precedes it is indexed, it is flagged, the index goes on after it."""
    index = QueueIndex(start=0)
    index.add([at(0, "a", 1), at(100, "b", 1)], 200)
    index.pass_damaged(200, 350)
    assert index.damaged == [200] and index.indexed_to == 350
    index.add([at(350, "a", 1)], 450)
    assert index.read("a", 1, 0, 10) == [0, 350]  # the other queues, and this one, go on
    with pytest.raises(ValueError, match="not at the indexed offset"):
        index.pass_damaged(300, 400)  # below what is indexed
    with pytest.raises(ValueError):
        index.pass_damaged(450, 450)  # nowhere to go on
    index.reset(0, 1)  # a repair rebuilds it
    assert index.damaged == [] and index.indexed_to == 0
