"""SendMessage requests beyond one good message, through a real proxy in front of a real cluster.

Batches (several messages in one request) go as RocketMQ's proxy sends them: one topic, one queue,
one put. A request with no message, or with messages of different topics, is MESSAGE_CORRUPTED; a
retried batch is answered from the send ledger and stored once; a batch with one refused message is
refused whole.

mqproxy's gRPC port faces an untrusted network: bad input gets a clear error, closes only its own
connection, and stores nothing; the proxy goes on serving.

* bytes that are not HTTP/2 (an HTTP/1.1 request, then random bytes): that connection is closed;
* a SendMessage, ReceiveMessage or Telemetry message that is not protobuf: INTERNAL (gRPC's code for a
  request that does not parse) naming the type, nothing stored;
* a request larger than ``maxMessageSize`` plus gRPC's envelope: RESOURCE_EXHAUSTED, nothing stored;
* well-formed requests with fields the broker must never see (a topic with a space, an empty body,
  a key holding a control character, a reserved property name, a tag with ``|``): each entry's v2 code
  says which, and nothing is stored.

After each, a good send through a new connection is stored.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import GROUP, read_topic, start_proxy

pytestmark = pytest.mark.integration

TOPIC = "BadInput"
SERVICE = "/apache.rocketmq.v2.MessagingService"


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    """A cluster of one group of 2 replicas and a proxy in front of it; the proxy's access point."""
    run_dir = tmp_path_factory.mktemp("bad-input")
    with LocalCluster(run_dir, controllers=3, groups=1, replicas=2) as cluster, ProcessGroup() as group:
        access = start_proxy(group, cluster, run_dir)[1]
        assert send(access, message(b"first")).status.code == _ok()  # creates the topic
        yield cluster, access
    assert cluster.running_pids() == []


def _ok() -> int:
    from mqha.proxy.v2 import definition as d

    return int(d.Code.OK)


def message(body: bytes, number: int = 0, **fields: Any) -> Any:
    from mqha.proxy.v2 import definition as d

    built = d.Message(topic=d.Resource(name=fields.pop("topic", TOPIC)), body=body)
    built.system_properties.message_id = f"BADINPUT{number:08d}{os.urandom(4).hex()}"
    for key in fields.pop("keys", ()):
        built.system_properties.keys.append(key)
    if "tag" in fields:
        built.system_properties.tag = fields.pop("tag")
    built.user_properties.update(fields.pop("properties", {}))
    assert not fields, fields
    return built


def send(access: str, *messages: Any) -> Any:
    """A SendMessage over a new channel; its response."""
    import grpc

    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    with grpc.insecure_channel(access) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        return stub.SendMessage(s.SendMessageRequest(messages=list(messages)), timeout=20)


def log_end(cluster: LocalCluster) -> int:
    master = cluster.master(GROUP, timeout=10)
    assert master is not None
    status = cluster.broker_status(master)
    assert status is not None
    return int(status["maxOffset"])


def still_serving(cluster: LocalCluster, access: str, before: int) -> None:
    """Nothing was stored since ``before``; then a good send is."""
    assert log_end(cluster) == before, "bad input was stored"
    assert send(access, message(b"after")).status.code == _ok()
    assert log_end(cluster) > before


def test_bytes_that_are_not_http2_close_that_connection_only(proxied: tuple[LocalCluster, str]) -> None:
    cluster, proxy = proxied
    before = log_end(cluster)
    host, port = proxy.rsplit(":", 1)
    for garbage in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(4096)):
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(garbage)
            received = b""
            while True:  # until the proxy closes (a GOAWAY may come first)
                try:
                    chunk = conn.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                received += chunk
                assert len(received) < 1 << 20
    still_serving(cluster, proxy, before)


@pytest.mark.parametrize(
    ("method", "shape", "request_type"),
    [
        ("SendMessage", "unary_unary", "SendMessageRequest"),
        ("ReceiveMessage", "unary_stream", "ReceiveMessageRequest"),
        ("Telemetry", "stream_stream", "TelemetryCommand"),
    ],
)
def test_a_body_that_is_not_protobuf_fails_the_call_and_stores_nothing(
    proxied: tuple[LocalCluster, str], method: str, shape: str, request_type: str
) -> None:
    import grpc

    cluster, proxy = proxied
    before = log_end(cluster)
    corrupt = b"\xff\xff\xff\xff not a protobuf message"
    with grpc.insecure_channel(proxy) as channel:
        call = getattr(channel, shape)(f"{SERVICE}/{method}")  # bytes in, bytes out: no serializer
        with pytest.raises(grpc.RpcError) as failed:
            if shape == "unary_unary":
                call(corrupt, timeout=20)
            else:
                list(call(iter([corrupt]) if shape == "stream_stream" else corrupt, timeout=20))
    # gRPC's code for a request proto that does not parse (doc/statuscodes.md), not UNKNOWN
    assert failed.value.code() == grpc.StatusCode.INTERNAL, failed.value
    assert f"not a valid apache.rocketmq.v2.{request_type}" in (failed.value.details() or "")
    still_serving(cluster, proxy, before)


def test_a_request_over_the_size_limit_is_refused_whole(proxied: tuple[LocalCluster, str]) -> None:
    import grpc

    cluster, proxy = proxied
    before = log_end(cluster)
    with pytest.raises(grpc.RpcError) as failed:  # 4 MiB maxMessageSize + 1 MiB envelope < 6 MiB
        send(proxy, message(b"x" * (6 << 20)))
    assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    still_serving(cluster, proxy, before)


def test_fields_the_broker_must_not_see_get_their_code_and_store_nothing(
    proxied: tuple[LocalCluster, str],
) -> None:
    from mqha.proxy.v2 import definition as d

    cluster, proxy = proxied
    before = log_end(cluster)
    cases = [
        (message(b"x", 1, topic="bad topic"), d.Code.ILLEGAL_TOPIC),
        (message(b"", 2), d.Code.MESSAGE_BODY_EMPTY),
        (message(b"x", 3, keys=["a\x01b"]), d.Code.ILLEGAL_MESSAGE_KEY),
        (message(b"x", 4, properties={"UNIQ_KEY": "mine"}), d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        (message(b"x", 5, tag="a|b"), d.Code.ILLEGAL_MESSAGE_TAG),
    ]
    for built, code in cases:
        answer = send(proxy, built)
        assert [e.status.code for e in answer.entries] == [code], (code, answer)
    still_serving(cluster, proxy, before)


def put_requests(cluster: LocalCluster) -> float:
    """The master's put requests so far (``mqha_broker_put_requests_total``, every status)."""
    import urllib.request

    master = cluster.master(GROUP, timeout=10)
    assert master is not None
    with urllib.request.urlopen(f"{master.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "mqha_broker_put_requests"
        for sample in family.samples
        if sample.name == "mqha_broker_put_requests_total"
    )


def test_a_batch_is_one_put_into_one_queue_and_a_retry_is_stored_once(
    proxied: tuple[LocalCluster, str],
) -> None:
    from mqha.proxy.v2 import definition as d

    cluster, proxy = proxied
    batch = [message(f"batch {i}".encode(), 100 + i) for i in range(5)]
    before, puts = log_end(cluster), put_requests(cluster)
    answer = send(proxy, *batch)
    assert answer.status.code == d.Code.OK, answer
    assert [e.message_id for e in answer.entries] == [m.system_properties.message_id for m in batch]
    assert all(e.status.code == d.Code.OK for e in answer.entries)
    assert put_requests(cluster) == puts + 1, "a batch is one put"
    stored = [m for m in read_topic(cluster, TOPIC, at_least=1) if m.msg_id in set(ids(batch))]
    assert sorted(m.msg_id for m in stored) == sorted(ids(batch))
    assert len({m.properties.get("QUEUE_ID") for m in stored}) == 1, "one queue for the whole batch"
    end = log_end(cluster)
    assert end > before
    retried = send(proxy, *batch)  # the client's retry: the same message ids
    assert [e.status.code for e in retried.entries] == [d.Code.OK] * 5
    assert [e.offset for e in retried.entries] == [e.offset for e in answer.entries]
    assert log_end(cluster) == end, "a retried batch is stored once"


def test_batches_that_cannot_be_one_put_are_refused_whole(proxied: tuple[LocalCluster, str]) -> None:
    from mqha.proxy.v2 import definition as d

    cluster, proxy = proxied
    before = log_end(cluster)
    empty = send(proxy)
    assert empty.status.code == d.Code.MESSAGE_CORRUPTED and not empty.entries, empty
    mixed = send(proxy, message(b"a", 200), message(b"b", 201, topic="BadInputOther"))
    assert mixed.status.code == d.Code.MESSAGE_CORRUPTED and not mixed.entries, mixed
    assert "topic in message is not same" in mixed.status.message
    one_bad = send(proxy, message(b"fine", 202), message(b"", 203))
    assert one_bad.status.code == d.Code.MESSAGE_BODY_EMPTY, one_bad
    assert [e.status.code for e in one_bad.entries] == [d.Code.MESSAGE_BODY_EMPTY] * 2
    still_serving(cluster, proxy, before)


def ids(messages: list[Any]) -> list[str]:
    return [m.system_properties.message_id for m in messages]


def test_a_batch_of_four_mib_is_one_put(proxied: tuple[LocalCluster, str]) -> None:
    """The largest batch a client may send (RocketMQ: 4 MiB in all) fits the proxy's gRPC limit and
    the broker's put (``maxRequestBodyBytes`` 8 MiB, binary bodies in base64); each message is under the
    brokers' ``maxMessageSize``."""
    from mqha.proxy.v2 import definition as d

    cluster, proxy = proxied
    batch = [message(os.urandom(512 << 10), 300 + i) for i in range(8)]
    puts = put_requests(cluster)
    answer = send(proxy, *batch)
    assert [e.status.code for e in answer.entries] == [d.Code.OK] * 8, answer.status
    assert put_requests(cluster) == puts + 1
