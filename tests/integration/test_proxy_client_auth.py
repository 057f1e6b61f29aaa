"""mqproxy with ``authenticationEnabled=true`` checks the official clients' signature (§12.12): the
Python and Node.js clients, unmodified, are refused with a wrong secret, an unknown user or no
credentials (nothing stored), and work with the right ones; the refusals are counted in /metrics.

One secure cluster (1 controller, 1 broker) and one proxy for the module; every process is stopped by
pid.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqha.cluster.local import LocalCluster
from mqha.security.credentials import parse_user
from tests.helpers.processes import ProcessGroup, free_port, wait_until
from tests.helpers.proxy_harness import (
    client_env,
    consume,
    lines,
    secure_cluster,
    start_producer,
    start_proxy,
)
from tests.helpers.rocketmq_client import SCRIPTS, client_python, node_client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from secure_cluster(tmp_path_factory.mktemp("auth-cluster"), controllers=1)


@pytest.fixture(scope="module")
def user(cluster: LocalCluster) -> tuple[str, str]:
    """The brokers' user, which the proxy takes as its Super user."""
    parsed = parse_user(cluster.broker_settings["initAuthenticationUser"])
    return parsed.username, parsed.password


@pytest.fixture(scope="module")
def proxy(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(access point, metrics port) of an mqproxy with authentication on."""
    metrics_port = free_port()
    settings = cluster.broker_settings
    conf = (
        "authenticationEnabled=true\n"
        f"initAuthenticationUser={settings['initAuthenticationUser']}\n"
        f"innerClientAuthenticationCredentials={settings['innerClientAuthenticationCredentials']}\n"
        f"metricsExporterType=PROM\nmetricsPromExporterPort={metrics_port}\n"
    )
    with ProcessGroup() as group:
        yield start_proxy(group, cluster, tmp_path_factory.mktemp("proxy"), conf)[1], metrics_port


def _python_send(
    client: Path, access: str, topic: str, run_dir: Path, *, credentials: tuple[str, str] | None, name: str
) -> dict:
    with ProcessGroup() as group:
        producer = start_producer(
            group, client, access, topic, count=3, run_dir=run_dir, credentials=credentials, name=name
        )
        wait_until(lambda: not producer.is_running(), 120, message="the producer to end")
        done = [line for line in lines(producer) if line.get("done")]
        return {
            "done": done[-1] if done else None,
            "sends": [line for line in lines(producer) if "seq" in line],
            "log": producer.log_tail(),
        }


def _refusals(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("mqha_proxy_auth_refusals_total{"):
            labels, value = line.rsplit(" ", 1)
            fields = dict(part.split("=", 1) for part in labels[labels.index("{") + 1 : -1].split(","))
            out[(fields["method"].strip('"'), fields["reason"].strip('"'))] = float(value)
    return out


def test_the_python_client_is_refused_without_valid_credentials_and_served_with_them(
    cluster: LocalCluster, user: tuple[str, str], proxy: tuple[str, int], tmp_path: Path
) -> None:
    client = client_python()
    access, metrics_port = proxy
    username, password = user
    cases = {
        "none": None,
        "wrong-secret": (username, password + "x"),
        "unknown-user": ("nobody", password),
    }
    for name, credentials in cases.items():
        outcome = _python_send(client, access, "AuthTopic", tmp_path, credentials=credentials, name=name)
        done = outcome["done"]
        assert done is None or done["ok"] == 0, (name, outcome)
        print(f"\n{name}: {outcome['log'][-400:]}")
    refusals = _refusals(metrics_port)
    print(refusals)
    assert any(reason == "missing" for _, reason in refusals)
    assert any(reason == "wrong_signature" for _, reason in refusals)
    assert any(reason == "unknown_user" for _, reason in refusals)

    outcome = _python_send(client, access, "AuthTopic", tmp_path, credentials=user, name="right")
    assert outcome["done"] == {"done": True, "ok": 3, "failed": 0}, outcome
    got = consume(
        client,
        "simple",
        access,
        "AuthTopic",
        group="AuthGroup",
        expected=3,
        run_dir=tmp_path,
        credentials=user,
    )
    assert {line["body"] for line in got} == {"seq-0", "seq-1", "seq-2"}


def _node_send(
    access: str, topic: str, run_dir: Path, credentials: tuple[str, str] | None, name: str
) -> dict:
    modules = node_client()
    with ProcessGroup() as group:
        producer = group.start(
            ["node", str(SCRIPTS / "node_producer.js"), access, topic, "3"],
            log_path=run_dir / f"node-producer-{name}.out",
            env={"NODE_PATH": str(modules), "HOME": str(run_dir), **client_env(credentials)},
        )
        wait_until(lambda: not producer.is_running(), 120, message="the producer to end")
        done = [line for line in lines(producer) if line.get("done")]
        return {"done": done[-1] if done else None, "log": producer.log_tail()}


def test_the_node_client_is_refused_without_valid_credentials_and_served_with_them(
    user: tuple[str, str], proxy: tuple[str, int], tmp_path: Path
) -> None:
    access, _ = proxy
    username, password = user
    cases = {"none": None, "wrong-secret": (username, password + "x"), "unknown-user": ("nobody", password)}
    for name, credentials in cases.items():
        outcome = _node_send(access, "AuthNodeTopic", tmp_path, credentials, name)
        assert outcome["done"] is not None and outcome["done"]["ok"] == 0, (name, outcome)
        print(f"\n{name}: {outcome['log'][-300:]}")
    outcome = _node_send(access, "AuthNodeTopic", tmp_path, user, "right")
    assert outcome["done"] == {"done": True, "ok": 3, "failed": 0}, outcome


def test_refusals_carry_rocketmq_s_unauthorized_code_and_a_stale_date_is_refused(
    user: tuple[str, str], proxy: tuple[str, int]
) -> None:
    """Over the wire with the generated stub: the answer is the method's own response with v2 status
    UNAUTHORIZED (40100), gRPC OK, as RocketMQ's proxy answers; a signature over a date-time an hour
    old is refused (clock skew); the same signature over now is served."""
    import time

    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc
    from mqha.security.client_signature import authorization_header, format_date_time

    access, _ = proxy

    def route(metadata: list[tuple[str, str]]) -> tuple[int, str]:
        with grpc.insecure_channel(access) as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            host, port = access.rsplit(":", 1)
            endpoints = d.Endpoints(
                scheme=d.AddressScheme.IPv4, addresses=[d.Address(host=host, port=int(port))]
            )
            request = s.QueryRouteRequest(topic=d.Resource(name="AuthWire"), endpoints=endpoints)
            answer = stub.QueryRoute(request, metadata=metadata, timeout=10)
        return answer.status.code, answer.status.message

    def signed(username: str, password: str, at: float) -> list[tuple[str, str]]:
        stamp = format_date_time(at)
        return [("x-mq-date-time", stamp), ("authorization", authorization_header(username, password, stamp))]

    code, message = route([])
    assert code == d.Code.UNAUTHORIZED and message.startswith("missing"), message
    code, message = route([("authorization", "Basic abc"), ("x-mq-date-time", "20260101T000000Z")])
    assert code == d.Code.UNAUTHORIZED and message.startswith("malformed"), message
    code, message = route(signed(*user, time.time() - 3600))
    assert code == d.Code.UNAUTHORIZED and message.startswith("clock_skew"), message
    code, message = route(signed(user[0], "not-the-secret", time.time()))
    assert code == d.Code.UNAUTHORIZED and message.startswith("wrong_signature"), message
    code, message = route(signed("ghost", user[1], time.time()))
    assert code == d.Code.UNAUTHORIZED and message.startswith("unknown_user"), message
    assert route(signed(*user, time.time()))[0] == d.Code.OK
