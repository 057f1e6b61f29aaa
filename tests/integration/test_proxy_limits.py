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
"""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
