"""Issue 23 part 5 with real processes: ``tlsEnable=true`` on 3 controllers and a 2-broker set.

A CA and a node certificate (IP SAN 127.0.0.1) are made in the test; every node checks peers' host
names too (``tls.client.verifyHostname``). The brokers register over https and their sessions over
wss, a master is elected, the slave replicates over the TLS HA port and catches up; the Python client
and mqadmin work with the CA. Plain HTTP to either API, a plain HA handshake and a client trusting
another CA all get nothing. Every process is stopped by pid; every wait is bounded.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqha.autoswitch_ha.events import HandshakeRequest
from mqha.autoswitch_ha.frames import encode_frame
from mqha.client.results import SendStatus
from mqha.client.sync import SyncConsumer, SyncProducer
from mqha.cluster.nodes import http_json
from mqha.security.credentials import User
from mqha.security.tls import trust_context
from tests.helpers.processes import ProcessGroup, wait_until
from tests.helpers.tls_certs import NodeFiles, TestCA
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker, mqbroker_command
from tests.integration.controller_cluster import ControllerCluster, mqcontroller_command
from tests.integration.test_mqadmin import mqadmin

pytestmark = pytest.mark.integration

USER = User("alice", "alice-password-1")
CONTROLLER_AUTH = {
    "authenticationEnabled": "true",
    "innerClientAuthenticationCredentials": json.dumps({"accessKey": "nodes", "secretKey": "inner-secret-1"}),
    "adminAuthToken": "admin-token-1",
}
BROKER_AUTH = {
    **CONTROLLER_AUTH,
    "initAuthenticationUser": json.dumps({"username": USER.username, "password": USER.password}),
}


@dataclass
class TlsCluster:
    """3 controllers and 2 brokers of one set, all with ``tlsEnable=true``; https calls to them."""

    group: ProcessGroup
    files: NodeFiles
    context: ssl.SSLContext
    controllers: ControllerCluster
    brokers: list[Broker]
    user: User | None  # the broker API user when authentication is on too

    @property
    def controller_addr(self) -> str:
        return ";".join(n.address for n in self.controllers.nodes)

    def get(self, address: str, path: str, timeout: float = 2.0) -> Any:
        status, body = http_json("GET", f"https://{address}{path}", timeout=timeout, context=self.context)
        assert status == 200, body
        return body

    def wait_healthy(self, addresses: list[str], timeout: float = 30.0) -> None:
        for address in addresses:
            wait_until(lambda a=address: self.get(a, "/healthz"), timeout, 0.05, f"{address} over https")

    def leader(self) -> str:
        def find() -> str | None:
            leaders = [
                n.address
                for n in self.controllers.nodes
                if self.get(n.address, "/v1/controller/metadata")["isLeader"]
            ]
            return leaders[0] if len(leaders) == 1 else None

        return wait_until(find, 15.0, 0.05, "one controller leader")

    def master(self) -> tuple[Broker, Broker]:
        def find() -> tuple[Broker, Broker] | None:
            roles = [self.get(b.address, "/v1/status").get("role") for b in self.brokers]
            if sorted(roles) != ["MASTER", "SLAVE"]:
                return None
            master = self.brokers[roles.index("MASTER")]
            return master, next(b for b in self.brokers if b is not master)

        return wait_until(find, 30.0, 0.1, "a master and a slave")


@pytest.fixture(params=[False, True], ids=["tls", "tls+auth"])
def tls_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TlsCluster]:
    auth = request.param  # with authenticationEnabled too: signatures over https, HA proofs over TLS
    ca = TestCA(tmp_path / "tls")
    files = ca.node("node", ips=("127.0.0.1",))
    settings = files.settings(verify_hostname=True)
    with ProcessGroup() as group:
        controllers = ControllerCluster(
            group, tmp_path / "controllers", settings={**settings, **(CONTROLLER_AUTH if auth else {})}
        )
        for node in controllers.nodes:
            node.proc = group.start(
                [*mqcontroller_command(), "-c", str(node.conf)],
                log_path=node.log_path,
                name=f"mqcontroller-{node.node_id}",
            )
        brokers = [
            Broker(
                f"b{i}",
                tmp_path / f"b{i}",
                {**BROKER_TEST_SETTINGS, **settings, **(BROKER_AUTH if auth else {})},
            )
            for i in range(2)
        ]
        user = USER if auth else None
        cluster = TlsCluster(group, files, trust_context(str(files.ca)), controllers, brokers, user)
        cluster.wait_healthy([n.address for n in controllers.nodes])
        cluster.leader()
        for broker in brokers:
            broker.launch(group, cluster.controller_addr)
        cluster.wait_healthy([b.address for b in brokers])
        yield cluster


def plain_http_fails(address: str) -> bool:
    """A plain-HTTP GET gets no HTTP answer (the TLS server closes or sends an alert)."""
    try:
        http_json("GET", f"http://{address}/healthz", timeout=3.0)
    except OSError:
        return True
    return False


def plain_ha_handshake_answer(port: int, slave_id: int) -> bytes:
    """What the HA port sends back to a plain-TCP HANDSHAKE claiming ``slave_id``."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=3.0) as sock:
        sock.sendall(encode_frame(HandshakeRequest(slave_id=slave_id)))
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    return received


def test_a_tls_cluster_elects_replicates_and_serves_clients_with_the_ca(
    tls_cluster: TlsCluster, tmp_path: Path
) -> None:
    cluster = tls_cluster
    master, slave = cluster.master()
    wait_until(
        lambda: len(cluster.get(master.address, "/v1/status")["localSyncStateSet"]) == 2,
        30.0,
        0.1,
        "the slave in the SyncStateSet (replicating over TLS)",
    )

    # The broker's WebSocket sessions to every controller are open (over TLS).
    def sessions_open() -> bool:
        sessions = cluster.get(slave.address, "/v1/status")["replicasManager"]["controllerSessions"]
        return len(sessions) == 3 and all(s["state"] == "open" for s in sessions.values())

    wait_until(sessions_open, 15.0, 0.1, "sessions open to every controller")

    ca_context = trust_context(str(cluster.files.ca), verify_hostname=True)
    with SyncProducer(
        cluster.controller_addr, "bs1", ssl=ca_context, user=cluster.user, send_timeout=10.0
    ) as producer:
        results = [producer.send("orders", f"tls-{i}") for i in range(5)]
    assert [r.status for r in results] == [SendStatus.PUT_OK] * 5, results
    with SyncConsumer(cluster.controller_addr, "bs1", ssl=ca_context, user=cluster.user) as consumer:
        bodies = [m.body for m in consumer.poll(10, timeout=10.0)]
    assert [b.decode() for b in bodies] == [f"tls-{i}" for i in range(5)]

    top = cluster.get(master.address, "/v1/status")["maxOffset"]
    wait_until(
        lambda: cluster.get(slave.address, "/v1/status")["maxOffset"] == top, 15.0, 0.1, "slave caught up"
    )

    # mqadmin with the CA (option and environment variable); without it, no answer.
    leader = cluster.leader()
    done = mqadmin("getSyncStateSet", "-a", leader, "-b", "bs1", "--tls-ca", str(cluster.files.ca))
    assert done.returncode == 0, done.stderr
    done = mqadmin("getControllerMetaData", "-a", leader, env={"MQHA_TLS_CA": str(cluster.files.ca)})
    assert done.returncode == 0, done.stderr
    done = mqadmin("getControllerMetaData", "-a", leader)
    assert done.returncode == 3, (done.stdout, done.stderr)

    # Plain HTTP to both APIs and a plain HA handshake claiming the real slave's id: nothing served.
    assert plain_http_fails(leader)
    assert plain_http_fails(master.address)
    slave_id = cluster.get(slave.address, "/v1/status")["brokerId"]
    answer = plain_ha_handshake_answer(master.ha_port, slave_id)
    assert answer == b"" or answer[:1] == b"\x15", answer[:32]  # nothing, or a TLS alert record

    # A client trusting another CA is refused at the handshake, by both APIs and the HA port.
    stranger = trust_context(str(TestCA(tmp_path / "other", "another CA").ca_path))
    for address in (leader, master.address, f"127.0.0.1:{master.ha_port}"):
        host, port = address.rsplit(":", 1)
        with (
            pytest.raises(ssl.SSLCertVerificationError),
            socket.create_connection((host, int(port)), timeout=3.0) as sock,
        ):
            stranger.wrap_socket(sock, server_hostname=host).close()
    done = mqadmin("getControllerMetaData", "-a", leader, "--tls-ca", str(tmp_path / "other" / "ca.pem"))
    assert done.returncode == 3 and "CERTIFICATE_VERIFY_FAILED" in done.stderr, done.stderr
    with SyncProducer(
        cluster.controller_addr, "bs1", ssl=stranger, user=cluster.user, send_timeout=2.0
    ) as producer:
        refused = producer.send("orders", "never")
    assert refused.status is not SendStatus.PUT_OK

    # Refused handshakes are not worth a log line above debug.
    for log_path in (
        *(n.log_path for n in cluster.controllers.nodes),
        *(b.base / "broker.log" for b in cluster.brokers),
    ):
        text = log_path.read_text()
        assert "Traceback" not in text and "SSL" not in text, (log_path, text[-2000:])

    # Nothing of the above reached the log; both replicas still agree.
    assert cluster.get(master.address, "/v1/status")["maxOffset"] == top
    assert cluster.get(slave.address, "/v1/status")["maxOffset"] == top


def test_a_bad_certificate_path_is_one_line_naming_the_key_or_option(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "tls")
    files = ca.node("node")
    broker = Broker(
        "bad",
        tmp_path / "bad",
        {**BROKER_TEST_SETTINGS, **files.settings(), "tls.server.keyPath": str(tmp_path / "missing.pem")},
    )
    conf = broker.write_config("127.0.0.1:9")
    done = subprocess.run(
        [*mqbroker_command(), "-c", str(conf)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "tls.server.keyPath" in lines[0] and "cannot read" in lines[0], done.stderr
    done = mqadmin("getControllerMetaData", "-a", "127.0.0.1:9", "--tls-ca", str(tmp_path / "missing.pem"))
    assert done.returncode == 2 and "--tls-ca: cannot read" in done.stderr, done.stderr
