"""Topics in the controller (docs/architecture.md §4.5): the decisions of ``mqha.controller.topics``, their
records through ``apply`` (idempotent, never raising), the snapshot and the wire structs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.codes import ResponseCode as C
from mqha.controller.apply import apply, apply_encoded, replay
from mqha.controller.records import (
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    DeleteTopicRecord,
    UpdateTopicRecord,
    decode_record,
    encode_record,
)
from mqha.controller.state import (
    BrokerGroupState,
    ControllerState,
    ReplicaInfo,
    TopicQueues,
    decode_state,
    encode_state,
)
from mqha.controller.topics import (
    handle_delete_topic,
    handle_topic_list,
    handle_topic_route,
    handle_update_topic,
    topic_lock_key,
)
from mqha.errors import RequestError
from mqha.wire.controller_api import (
    DeleteTopicRequest,
    TopicListPayload,
    TopicRoutePayload,
    TopicRouteRequest,
    UpdateTopicPayload,
    UpdateTopicRequest,
)
from mqha.wire.types import is_valid_name


def group(name: str, cluster: str = "c1", master: int | None = 1) -> BrokerGroupState:
    replicas = {1: ReplicaInfo(f"10.0.0.1:{len(name)}1"), 2: ReplicaInfo(f"10.0.0.2:{len(name)}2")}
    sss = frozenset({master}) if master is not None else frozenset()
    epoch = 1 if master is not None else 0
    return BrokerGroupState(cluster, name, replicas, master, epoch, sss, epoch)


STATE = ControllerState(
    groups={"a": group("a"), "b": group("b", master=None), "x": group("x", cluster="c2")}, applied_index=7
)


def update(
    topic: str = "t", cluster: str = "c1", read: int = 8, write: int = 2, perm: int = 6
) -> UpdateTopicRequest:
    return UpdateTopicRequest(
        topic_name=topic, cluster_name=cluster, read_queue_nums=read, write_queue_nums=write, perm=perm
    )


def written(state: ControllerState, result: object) -> ControllerState:
    for record in result.records:  # type: ignore[attr-defined]
        state, outcome = apply(state, record, state.applied_index + 1)
        assert outcome.accepted
    return state


def test_update_topic_writes_the_clusters_sets_and_answers_their_masters() -> None:
    result = handle_update_topic(STATE, update())
    assert result.records == (UpdateTopicRecord("t", ("a", "b"), 8, 2, 6),)
    assert result.reply.code == C.SUCCESS
    payload = result.reply.payload
    assert isinstance(payload, UpdateTopicPayload)
    assert payload.broker_names == ("a", "b")
    assert payload.master_addresses == {"a": "10.0.0.1:11", "b": None}
    state = written(STATE, result)
    assert dict(state.topics["t"].queues) == {"a": TopicQueues(8, 2, 6), "b": TopicQueues(8, 2, 6)}
    # Another cluster's update adds its set and keeps the others.
    state = written(state, handle_update_topic(state, update(cluster="c2", read=4, write=4)))
    assert (
        set(state.topics["t"].queues) == {"a", "b", "x"}
        and state.topics["t"].queues["x"].write_queue_nums == 4
    )


def test_update_topic_of_an_unknown_cluster_is_refused_and_writes_nothing() -> None:
    result = handle_update_topic(STATE, update(cluster="nope"))
    assert not result.records and result.reply.code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert "nope" in result.reply.remark


def test_delete_topic_removes_the_clusters_sets_and_an_absent_topic_is_success() -> None:
    state = written(STATE, handle_update_topic(STATE, update()))
    state = written(state, handle_update_topic(state, update(cluster="c2")))
    result = handle_delete_topic(state, DeleteTopicRequest(topic_name="t", cluster_name="c1"))
    assert result.records == (DeleteTopicRecord("t", ("a", "b")),) and result.reply.code == C.SUCCESS
    state = written(state, result)
    assert set(state.topics["t"].queues) == {"x"}
    state = written(state, handle_delete_topic(state, DeleteTopicRequest(topic_name="t", cluster_name="c2")))
    assert "t" not in state.topics
    again = handle_delete_topic(state, DeleteTopicRequest(topic_name="t", cluster_name="c2"))
    assert not again.records and again.reply.code == C.SUCCESS


def test_delete_topic_also_drops_sets_that_are_no_longer_registered() -> None:
    state = written(STATE, handle_update_topic(STATE, update()))
    state, _ = apply(state, CleanBrokerDataRecord("c1", "b", None, 0, 0), 99)
    result = handle_delete_topic(state, DeleteTopicRequest(topic_name="t", cluster_name="c1"))
    assert result.records == (DeleteTopicRecord("t", ("a", "b")),)


def test_topic_route_lists_registered_sets_with_the_master_as_id_0() -> None:
    state = written(STATE, handle_update_topic(STATE, update()))
    state, _ = apply(state, CleanBrokerDataRecord("c1", "b", None, 0, 0), 99)
    reply = handle_topic_route(state, TopicRouteRequest(topic="t")).reply
    assert reply.code == C.SUCCESS
    route = reply.payload
    assert isinstance(route, TopicRoutePayload)
    assert [(b.broker_name, dict(b.broker_addrs)) for b in route.broker_datas] == [
        ("a", {0: "10.0.0.1:11", 2: "10.0.0.2:12"})
    ]
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        ("a", 8, 2, 6)
    ]
    # The cleaned set registers again: it finds its topic back.
    state, _ = apply(state, ApplyBrokerIdRecord("c1", "b", 1, "h:1", "h:1;1"), 100)
    route = handle_topic_route(state, TopicRouteRequest(topic="t")).reply.payload
    assert [b.broker_name for b in route.broker_datas] == ["a", "b"]  # type: ignore[union-attr]


def test_topic_route_of_an_unknown_topic_is_rocketmqs_topic_not_exist() -> None:
    reply = handle_topic_route(STATE, TopicRouteRequest(topic="nope")).reply
    assert reply.code == C.TOPIC_NOT_EXIST == 17
    assert reply.remark == "No topic route info in name server for the topic: nope"


def test_topic_list_names_every_topic_with_its_queues_and_clusters() -> None:
    state = written(STATE, handle_update_topic(STATE, update("t2")))
    state = written(state, handle_update_topic(state, update("t1", cluster="c2")))
    payload = handle_topic_list(state).reply.payload
    assert isinstance(payload, TopicListPayload)
    assert payload.topic_list == ("t1", "t2")
    assert [q.broker_name for q in payload.topic_queues["t2"]] == ["a", "b"]
    assert payload.clusters == {"a": "c1", "b": "c1", "x": "c2"}
    doc = json.loads(handle_topic_list(state).reply.encode())
    assert doc["topicQueues"]["t1"][0] == {
        "brokerName": "x",
        "readQueueNums": 8,
        "writeQueueNums": 2,
        "perm": 6,
        "topicSysFlag": 0,
    }


def test_topic_locks_never_meet_broker_set_names() -> None:
    assert topic_lock_key("a") == "topic/a" and not is_valid_name(topic_lock_key("a"))


# ------------------------------------------------------------------------------- records and apply

names = st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3).map(tuple)
topic_records = st.one_of(
    st.builds(
        UpdateTopicRecord,
        st.sampled_from(["t", "u"]),
        names,
        st.integers(0, 16),
        st.integers(0, 16),
        st.integers(0, 7),
    ),
    st.builds(DeleteTopicRecord, st.sampled_from(["t", "u"]), names),
)


@given(st.lists(topic_records, max_size=12))
def test_topic_records_apply_idempotently_and_survive_the_snapshot(records: list) -> None:
    state = replay(records, STATE, first_index=8)
    if records:  # the last record applied again (a replay after a lost answer) changes nothing
        again, outcome = apply(state, records[-1], state.applied_index + 1)
        assert outcome.accepted and again.topics == state.topics
    assert all(topic.queues for topic in state.topics.values())  # no empty topic is kept
    assert decode_state(encode_state(state)) == state
    for record in records:
        assert decode_record(encode_record(record)) == record
    assert state.groups == STATE.groups  # topics never touch a broker set


def test_a_topic_record_applied_twice_is_the_same_state() -> None:
    record = UpdateTopicRecord("t", ("a",), 4, 4, 6)
    once, _ = apply(STATE, record, 8)
    twice, _ = apply(once, record, 8)
    assert twice == once
    deleted, _ = apply(once, DeleteTopicRecord("t", ("a",)), 9)
    again, outcome = apply(deleted, DeleteTopicRecord("t", ("a",)), 10)
    assert outcome.accepted and again.topics == deleted.topics == {}


def test_a_newer_topic_record_version_is_refused_without_raising() -> None:
    doc = json.loads(encode_record(UpdateTopicRecord("t", ("a",), 4, 4, 6)))
    doc["version"] = 2
    state, outcome = apply_encoded(STATE, json.dumps(doc).encode(), 8)
    assert outcome.code == C.SYSTEM_ERROR and "newer" in outcome.remark and state.topics == STATE.topics


def test_a_version_2_snapshot_reads_as_no_topics_and_no_topics_is_written_as_version_2() -> None:
    assert json.loads(encode_state(STATE))["version"] == 2 and "topics" not in json.loads(encode_state(STATE))
    state = written(STATE, handle_update_topic(STATE, update()))
    doc = json.loads(encode_state(state))
    assert doc["version"] == 3
    doc["version"] = 2
    del doc["topics"]
    old = decode_state(json.dumps(doc).encode())
    assert old.topics == {} and old.groups == state.groups


# ------------------------------------------------------------------------------------- wire


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"topicName": "a b", "clusterName": "c"}, "topicName"),
        ({"topicName": "t", "clusterName": "c", "writeQueueNums": 1025}, "writeQueueNums"),
        ({"topicName": "t", "clusterName": "c", "readQueueNums": -1}, "readQueueNums"),
        ({"topicName": "t", "clusterName": "c", "perm": 8}, "perm"),
        ({"topicName": "t"}, "clusterName"),
        ({"topicName": "t", "clusterName": "c", "order": True}, "order"),
    ],
)
def test_update_topic_requests_are_strict(obj: dict, field: str) -> None:
    with pytest.raises(RequestError) as caught:
        UpdateTopicRequest.from_json(obj)
    assert caught.value.code == C.CONTROLLER_INVALID_REQUEST and field in caught.value.remark


def test_update_topic_request_defaults_are_rocketmqs() -> None:
    request = UpdateTopicRequest.from_json({"topicName": "t", "clusterName": "c"})
    assert (request.read_queue_nums, request.write_queue_nums, request.perm) == (8, 8, 6)
    assert UpdateTopicRequest.decode(request.encode()) == request
