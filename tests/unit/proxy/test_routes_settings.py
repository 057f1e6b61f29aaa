"""QueryRoute answers, the queue a send goes to, and the Settings a Telemetry stream answers
(mqha.proxy.routes, mqha.proxy.settings): the fields the official clients cannot do without."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.proxy.routes import GroupQueues, QueueChooser, query_route, topic_layout
from mqha.proxy.settings import CONSUMER_MAX_ATTEMPTS, LONG_POLLING_TIMEOUT_S, settings_reply
from mqha.proxy.v2 import definition as d
from mqha.wire.controller_api import TopicQueueData


def auto(groups: list[str], queues: int) -> tuple[GroupQueues, ...]:
    """Every group with ``queues`` queues: an auto-created topic."""
    layout = topic_layout("t", groups, {}, auto_create=True, default_queue_nums=queues)
    assert layout is not None
    return layout


def endpoints(*hosts: str) -> d.Endpoints:
    out = d.Endpoints(scheme=d.AddressScheme.IPv4)
    for host in hosts:
        out.addresses.add(host=host, port=8081)
    return out


def test_a_route_names_the_proxy_the_client_asked_never_a_broker() -> None:
    topic = d.Resource(name="TopicTest")
    answer = query_route(topic, endpoints("10.0.0.1"), auto(["broker-b", "broker-a"], 4))
    assert answer.status.code == d.Code.OK
    queues = answer.message_queues
    assert [(q.broker.name, q.id) for q in queues] == [("broker-a", i) for i in range(4)] + [
        ("broker-b", i) for i in range(4)
    ]
    for queue in queues:
        # id 0: the clients keep master queues only; NORMAL: Python and Java refuse a send otherwise.
        assert queue.broker.id == 0 and queue.permission == d.Permission.READ_WRITE
        assert list(queue.accept_message_types) == [d.MessageType.NORMAL]
        assert queue.broker.endpoints == endpoints("10.0.0.1") and queue.topic.name == "TopicTest"


def test_route_refusals() -> None:
    one = auto(["g"], 1)
    assert query_route(d.Resource(name="a b"), endpoints("h"), one).status.code == d.Code.ILLEGAL_TOPIC
    assert query_route(d.Resource(name="t"), endpoints(), one).status.code == d.Code.ILLEGAL_ACCESS_POINT
    missing = query_route(d.Resource(name="t"), endpoints("h"), auto([], 1))
    assert missing.status.code == d.Code.TOPIC_NOT_FOUND and not missing.message_queues
    unknown = query_route(d.Resource(name="t"), endpoints("h"), None)
    assert unknown.status.code == d.Code.TOPIC_NOT_FOUND
    assert unknown.status.message == "topic[t] not exist, apply first please!"


def data(group: str, read: int, write: int, perm: int = 6) -> TopicQueueData:
    return TopicQueueData(broker_name=group, read_queue_nums=read, write_queue_nums=write, perm=perm)


def test_a_controller_topic_routes_its_own_queues_in_its_own_groups_only() -> None:
    topics = {"t": (data("b", 8, 2), data("a", 1, 3), data("gone", 4, 4))}
    for auto_create in (True, False):
        layout = topic_layout("t", ["a", "b", "c"], topics, auto_create=auto_create, default_queue_nums=5)
        assert layout == (GroupQueues("a", 1, 3), GroupQueues("b", 8, 2))
    answer = query_route(d.Resource(name="t"), endpoints("h"), layout)
    perms = [(q.broker.name, q.id, q.permission) for q in answer.message_queues]
    rw, w, r = d.Permission.READ_WRITE, d.Permission.WRITE, d.Permission.READ
    assert perms == [("a", 0, rw), ("a", 1, w), ("a", 2, w)] + [("b", 0, rw), ("b", 1, rw)] + [
        ("b", i, r) for i in range(2, 8)
    ]


def test_perm_bits_close_reading_or_writing() -> None:
    topics = {"t": (data("a", 4, 4, perm=4), data("b", 4, 4, perm=2))}
    layout = topic_layout("t", ["a", "b"], topics, auto_create=False, default_queue_nums=8)
    assert layout == (GroupQueues("a", 4, 0), GroupQueues("b", 0, 4))


def test_an_unknown_topic_exists_only_with_auto_create() -> None:
    assert topic_layout("u", ["a"], {}, auto_create=False, default_queue_nums=8) is None
    assert topic_layout("u", ["a"], {}, auto_create=True, default_queue_nums=8) == (GroupQueues("a", 8, 8),)


@given(
    groups=st.sets(st.sampled_from("abcd"), min_size=1), queues=st.integers(1, 8), rounds=st.integers(1, 3)
)
def test_round_robin_spreads_evenly_over_every_group_and_queue(
    groups: set[str], queues: int, rounds: int
) -> None:
    chooser = QueueChooser()
    layout = auto(sorted(groups), queues)
    picks = Counter(chooser.choose("t", layout) for _ in range(rounds * len(groups) * queues))
    assert set(picks) == {(g, q) for g in groups for q in range(queues)}
    assert set(picks.values()) == {rounds}


def test_a_group_that_just_failed_is_avoided_unless_it_is_the_only_one() -> None:
    chooser = QueueChooser()
    assert all(chooser.choose("t", auto(["a", "b"], 2), avoid="a")[0] == "b" for _ in range(5))
    assert chooser.choose("t", auto(["a"], 2), avoid="a")[0] == "a"


def test_sends_go_to_writable_queues_only_and_none_is_an_error() -> None:
    chooser = QueueChooser()
    layout = (GroupQueues("a", 8, 2), GroupQueues("b", 8, 0))
    assert Counter(chooser.choose("t", layout) for _ in range(20)) == {("a", 0): 10, ("a", 1): 10}
    with pytest.raises(ValueError, match="no writable queue"):
        chooser.choose("t", (GroupQueues("a", 8, 0),))


def test_producer_settings_carry_body_size_and_an_exponential_backoff() -> None:
    client = d.Settings(client_type=d.ClientType.PRODUCER)
    client.publishing.topics.add(name="TopicTest")
    client.request_timeout.FromSeconds(3)
    reply = settings_reply(client, max_body_size=4096)
    assert reply.publishing.max_body_size == 4096 and reply.publishing.validate_message_type
    assert [t.name for t in reply.publishing.topics] == ["TopicTest"]  # the client's own, echoed
    assert reply.backoff_policy.max_attempts == 3 and reply.backoff_policy.HasField("exponential_backoff")
    assert reply.backoff_policy.exponential_backoff.multiplier == 2.0
    assert reply.request_timeout.seconds == 3 and not reply.metric.on


def test_a_producers_own_attempts_are_kept() -> None:
    client = d.Settings(client_type=d.ClientType.PRODUCER)
    client.publishing.SetInParent()
    client.backoff_policy.max_attempts = 5
    assert settings_reply(client, max_body_size=1).backoff_policy.max_attempts == 5


def test_consumer_settings_carry_long_polling_batch_and_redelivery_backoff() -> None:
    client = d.Settings(client_type=d.ClientType.PUSH_CONSUMER)
    client.subscription.group.name = "g"
    reply = settings_reply(client, max_body_size=1)
    sub = reply.subscription
    assert sub.group.name == "g" and not sub.fifo and sub.receive_batch_size == 32
    assert sub.long_polling_timeout.seconds == LONG_POLLING_TIMEOUT_S
    assert reply.backoff_policy.max_attempts == CONSUMER_MAX_ATTEMPTS
    assert reply.backoff_policy.customized_backoff.next[0].seconds == 1
    assert not reply.HasField("publishing")
