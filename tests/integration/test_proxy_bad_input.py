"""mqproxy's gRPC port faces an untrusted network: bad input gets a clear error, closes only its own
connection, and stores nothing; the proxy goes on serving (a real proxy in front of a real cluster).

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

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import GROUP, start_proxy

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
