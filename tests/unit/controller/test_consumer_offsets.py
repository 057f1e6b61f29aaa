"""Consumer offsets in the controller (docs/architecture.md §4.5, §13): the merge rule (an offset only
rises), the decisions of ``mqha.controller.consumer_offsets``, the record through ``apply``, deletion
with a topic, snapshot version 4 and the wire's validation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.codes import ResponseCode as C
from mqha.controller.apply import apply, replay
from mqha.controller.consumer_offsets import handle_query_consumer_offset, handle_update_consumer_offset
from mqha.controller.records import (
    ConsumerOffsetEntry,
    DeleteTopicRecord,
    UpdateConsumerOffsetRecord,
    UpdateTopicRecord,
    decode_record,
    encode_record,
)
from mqha.controller.state import ControllerState, decode_state, encode_state
from mqha.errors import RequestError
from mqha.wire.offsets_api import (
    ConsumerOffsetData,
    ConsumerOffsetsPayload,
    QueryConsumerOffsetRequest,
    UpdateConsumerOffsetRequest,
)


def data(group: str, topic: str, broker: str, queue: int, offset: int) -> ConsumerOffsetData:
    return ConsumerOffsetData(
        consumer_group=group, topic=topic, broker_name=broker, queue_id=queue, commit_offset=offset
    )


def update(*entries: ConsumerOffsetData) -> UpdateConsumerOffsetRequest:
    return UpdateConsumerOffsetRequest(offsets=entries)


def written(state: ControllerState, result: object) -> ControllerState:
    for record in result.records:  # type: ignore[attr-defined]
        state, outcome = apply(state, record, state.applied_index + 1)
        assert outcome.accepted
    return state


def test_an_update_writes_the_raised_offsets_and_answers_every_named_queue() -> None:
    state = written(
        ControllerState(),
        handle_update_consumer_offset(ControllerState(), update(data("g", "t", "a", 0, 100))),
    )
    assert state.consumer_offsets == {("g", "t", "a", 0): 100}
    result = handle_update_consumer_offset(
        state, update(data("g", "t", "a", 0, 50), data("g", "t", "a", 1, 7), data("g", "t", "a", 1, 9))
    )
    # Only the raised queue is recorded; the lower offset of queue 0 is not written back.
    assert result.records == (UpdateConsumerOffsetRecord((ConsumerOffsetEntry("g", "t", "a", 1, 9),)),)
    assert result.reply.code == C.SUCCESS
    payload = result.reply.payload
    assert isinstance(payload, ConsumerOffsetsPayload)
    assert payload.offsets == (data("g", "t", "a", 0, 100), data("g", "t", "a", 1, 9))
    state = written(state, result)
    assert state.consumer_offsets == {("g", "t", "a", 0): 100, ("g", "t", "a", 1): 9}


def test_an_update_that_raises_nothing_is_a_read() -> None:
    state = ControllerState(consumer_offsets={("g", "t", "a", 0): 100})
    result = handle_update_consumer_offset(state, update(data("g", "t", "a", 0, 100)))
    assert not result.records
    assert result.reply.payload.offsets == (data("g", "t", "a", 0, 100),)  # type: ignore[union-attr]
    empty = handle_update_consumer_offset(state, update())
    assert not empty.records and empty.reply.payload.offsets == ()  # type: ignore[union-attr]


def test_query_answers_a_groups_offsets_in_one_topic_or_all() -> None:
    state = ControllerState(
        consumer_offsets={("g", "t", "a", 0): 1, ("g", "u", "a", 0): 2, ("h", "t", "a", 0): 3}
    )
    one = handle_query_consumer_offset(state, QueryConsumerOffsetRequest(consumer_group="g", topic="t"))
    assert one.reply.payload.offsets == (data("g", "t", "a", 0, 1),)  # type: ignore[union-attr]
    every = handle_query_consumer_offset(state, QueryConsumerOffsetRequest(consumer_group="g"))
    assert [e.topic for e in every.reply.payload.offsets] == ["t", "u"]  # type: ignore[union-attr]
    none = handle_query_consumer_offset(state, QueryConsumerOffsetRequest(consumer_group="x"))
    assert none.reply.code == C.SUCCESS and none.reply.payload.offsets == ()  # type: ignore[union-attr]


KEYS = st.tuples(st.sampled_from("gh"), st.sampled_from("tu"), st.sampled_from("ab"), st.integers(0, 2))
ENTRIES = st.lists(st.tuples(KEYS, st.integers(0, 1000)), max_size=8)


def _record(entries: list) -> UpdateConsumerOffsetRecord:
    return UpdateConsumerOffsetRecord(tuple(ConsumerOffsetEntry(*key, offset) for key, offset in entries))


@given(st.lists(ENTRIES, max_size=6), st.randoms())
def test_offsets_are_the_maximum_in_any_order_and_replay(batches: list, rnd: object) -> None:
    records = [_record(batch) for batch in batches]
    state = replay(records, ControllerState(), first_index=1)
    expected: dict = {}
    for batch in batches:
        for key, offset in batch:
            expected[key] = max(expected.get(key, -1), offset)
    assert dict(state.consumer_offsets) == expected
    shuffled = list(records)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    again = replay(shuffled + records, ControllerState(), first_index=1)  # reordered, then replayed
    assert again.consumer_offsets == state.consumer_offsets
    assert decode_state(encode_state(state)) == state
    for record in records:
        assert decode_record(encode_record(record)) == record


@given(ENTRIES, ENTRIES)
def test_an_offset_never_moves_back(first: list, second: list) -> None:
    before = replay([_record(first)], ControllerState(), first_index=1)
    after = replay([_record(second)], before, first_index=2)
    for key, offset in before.consumer_offsets.items():
        assert after.consumer_offsets[key] >= offset


def test_deleting_a_topic_from_a_set_removes_its_offsets_there() -> None:
    state = replay(
        [
            UpdateTopicRecord("t", ("a", "b"), 4, 4, 6),
            _record([(("g", "t", "a", 0), 5), (("g", "t", "b", 0), 6), (("g", "u", "a", 0), 7)]),
            DeleteTopicRecord("t", ("a",)),
        ],
        ControllerState(),
        first_index=1,
    )
    assert state.consumer_offsets == {("g", "t", "b", 0): 6, ("g", "u", "a", 0): 7}


def test_snapshot_version_4_only_with_offsets_and_an_older_one_reads_as_none() -> None:
    assert json.loads(encode_state(ControllerState()))["version"] == 2
    state = ControllerState(consumer_offsets={("g", "t", "a", 3): 42})
    doc = json.loads(encode_state(state))
    assert doc["version"] == 4 and "topics" in doc
    assert doc["consumerOffsets"] == [
        {"consumerGroup": "g", "topic": "t", "brokerName": "a", "queueId": 3, "commitOffset": 42}
    ]
    assert decode_state(encode_state(state)) == state
    doc["version"] = 3
    del doc["consumerOffsets"]
    assert decode_state(json.dumps(doc).encode()).consumer_offsets == {}


def test_a_snapshot_with_a_duplicate_offset_is_refused() -> None:
    doc = json.loads(encode_state(ControllerState(consumer_offsets={("g", "t", "a", 3): 42})))
    doc["consumerOffsets"].append(dict(doc["consumerOffsets"][0], commitOffset=1))
    with pytest.raises(Exception, match="duplicate consumer offset"):
        decode_state(json.dumps(doc).encode())


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (
            {"consumerGroup": "g h", "topic": "t", "brokerName": "a", "queueId": 0, "commitOffset": 0},
            "consumerGroup",
        ),
        ({"consumerGroup": "g", "topic": "", "brokerName": "a", "queueId": 0, "commitOffset": 0}, "topic"),
        (
            {"consumerGroup": "g", "topic": "t", "brokerName": "a", "queueId": 1024, "commitOffset": 0},
            "queueId",
        ),
        (
            {"consumerGroup": "g", "topic": "t", "brokerName": "a", "queueId": 0, "commitOffset": -1},
            "commitOffset",
        ),
        (
            {"consumerGroup": "g", "topic": "t", "brokerName": "a", "queueId": 0, "commitOffset": True},
            "commitOffset",
        ),
        ({"consumerGroup": "g", "topic": "t", "brokerName": "a", "queueId": 0}, "commitOffset"),
        (
            {"consumerGroup": "g", "topic": "t", "brokerName": "a", "queueId": 0, "commitOffset": 0, "x": 1},
            "x",
        ),
    ],
)
def test_update_requests_are_strict(entry: dict, field: str) -> None:
    with pytest.raises(RequestError) as caught:
        UpdateConsumerOffsetRequest.from_json({"offsets": [entry]})
    assert caught.value.code == C.CONTROLLER_INVALID_REQUEST and field in caught.value.remark


def test_an_update_request_is_bounded() -> None:
    entry = {"consumerGroup": "g", "topic": "t", "brokerName": "a", "queueId": 0, "commitOffset": 0}
    with pytest.raises(RequestError):
        UpdateConsumerOffsetRequest.from_json({"offsets": [entry] * 4097})
    assert len(UpdateConsumerOffsetRequest.from_json({"offsets": [entry] * 4096}).offsets) == 4096


def test_topic_list_names_the_consumer_groups_of_each_topic() -> None:
    from mqha.controller.state import BrokerGroupState, ReplicaInfo, TopicQueues, TopicState
    from mqha.controller.topics import handle_topic_list

    group = BrokerGroupState("c1", "a", {1: ReplicaInfo("h:1")}, 1, 1, frozenset({1}), 1)
    state = ControllerState(
        groups={"a": group},
        topics={
            "t": TopicState("t", {"a": TopicQueues(4, 4)}),
            "u": TopicState("u", {"a": TopicQueues(1, 1)}),
        },
        consumer_offsets={("g2", "t", "a", 0): 1, ("g1", "t", "a", 1): 2, ("g3", "gone", "a", 0): 3},
    )
    payload = handle_topic_list(state).reply.payload
    assert payload.consumer_groups == {"t": ("g1", "g2")}  # type: ignore[union-attr]
