"""mqproxy's limits with real processes: one client cannot hold what the others need (§13, Limits).

The broker group's only replica is paused (SIGSTOP), so every send is held by the proxy until its
deadline: what a client sends then stays in flight. With a budget of two requests per connection and
three in all:

* a connection's third request is RESOURCE_EXHAUSTED at once, naming
  ``grpcMaxInflightBytesPerConnection``, while a second connection's requests are admitted;
* a request past the process's budget is RESOURCE_EXHAUSTED naming ``grpcMaxInflightBytes``;
* a request larger than ``grpcMaxInboundMessageSize`` is RESOURCE_EXHAUSTED (gRPC, before reading);
* the exporter counts the refusals; once the broker runs again the held sends are stored and the
  budget is free again (nothing is left counted).

A second proxy with ``grpcMaxConnections=3`` and ``grpcMaxConcurrentCallsPerConnection=4``: a
connection with four open streams has its fifth call RESOURCE_EXHAUSTED at once, and so has a fourth
connection's call while three have calls open; both are served once a call ends. Of 40 idle HTTP/2
connections, those past gRPC's hard cap (twice the limit) are closed at once while the connected
clients are served on.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup, free_port
from tests.helpers.proxy_harness import GROUP, start_proxy

pytestmark = pytest.mark.integration

KIB = 1024
BODY = 400 * KIB
"""Each held request is a bit more than this; the budgets below hold two and three of them."""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str, int]]:
    """One broker, a proxy with small budgets; the cluster, the access point, the exporter's port."""
    run_dir = tmp_path_factory.mktemp("proxy-limits")
    metrics_port = free_port()
    settings = (
        f"maxMessageSize={512 * KIB}\ngrpcMaxInboundMessageSize={600 * KIB}\n"
        f"grpcMaxInflightBytesPerConnection={900 * KIB}\ngrpcMaxInflightBytes={1300 * KIB}\n"
        f"metricsExporterType=PROM\nmetricsPromExporterPort={metrics_port}\n"
    )
    with LocalCluster(run_dir, controllers=1, groups=1, replicas=1) as cluster, ProcessGroup() as group:
        cluster.wait_ready(90)
        access = start_proxy(group, cluster, run_dir, settings)[1]
        yield cluster, access, metrics_port
    assert cluster.running_pids() == []


def request(number: int, size: int = BODY) -> Any:
    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s

    message = d.Message(topic=d.Resource(name="Limits"), body=b"x" * size)
    message.system_properties.message_id = f"LIMITS{number:06d}{os.urandom(4).hex()}"
    return s.SendMessageRequest(messages=[message])


class Connection:
    """One gRPC channel (one TCP connection) whose sends run in threads."""

    def __init__(self, access: str, pool: ThreadPoolExecutor) -> None:
        import grpc

        from mqha.proxy.v2 import service_grpc

        # A channel of its own: channels with equal options would share one TCP connection.
        self.channel = grpc.insecure_channel(access, options=[("grpc.use_local_subchannel_pool", 1)])
        self.stub = service_grpc.MessagingServiceStub(self.channel)
        self.pool = pool

    def send(self, number: int, size: int = BODY, timeout: float = 8.0) -> Future[Any]:
        def call() -> Any:
            import grpc

            try:
                return self.stub.SendMessage(request(number, size), timeout=timeout)
            except grpc.RpcError as exc:
                return exc

        return self.pool.submit(call)


def refused_by(outcome: Future[Any], key: str) -> None:
    import grpc

    error = outcome.result(timeout=2)  # refused at once, not at the deadline
    assert isinstance(error, grpc.RpcError), error
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and key in (error.details() or ""), error


def refusals(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith(("mqha_proxy_limit_refusals_total", "mqha_proxy_inflight_bytes ")):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def test_one_connection_cannot_hold_what_the_others_need(limited: tuple[LocalCluster, str, int]) -> None:
    cluster, access, metrics_port = limited
    with ThreadPoolExecutor(8) as pool:
        first, second = Connection(access, pool), Connection(access, pool)
        assert first.send(0, 10).result(timeout=20).status.code == 20000  # creates the topic
        master = cluster.master(GROUP, timeout=10)
        assert master is not None
        cluster.pause(master)
        try:
            held = [first.send(1), first.send(2)]
            time.sleep(1.0)  # both are in the proxy, waiting for the paused broker
            assert not any(outcome.done() for outcome in held)
            refused_by(first.send(3), "grpcMaxInflightBytesPerConnection")
            held.append(second.send(4))  # another connection is served
            time.sleep(0.5)
            refused_by(second.send(5), "grpcMaxInflightBytes")  # the process holds three
            refused_by(second.send(6, size=700 * KIB), "larger than max")
            counted = refusals(metrics_port)
            assert counted['mqha_proxy_limit_refusals_total{limit="grpcMaxInflightBytesPerConnection"}'] == 1
            assert counted['mqha_proxy_limit_refusals_total{limit="grpcMaxInflightBytes"}'] == 1
            assert counted["mqha_proxy_inflight_bytes"] > 3 * BODY
        finally:
            cluster.resume(master)
        answers = [outcome.result(timeout=30) for outcome in held]
        assert [answer.status.code for answer in answers] == [20000] * 3, answers  # stored after all
        assert refusals(metrics_port)["mqha_proxy_inflight_bytes"] == 0
        assert first.send(7).result(timeout=20).status.code == 20000  # the budget is free again
        for connection in (first, second):
            connection.channel.close()


def test_calls_past_the_connection_and_stream_limits_are_resource_exhausted(
    limited: tuple[LocalCluster, str, int], tmp_path: Path
) -> None:
    """``grpcMaxConcurrentCallsPerConnection`` and ``grpcMaxConnections`` answer the call past them
    RESOURCE_EXHAUSTED naming the key, at once, while other calls are served; idle connections past
    gRPC's hard cap (twice the limit) are closed."""
    from mqha.proxy.v2 import service as s

    cluster, _, _ = limited
    with ProcessGroup() as group:
        settings = "grpcMaxConnections=3\ngrpcMaxConcurrentCallsPerConnection=4\n"
        access = start_proxy(group, cluster, tmp_path, settings)[1]
        host, port = access.rsplit(":", 1)
        release = threading.Event()

        def silent() -> Iterator[Any]:
            release.wait(30)
            yield from ()

        with ThreadPoolExecutor(4) as pool:
            busy, second, third, late = (Connection(access, pool) for _ in range(4))
            streams = [busy.stub.Telemetry(silent(), timeout=30) for _ in range(4)]
            time.sleep(0.5)  # the four are open
            hello = busy.stub.Heartbeat.future(s.HeartbeatRequest(), timeout=15)
            exhausted(hello, "grpcMaxConcurrentCallsPerConnection=4")
            held = [conn.stub.Telemetry(silent(), timeout=30) for conn in (second, third)]
            time.sleep(0.5)  # three connections have calls open
            exhausted(late.stub.Heartbeat.future(s.HeartbeatRequest(), timeout=15), "grpcMaxConnections=3")
            assert second.stub.Heartbeat(s.HeartbeatRequest(), timeout=5).status.code == 20000
            held[0].cancel()
            streams[0].cancel()
            assert served(late) and served(busy)  # a connection and a stream free again

            idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(40)]
            for conn in idle:
                conn.sendall(PREFACE_AND_SETTINGS)
            time.sleep(1.0)
            closed = sum(1 for conn in idle if is_closed(conn))
            assert 40 - 6 <= closed < 40, closed  # the hard cap is 6, the clients hold 3 or 4
            assert second.stub.Heartbeat(s.HeartbeatRequest(), timeout=5).status.code == 20000
            for conn in idle:
                conn.close()
            release.set()
            for stream in streams + held:
                stream.cancel()
            for connection in (busy, second, third, late):
                connection.channel.close()


def exhausted(outcome: Any, key: str) -> None:
    """``outcome`` (a call's future) ends RESOURCE_EXHAUSTED naming ``key``, at once."""
    import grpc

    try:
        answer = outcome.result(timeout=3)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and key in (exc.details() or ""), exc
        return
    except Exception as exc:  # the future's own timeout: the call waited
        raise AssertionError(f"the call past {key} waited instead of being refused: {exc!r}") from None
    raise AssertionError(f"the call past {key} was served: {answer}")


def served(connection: Connection) -> bool:
    """Whether a Heartbeat on ``connection`` is answered within a few seconds (the proxy sees a
    cancelled call end a moment later)."""
    import grpc

    from mqha.proxy.v2 import service as s

    deadline = time.monotonic() + 5
    while True:
        try:
            return connection.stub.Heartbeat(s.HeartbeatRequest(), timeout=5).status.code == 20000
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


PREFACE_AND_SETTINGS = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def is_closed(conn: socket.socket) -> bool:
    """Whether the proxy closed ``conn`` (what it sent on one it keeps is read and dropped)."""
    conn.setblocking(False)
    try:
        while True:
            if not conn.recv(65536):
                return True
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
