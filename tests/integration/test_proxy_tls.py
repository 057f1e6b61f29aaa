"""TLS on mqproxy's gRPC port, with the official clients' own TLS option (docs/architecture.md §12.5).

mqproxy with ``tlsEnable=true`` and the brokers' ``tls.server.certPath``/``keyPath`` serves gRPC over
TLS. The official Python client (``tls_enable=True``) and Node client (``sslEnabled: true``), both
unmodified and trusting the test CA through gRPC's ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``, send through
it and every message is stored. A plain-text client and a client trusting another CA are refused at
the handshake, and the proxy goes on serving.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import lines, read_topic, start_producer, start_proxy, wait_done
from tests.helpers.rocketmq_client import SCRIPTS, client_python, node_client
from tests.helpers.tls_certs import NodeFiles, TestCA

pytestmark = pytest.mark.integration

COUNT = 20


@pytest.fixture(scope="module")
def tls_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str, NodeFiles]]:
    """One broker group behind an mqproxy serving TLS; the cluster, its access point, its files."""
    run_dir = tmp_path_factory.mktemp("proxy-tls")
    files = TestCA(run_dir / "pki").node("proxy")
    settings = "".join(f"{k}={v}\n" for k, v in files.settings().items() if not k.startswith("tls.client"))
    with LocalCluster(run_dir, controllers=1, groups=1, replicas=1) as cluster, ProcessGroup() as group:
        cluster.wait_ready(90)
        yield cluster, start_proxy(group, cluster, run_dir, settings)[1], files
    assert cluster.running_pids() == []


def trusting(files: NodeFiles, home: Path) -> dict[str, str]:
    """The environment of a client process that trusts the test CA only."""
    return {"MQHA_TEST_TLS": "1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(files.ca), "HOME": str(home)}


def test_the_official_python_client_sends_over_tls(
    tls_proxy: tuple[LocalCluster, str, NodeFiles], tmp_path: Path
) -> None:
    cluster, access, files = tls_proxy
    with ProcessGroup() as group:
        env = trusting(files, tmp_path)
        python = client_python()
        producer = start_producer(group, python, access, "TlsPython", count=COUNT, run_dir=tmp_path, env=env)
        summary = wait_done(producer, timeout=120)
    assert summary == {"done": True, "ok": COUNT, "failed": 0}, producer.log_tail()
    ids = {line["msgId"] for line in lines(producer) if "msgId" in line}
    assert {m.msg_id for m in read_topic(cluster, "TlsPython", COUNT)} == ids


def test_the_official_node_client_sends_over_tls(
    tls_proxy: tuple[LocalCluster, str, NodeFiles], tmp_path: Path
) -> None:
    cluster, access, files = tls_proxy
    with ProcessGroup() as group:
        producer = group.start(
            ["node", str(SCRIPTS / "node_producer.js"), access, "TlsNode", str(COUNT)],
            log_path=tmp_path / "node-producer.out",
            env={"NODE_PATH": str(node_client()), **trusting(files, tmp_path)},
        )
        summary = wait_done(producer, timeout=120)
    assert summary == {"done": True, "ok": COUNT, "failed": 0}, producer.log_tail()
    ids = {line["msgId"] for line in lines(producer) if "msgId" in line}
    assert {m.msg_id for m in read_topic(cluster, "TlsNode", COUNT)} == ids


def route(access: str, credentials: Any | None) -> Any:
    """A QueryRoute over a new channel (TLS with ``credentials``, else plain text)."""
    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    host, port = access.rsplit(":", 1)
    endpoints = d.Endpoints(addresses=[d.Address(host=host, port=int(port))])
    request = s.QueryRouteRequest(topic=d.Resource(name="TlsRoute"), endpoints=endpoints)
    secure = credentials is not None
    with grpc.secure_channel(access, credentials) if secure else grpc.insecure_channel(access) as channel:
        return service_grpc.MessagingServiceStub(channel).QueryRoute(request, timeout=10)


def test_plain_text_and_an_unknown_ca_are_refused_and_the_proxy_serves_on(
    tls_proxy: tuple[LocalCluster, str, NodeFiles], tmp_path: Path
) -> None:
    import grpc

    _, access, files = tls_proxy
    stranger = TestCA(tmp_path / "other", name="another CA")
    for credentials in (None, grpc.ssl_channel_credentials(stranger.ca_path.read_bytes())):
        with pytest.raises(grpc.RpcError) as refused:
            route(access, credentials)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    answer = route(access, grpc.ssl_channel_credentials(files.ca.read_bytes()))
    assert answer.status.code == 20000 and answer.message_queues  # OK: the proxy still serves
