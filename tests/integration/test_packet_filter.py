"""The chaos run's packet filter with real processes and the kernel's nftables
(``mqha.chaos.packet_filter``): a process started with the source-address shim connects from its own
loopback address, and a drop stops exactly its link, in the direction asked."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from mqha.chaos.netfilter import Drop, Endpoint
from mqha.chaos.packet_filter import PacketFilter, problem, shim_env

pytestmark = pytest.mark.integration

PROBE = """
import socket, sys
s = socket.socket()
s.settimeout(1.0)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"ping")
    print("ok", s.getsockname()[0], s.recv(4).decode())
except OSError as exc:
    print("cut", type(exc).__name__)
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    yield server
    server.close()


def probe(source: str, port: int, server: socket.socket) -> str:
    child = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **shim_env(source)},
    )
    try:
        for _ in range(20):  # answer the probe if its connection arrives
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if child.poll() is not None:
                    break
                continue
            with conn:
                conn.settimeout(1.5)
                with contextlib.suppress(OSError):
                    conn.sendall(conn.recv(4))
            break
        out, _ = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return out.strip()


@pytest.mark.skipif(problem() is not None, reason=str(problem()))
def test_a_drop_cuts_one_link_and_only_while_it_is_in_force(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    endpoints = {
        "a": Endpoint("127.0.0.21"),
        "b": Endpoint("127.0.0.22"),
        "server": Endpoint("127.0.0.23", (port,)),
    }
    packets = PacketFilter(endpoints, table="mqha_test_packet_filter")
    try:
        assert probe("127.0.0.21", port, listener) == "ok 127.0.0.21 ping"  # the shim's source address
        packets.apply([Drop("a", "server")])
        assert probe("127.0.0.21", port, listener).startswith("cut")
        assert probe("127.0.0.22", port, listener) == "ok 127.0.0.22 ping"  # another link is untouched
        packets.apply([Drop("server", "a")])  # only the other direction: the handshake's answer is lost
        assert probe("127.0.0.21", port, listener).startswith("cut")
        packets.apply([])
        assert probe("127.0.0.21", port, listener) == "ok 127.0.0.21 ping"
    finally:
        packets.clear()
    packets.clear()  # idempotent
