"""An attacker's pickled frame on a controller's Raft port executes nothing, and everything real members
send passes the restricted decoder (issue 23, docs/raft.md §7.1, §9).

Real ``mqcontroller`` processes; the attacker is a raw TCP socket sending exactly the bytes PySyncObj
0.3.17 reads as one frame: a 4-byte native-order length, then ``zlib(pickle)`` (with a password, the
zlib bytes are a frame of the cluster's cipher, ``mqha.controller.raft.cipher``, made with that
password: a peer that knows it). Its first frame is
decoded before any handshake, so it is the whole attack.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from pysyncobj.monotonic import monotonic as raft_clock

from mqha.controller.raft import decoding
from mqha.controller.raft.addresses import store_paths
from mqha.controller.raft.cipher import raft_cipher
from mqha.controller.raft.journal import DurableFileJournal
from mqha.controller.raft.node import PipelinedSyncObj, RecordConsumer
from mqha.controller.raft.tuning import RaftTuning, build_conf
from tests.helpers.processes import ProcessGroup, free_port, wait_until
from tests.integration.controller_cluster import (
    RAFT_PORT_OFFSET,
    ControllerCluster,
    Node,
    groups_of,
    register_broker,
)
from tests.integration.raft_node import KVApplier

pytestmark = pytest.mark.integration

PASSWORD = "raft-secret"
UNAUTHENTICATED_WARNING = "Raft traffic is unauthenticated and unencrypted"
REFUSED_LOG = "refused Raft data"


class _System:
    """Unpickles as ``os.system(command)``."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


class _Exec:
    """Unpickles as ``builtins.exec(source)``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, (self.source,))


def _frame(message: object, password: str | None) -> bytes:
    """One PySyncObj frame carrying ``message`` (``tcp_connection.TcpConnection.send``'s layout)."""
    data = zlib.compress(pickle.dumps(message, protocol=2), 3)
    if password:
        data = raft_cipher(password).encrypt_at_time(data, int(raft_clock()))
    return struct.pack("i", len(data)) + data


def _send_and_wait_closed(node: Node, frames: list[bytes], timeout: float = 5.0) -> None:
    """Connect to ``node``'s Raft port, send ``frames``, and wait until the node closes the connection."""
    with socket.create_connection(("127.0.0.1", node.port + RAFT_PORT_OFFSET), timeout=timeout) as sock:
        for frame in frames:
            sock.sendall(frame)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not sock.recv(4096):
                    return
            except (ConnectionResetError, TimeoutError):
                return
        pytest.fail("the Raft port kept the attacker's connection open")


def _log_count(node: Node, text: str) -> int:
    return node.log_path.read_text(errors="replace").count(text)


@pytest.mark.parametrize("password", [None, PASSWORD], ids=["default-no-password", "peer-knows-password"])
def test_a_pickled_frame_on_the_raft_port_executes_nothing(
    group: ProcessGroup, tmp_path: Path, password: str | None
) -> None:
    settings = {"controllerRaftPassword": password} if password else {}
    cluster = ControllerCluster(group, tmp_path / "cluster", settings=settings)
    cluster.start()
    leader = cluster.leader(timeout=10)
    follower = cluster.followers(leader)[0]

    pwned = tmp_path / "pwned"
    pwned_exec = tmp_path / "pwned-exec"
    attacked = (leader, follower)
    for target in attacked:
        # Two frames on one connection, two connections: code execution twice over if decoded.
        _send_and_wait_closed(target, [_frame(_System(f"touch {pwned}"), password)])
        source = f"open({str(pwned_exec)!r}, 'w').close()"
        _send_and_wait_closed(target, [_frame(_Exec(source), password), _frame(_Exec(source), password)])
    time.sleep(0.5)  # an os.system child would have run by now
    assert not pwned.exists(), "the Raft port ran os.system from a peer frame"
    assert not pwned_exec.exists(), "the Raft port ran exec from a peer frame"

    # Every node keeps serving, and the cluster still commits a write everywhere.
    for node in cluster.nodes:
        status, body = node.get("/healthz")
        assert status == 200, body
    leader = cluster.leader(timeout=5)
    assert register_broker(leader, "after-attack") == 1
    state = cluster.wait_same_state(cluster.nodes, timeout=5)
    assert "after-attack" in groups_of(state)

    for target in attacked:
        # Refusals are logged, rate-limited: several refused frames, one line.
        wait_until(lambda t=target: _log_count(t, REFUSED_LOG) >= 1, 3.0, message="a refusal log line")
    for node in cluster.nodes:
        assert _log_count(node, REFUSED_LOG) <= 1
        assert _log_count(node, UNAUTHENTICATED_WARNING) == (0 if password else 1)


class _Recorder:
    """Wraps ``decoding.restricted_loads``/``restricted_load``: keeps what was decoded, checks it equals
    what stock pickle decodes."""

    def __init__(self) -> None:
        self.decoded: list[object] = []
        self.dumps = 0
        self.mismatches: list[bytes] = []
        self._loads = decoding.restricted_loads
        self._load = decoding.restricted_load

    def loads(self, data: bytes | str) -> object:
        value = self._loads(data)
        raw = data if isinstance(data, bytes) else data.encode()
        if value != pickle.loads(raw):
            self.mismatches.append(raw)
        self.decoded.append(value)
        return value

    def load(self, file: IO[bytes]) -> object:
        raw = file.read()
        value = self.loads(raw)
        self.dumps += 1
        return value

    def message_keys(self) -> set[str]:
        keys: set[str] = set()
        for value in self.decoded:
            message = value[1] if isinstance(value, tuple) and len(value) == 2 else value  # (key, message)
            if isinstance(message, dict):
                keys.update(f"{message.get('type')}:{key}" for key in message)
        return keys


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    wait_until(lambda: predicate() or None, timeout, interval=0.05, message=what)


@pytest.mark.parametrize("password", [None, PASSWORD], ids=["no-password", "password"])
def test_a_live_cluster_sends_only_what_the_restricted_decoder_admits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password: str | None
) -> None:
    """Three in-process members, a 200 kB entry (sent in pieces) and a member that joins late (sent
    the dump): every decode is admitted and equals the stock decode."""
    recorder = _Recorder()
    monkeypatch.setattr(decoding, "restricted_loads", recorder.loads)
    monkeypatch.setattr(decoding, "restricted_load", recorder.load)
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    tuning = RaftTuning(log_compaction_min_entries=50)
    members: list[tuple[PipelinedSyncObj, RecordConsumer, KVApplier]] = []

    def start(i: int) -> None:
        store = tmp_path / f"m{i}"
        store.mkdir()
        conf = build_conf(addresses[i], str(store), tuning, password=password)
        applier = KVApplier()
        consumer = RecordConsumer(applier)
        journal = DurableFileJournal(*store_paths(str(store)))
        partners = [a for a in addresses if a != addresses[i]]
        members.append(
            (PipelinedSyncObj(addresses[i], partners, conf, consumer, journal=journal), consumer, applier)
        )

    try:
        start(0)
        start(1)
        _wait(lambda: any(sync._isLeader() for sync, _, _ in members), 10, "a leader")
        consumer = next(c for sync, c, _ in members if sync._isLeader())
        records = [{"op": "set", "key": f"k{k}", "value": "v"} for k in range(120)]
        records.append({"op": "set", "key": "big", "value": "x" * 200_000})
        for record in records:
            consumer.apply_record(json.dumps(record).encode(), sync=True, timeout=5)
        start(2)
        _wait(lambda: members[2][2].read()["restores"] == 1, 10, "the late member restores the dump")
        consumer.apply_record(
            json.dumps({"op": "set", "key": "last", "value": "v"}).encode(), sync=True, timeout=5
        )
        _wait(lambda: members[2][2].read()["data"] == members[0][2].read()["data"], 5, "the same state")
    finally:
        for sync, _, _ in members:
            sync.destroy()

    assert not recorder.mismatches
    keys = recorder.message_keys()
    expected = {"request_vote:last_log_term", "response_vote:term", "next_node_idx:success"}
    expected |= {"append_entries:entries", "append_entries:transmission", "append_entries:serialized"}
    assert expected <= keys, expected - keys
    assert recorder.dumps >= 1
    assert members[2][2].read()["data"]["big"] == "x" * 200_000
