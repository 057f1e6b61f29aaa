"""Issue 23, the HA port (docs/architecture.md §4.1) with real processes: 1 mqcontroller + 2 mqbroker.

The attack: a raw TCP client on the master's HA port sends the slave HANDSHAKE with the real slave's
broker id, then acks what it is sent without storing it. With the real slave frozen and
``allAckInSyncStateSet=true``, the master acknowledges puts that no replica holds.

* authentication off: the spoof works (the threat, documented);
* ``authenticationEnabled=true`` with the same credentials on both brokers: the pair replicates and
  acks as before; a spoofing slave with no proof, a wrong proof, or a proof replayed from an earlier
  connection receives the 36-byte challenge and nothing else, is never listed by the master's HA
  status, and its acks never make a put succeed;
* a fake master (in-process slave node, raw asyncio server) that cannot prove the credentials writes
  nothing to the slave: the slave closes after the wrong proof and never sends its HANDSHAKE.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mqha.autoswitch_ha.auth_frames import (
    AUTH_CHALLENGE,
    AUTH_HELLO_HEADER,
    AUTH_PROOF,
    AuthHello,
    auth_hello_size,
    decode_auth_challenge,
    decode_auth_hello,
    encode_auth_challenge,
    encode_auth_hello,
    encode_auth_proof,
)
from mqha.autoswitch_ha.events import EpochHistoryOffer, TransferBatch
from mqha.autoswitch_ha.frames import FrameReader, encode_frame
from mqha.autoswitch_ha.state import Role
from mqha.errors import ProtocolError
from mqha.replicas_manager.hooks import MasterInfo
from mqha.security.basic import basic_header
from mqha.security.credentials import InnerCredentials, User
from mqha.security.ha_proof import slave_proof
from tests.helpers.processes import ProcessGroup, wait_until
from tests.helpers.run_async import run_async
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster, request
from tests.integration.ha_nodes import Node, eventually

pytestmark = pytest.mark.integration

CREDENTIALS = InnerCredentials("ha-test-ak", "ha-test-secret-0123456789")
USER = User("ha-user", "ha-user-password")
SETTINGS = {
    **BROKER_TEST_SETTINGS,
    "allAckInSyncStateSet": "true",
    "slaveTimeout": "1000",
    "haMaxTimeSlaveNotCatchup": "60000",  # the frozen slave stays in the SyncStateSet during the test
    "controllerHeartBeatTimeoutMills": "60000",
}
AUTH_SETTINGS = {
    **SETTINGS,
    "authenticationEnabled": "true",
    "innerClientAuthenticationCredentials": json.dumps(
        {"accessKey": CREDENTIALS.access_key, "secretKey": CREDENTIALS.secret_key}
    ),
    "initAuthenticationUser": json.dumps({"username": USER.username, "password": USER.password}),
}
HANDSHAKE = struct.Struct(">ihhq")
ACK = struct.Struct(">iq")


@dataclass
class Pair:
    """A master and its slave, both in the SyncStateSet."""

    master: Broker
    slave: Broker
    slave_id: int

    def put(self, body: str) -> dict[str, Any]:
        payload = {"messages": [{"topic": "orders", "body": body}]}
        headers = {"Authorization": basic_header(USER)}  # harmless while the broker API has no auth
        code, reply = request("POST", self.master.url + "/v1/messages", payload, headers=headers, timeout=10)
        assert code == 200, reply
        return reply

    def wait_slave_in_sync_state_set(self) -> None:
        """Until the master's SyncStateSet holds the slave: only then does every put wait for its ack
        (a put before that is acknowledged by the master alone, which would hide a spoof's effect)."""
        wait_until(
            lambda: self.slave_id in self.master.get("/v1/status")["syncStateSet"],
            20,
            message="the slave joins the SyncStateSet",
        )

    def ha_slave_addresses(self) -> list[str]:
        return [c["addr"] for c in self.master.get("/v1/ha/status")["haConnectionInfo"]]


def start_pair(group: ProcessGroup, base: Path, settings: dict[str, str]) -> Pair:
    controllers = ControllerCluster(group, base / "controllers", size=1)
    controllers.start()
    controllers.leader(timeout=10)
    addr = controllers.nodes[0].address
    master, slave = Broker("b0", base / "b0", settings), Broker("b1", base / "b1", settings)
    master.start(group, addr)
    wait_until(lambda: (master.try_status() or {}).get("role") == "MASTER", 20, message="master")
    slave.start(group, addr)
    wait_until(lambda: (slave.try_status() or {}).get("role") == "SLAVE", 20, message="slave")
    wait_until(
        lambda: len((master.try_status() or {}).get("localSyncStateSet", [])) == 2, 30, message="set of 2"
    )
    return Pair(master, slave, slave.status()["controllerBrokerId"])


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[Pair]:
    with ProcessGroup() as group:
        yield start_pair(group, tmp_path, SETTINGS)


@pytest.fixture
def authenticated(tmp_path: Path) -> Iterator[Pair]:
    with ProcessGroup() as group:
        yield start_pair(group, tmp_path, AUTH_SETTINGS)


@dataclass
class FakeSlave:
    """A raw TCP client claiming ``slave_id``: acks whatever it is sent, stores nothing."""

    port: int
    slave_id: int
    hello: bytes | None = None  # sent after the challenge when the master sends one
    received: bytearray = field(default_factory=bytearray)
    data_bytes: int = 0  # log bytes in TRANSFER frames
    closed_by_master: bool = False

    def __post_init__(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.local = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-slave")
        self._thread.start()

    def _run(self) -> None:
        try:
            if self.hello is not None:
                self.received += self._recv_exact(AUTH_CHALLENGE.size)
                self.sock.sendall(self.hello)
            self.sock.sendall(HANDSHAKE.pack(1, 0, 0, self.slave_id))
            reader: FrameReader | None = FrameReader(Role.MASTER)
            self.sock.settimeout(0.2)
            deadline = time.monotonic() + 30
            while not self._stop.is_set() and time.monotonic() < deadline:
                try:
                    chunk = self.sock.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    self.closed_by_master = True
                    return
                self.received += chunk
                try:
                    reader = self._ack(reader, chunk)
                except ProtocolError:  # e.g. a challenge it does not answer: just listen on
                    reader = None
        except OSError:  # the master closed on us
            self.closed_by_master = True

    def _ack(self, reader: FrameReader | None, chunk: bytes) -> FrameReader | None:
        if reader is not None:
            reader.feed(chunk)
            for frame in reader.frames():
                if isinstance(frame, EpochHistoryOffer):
                    self.sock.sendall(ACK.pack(2, frame.max_offset))
                elif isinstance(frame, TransferBatch):
                    self.data_bytes += len(frame.data)
                    self.sock.sendall(ACK.pack(2, frame.offset + len(frame.data)))
        return reader

    def _recv_exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionResetError("closed")
            data += chunk
        return data

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sock.close()


def hello_for(challenge_frame: bytes, slave_id: int, secret: str) -> bytes:
    challenge, mine = decode_auth_challenge(challenge_frame), b"s" * 32
    proof = slave_proof(secret, challenge, mine, slave_id)
    return encode_auth_hello(AuthHello(slave_id, mine, proof, CREDENTIALS.access_key))


def freeze_slave_and_spoof(pair: Pair, hello: bytes | None) -> tuple[FakeSlave, dict[str, Any]]:
    """Freeze the real slave, connect the fake, put one message: (the fake, the put's reply)."""
    assert pair.slave.proc is not None
    pair.slave.proc.pause()
    fake = FakeSlave(pair.master.ha_port, pair.slave_id, hello)
    time.sleep(0.5)  # the fake's handshake (if accepted) displaced the frozen slave's link
    reply = pair.put("acked-but-never-replicated?")
    time.sleep(0.3)
    return fake, reply


def test_without_authentication_a_fake_slave_gets_puts_acknowledged(plain: Pair) -> None:
    """The threat: what the authenticated handshake exists for."""
    assert plain.put("before")["status"] == "PUT_OK"
    fake, reply = freeze_slave_and_spoof(plain, None)
    try:
        assert reply["status"] == "PUT_OK", reply  # acknowledged on the fake slave's word alone
        assert fake.data_bytes > 0  # and the fake read the log
        assert fake.local in plain.ha_slave_addresses()
        end = reply["results"][0]["offset"] + reply["results"][0]["size"]
    finally:
        fake.stop()
        assert plain.slave.proc is not None
        plain.slave.proc.resume()
    assert end > 0


def test_authenticated_pair_replicates_and_spoofing_slaves_get_nothing(authenticated: Pair) -> None:
    pair = authenticated
    # The authenticated pair replicates and acks as before.
    for i in range(5):
        reply = pair.put(f"sync-{i}")
        assert reply["status"] == "PUT_OK", reply
        end = reply["results"][0]["offset"] + reply["results"][0]["size"]
        assert pair.slave.status()["maxOffset"] >= end

    pair.wait_slave_in_sync_state_set()
    # A replayable proof: a valid hello for the challenge of an earlier connection.
    with socket.create_connection(("127.0.0.1", pair.master.ha_port), timeout=5) as first:
        challenge = b""
        while len(challenge) < AUTH_CHALLENGE.size:
            challenge += first.recv(AUTH_CHALLENGE.size - len(challenge))
        captured = hello_for(challenge, pair.slave_id, CREDENTIALS.secret_key)
        first.sendall(captured)
        answer = b""
        while len(answer) < AUTH_PROOF.size:
            answer += first.recv(AUTH_PROOF.size - len(answer))
        assert len(answer) == AUTH_PROOF.size  # the master accepted it there: it was a real proof

    wrong = hello_for(encode_auth_challenge(bytes(32)), pair.slave_id, "not-the-secret-key")
    attempts = {"no proof": None, "wrong proof": wrong, "replayed proof": captured}
    for name, hello in attempts.items():
        fake, reply = freeze_slave_and_spoof(pair, hello)
        try:
            assert reply["status"] != "PUT_OK", (name, reply)
            wait_until(lambda f=fake: f.closed_by_master, 10, message=f"{name}: the master closes")
            # The challenge only: no handshake reply, no log data.
            assert len(fake.received) == AUTH_CHALLENGE.size, (name, len(fake.received))
            assert fake.data_bytes == 0
            assert fake.local not in pair.ha_slave_addresses()
        finally:
            fake.stop()
            assert pair.slave.proc is not None
            pair.slave.proc.resume()
        # The real slave (still connected) catches up, and acks count again.
        wait_until(lambda: pair.put("after")["status"] == "PUT_OK", 20, interval=0.2, message="real acks")


@run_async()
async def test_a_master_that_cannot_prove_the_credentials_feeds_the_slave_nothing(tmp_path: Path) -> None:
    keys = ("authenticationEnabled", "innerClientAuthenticationCredentials", "initAuthenticationUser")
    slave = await Node.start(tmp_path / "slave", 2, **{k: AUTH_SETTINGS[k] for k in keys})
    hellos: list[AuthHello] = []
    after_hello: list[bytes] = []

    async def fake_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(encode_auth_challenge(bytes(range(32))))
        header = await reader.readexactly(AUTH_HELLO_HEADER.size)
        size = auth_hello_size(header)
        assert size is not None
        hellos.append(decode_auth_hello(header + await reader.readexactly(size - len(header))))
        offer = EpochHistoryOffer(max_offset=4096, last_epoch=1, entries=((1, 0),))
        data = TransferBatch(offset=0, epoch=1, epoch_start_offset=0, confirm_offset=4096, data=b"x" * 4096)
        writer.write(encode_auth_proof(bytes(32)) + encode_frame(offer) + encode_frame(data))  # a guess
        sent = b""  # what the slave sends after the proof, up to its close (an abort: a reset)
        with contextlib.suppress(ConnectionResetError):
            while chunk := await reader.read(65536):
                sent += chunk
        after_hello.append(sent)
        writer.close()

    server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await slave.runtime.change_to_slave(MasterInfo(1, "127.0.0.1:1", f"127.0.0.1:{port}"), 1)
        await eventually(lambda: len(after_hello) >= 2, timeout=10, message="two refused connections")
        assert hellos[0].slave_id == 2 and hellos[0].access_key == CREDENTIALS.access_key
        assert after_hello[:2] == [b"", b""]  # no HANDSHAKE, no ACK: the slave closed at the proof
        assert slave.store.max_offset == 0  # and wrote nothing
        assert slave.ha.client.sessions == 0
    finally:
        server.close()
        await slave.stop()
