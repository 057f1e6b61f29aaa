"""QueryRoute answers, the queue a send goes to, and the Settings a Telemetry stream answers
(mqha.proxy.routes, mqha.proxy.settings): the fields the official clients cannot do without."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from mqha.proxy.routes import QueueChooser, query_route
from mqha.proxy.settings import CONSUMER_MAX_ATTEMPTS, LONG_POLLING_TIMEOUT_S, settings_reply
from mqha.proxy.v2 import definition as d


def endpoints(*hosts: str) -> d.Endpoints:
    out = d.Endpoints(scheme=d.AddressScheme.IPv4)
    for host in hosts:
        out.addresses.add(host=host, port=8081)
    return out


def test_a_route_names_the_proxy_the_client_asked_never_a_broker() -> None:
    topic = d.Resource(name="TopicTest")
    answer = query_route(topic, endpoints("10.0.0.1"), ["broker-b", "broker-a"], 4)
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
    assert query_route(d.Resource(name="a b"), endpoints("h"), ["g"], 1).status.code == d.Code.ILLEGAL_TOPIC
    assert query_route(d.Resource(name="t"), endpoints(), ["g"], 1).status.code == d.Code.ILLEGAL_ACCESS_POINT
    missing = query_route(d.Resource(name="t"), endpoints("h"), [], 1)
    assert missing.status.code == d.Code.TOPIC_NOT_FOUND and not missing.message_queues


@given(
    groups=st.sets(st.sampled_from("abcd"), min_size=1), queues=st.integers(1, 8), rounds=st.integers(1, 3)
)
def test_round_robin_spreads_evenly_over_every_group_and_queue(
    groups: set[str], queues: int, rounds: int
) -> None:
    chooser = QueueChooser(queues)
    picks = Counter(chooser.choose("t", sorted(groups)) for _ in range(rounds * len(groups) * queues))
    assert set(picks) == {(g, q) for g in groups for q in range(queues)}
    assert set(picks.values()) == {rounds}


def test_a_group_that_just_failed_is_avoided_unless_it_is_the_only_one() -> None:
    chooser = QueueChooser(2)
    assert all(chooser.choose("t", ["a", "b"], avoid="a")[0] == "b" for _ in range(5))
    assert chooser.choose("t", ["a"], avoid="a")[0] == "a"


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
