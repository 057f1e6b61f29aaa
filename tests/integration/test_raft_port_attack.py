"""An attacker's pickled frame on a controller's Raft port executes nothing (issue 23, docs/raft.md §7.1).

Real ``mqcontroller`` processes; the attacker is a raw TCP socket sending exactly the bytes PySyncObj
0.3.17 reads as one frame: a 4-byte native-order length, then ``zlib(pickle)`` (with a password, the
zlib bytes are a Fernet token made with that password: a peer that knows it). Its first frame is
decoded before any handshake, so it is the whole attack.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import time
import zlib
from pathlib import Path

import pytest
from pysyncobj.encryptor import getEncryptor
from pysyncobj.monotonic import monotonic as raft_clock

from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.controller_cluster import (
    RAFT_PORT_OFFSET,
    ControllerCluster,
    Node,
    groups_of,
    register_broker,
)

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
        data = getEncryptor(password).encrypt_at_time(data, int(raft_clock()))
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
