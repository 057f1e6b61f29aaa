"""Issue 45 finding 6 and issue 46 item 4 with a real controller and broker: what an anonymous peer may cost.

One ``mqcontroller`` with ``authenticationEnabled=true``. A flood of anonymous connections, each
announcing (and sending) a 1 MiB body to a broker route, must leave the controller's RSS under a bound
and a good client's p99 within 2x of its quiet figure; the connection cap, the header timeout (a
slowloris) and the body timeout are each seen doing their job. On the code before the limits the
controller read every body before looking at the ``Authorization`` header: 1,000 such connections
took it from ~60 MB to 1.1 GB.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from mqha.security.basic import basic_header
from mqha.security.credentials import InnerCredentials, User, render_inner_credentials, render_user
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster, Node

pytestmark = pytest.mark.integration

BODY = 1024 * 1024
ADMIN_TOKEN = "admin-token-0123456789"
SETTINGS = {
    "authenticationEnabled": "true",
    "innerClientAuthenticationCredentials": render_inner_credentials(
        InnerCredentials("inner", "inner-secret-01")
    ),
    "adminAuthToken": ADMIN_TOKEN,
    "httpMaxConnections": "1500",
    "httpHeaderTimeoutMills": "1500",
    "httpBodyTimeoutMills": "1500",
    "consoleMaxStreams": "4",
}
USER = User("alice", "alice-password")
RSS_GROWTH_BOUND = 64 * 1024 * 1024
"""What 1,000 anonymous 1 MiB-body connections may add to the controller's RSS (it was ~1 GB)."""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    with ProcessGroup() as group:
        cluster = ControllerCluster(group, tmp_path_factory.mktemp("flood"), size=1, settings=SETTINGS)
        cluster.start()
        yield cluster.leader(timeout=10)


def rss(node: Node) -> int:
    assert node.proc is not None
    for line in Path(f"/proc/{node.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


FLOOD = """
import asyncio, contextlib, sys
port, connections, body = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
head = (f"POST /v1/brokers/register HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n"
        f"Content-Type: application/json\\r\\nContent-Length: {body}\\r\\n\\r\\n").encode()
held = []
async def one():
    with contextlib.suppress(OSError, TimeoutError):
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 20)
        held.append(writer)
        writer.write(head + b" " * (body - 1))
        await asyncio.wait_for(writer.drain(), 20)
async def main():
    await asyncio.gather(*(one() for _ in range(connections)))
    print("sent", flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""
"""The flood, in a process of its own (its 1 GB of writes must not slow the good client's loop): each
connection announces a 1 MiB body to a broker route without credentials, sends all of it but its last
byte and stays open."""
HOLD_S = 2.0
"""How long the flood's connections are held, once sent, while the RSS is watched."""


async def _latencies(node: Node, count: int, stop: asyncio.Event | None = None) -> list[float]:
    """Sequential GETs of the metadata by one well-behaved client: seconds each."""
    seen: list[float] = []
    async with aiohttp.ClientSession() as session:
        while len(seen) < count and not (stop is not None and stop.is_set() and len(seen) >= 50):
            started = time.perf_counter()
            async with session.get(f"{node.url}/v1/controller/metadata") as response:
                await response.read()
                assert response.status == 200
            seen.append(time.perf_counter() - started)
            await asyncio.sleep(0.005)
    return seen


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def _flood(node: Node, connections: int) -> dict[str, float]:
    quiet = await _latencies(node, 200)
    before = rss(node)
    done = asyncio.Event()
    good = asyncio.ensure_future(_latencies(node, 10**9, done))
    # niced: the attacker's CPU stands for another machine's, not a share of the controller's cores
    flood = await asyncio.create_subprocess_exec(
        *("nice", "-n", "19", sys.executable, "-c", FLOOD, str(node.port), str(connections), str(BODY)),
        stdout=asyncio.subprocess.PIPE,
    )
    peak = before
    try:
        assert flood.stdout is not None
        sent = asyncio.ensure_future(flood.stdout.readline())
        held_until = None
        while held_until is None or time.monotonic() < held_until:
            peak = max(peak, rss(node))
            await asyncio.sleep(0.05)
            if held_until is None and sent.done():
                assert sent.result() == b"sent\n", sent.result()
                held_until = time.monotonic() + HOLD_S
    finally:
        flood.kill()
        await flood.wait()
    await asyncio.sleep(0.5)
    peak = max(peak, rss(node))
    done.set()
    loaded = await good
    quiet += await _latencies(node, 200)  # the baseline spans the flood: a shared machine's load drifts
    return {
        "rss_before_mb": before / 2**20,
        "rss_peak_mb": peak / 2**20,
        "rss_after_mb": rss(node) / 2**20,
        "quiet_p99_ms": p99(quiet) * 1000,
        "flood_p99_ms": p99(loaded) * 1000,
        "flood_requests": len(loaded),
        "growth": peak - before,
    }


@pytest.mark.parametrize(
    ("connections", "p99_factor"), [pytest.param(1000, 2.0, marks=pytest.mark.slow), (200, 3.0)]
)
def test_anonymous_big_bodies_cost_little_memory_and_no_latency(
    node: Node, connections: int, p99_factor: float
) -> None:
    """The issue's figure is 2x the quiet p99 (the slow run); the default run allows 3x, as a few hundred
    samples on a shared 2-core CI machine put its p99 in the noise. A 10 ms floor for the same reason."""
    figures = asyncio.run(_flood(node, connections))
    print(f"\nflood of {connections}: " + json.dumps({k: round(v, 2) for k, v in figures.items()}))
    assert figures["growth"] < RSS_GROWTH_BOUND, figures
    assert figures["flood_p99_ms"] <= max(p99_factor * figures["quiet_p99_ms"], 10.0), figures
    assert node.get("/healthz")[0] == 200


def _raw(node: Node | Broker, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", node.port), timeout=10)
    sock.sendall(data)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """What the server sends until it closes (b"" when it closes without a word)."""
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_refused_caller_is_answered_from_its_headers_and_closed(node: Node) -> None:
    head = f"POST /v1/brokers/register HTTP/1.1\r\nHost: {node.address}\r\nContent-Length: {BODY}\r\n\r\n"
    sock = _raw(node, head.encode())  # no body byte sent: the answer cannot have waited for one
    answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b'"codeName":"NO_PERMISSION"' in answer.replace(b" ", b"")


def test_a_slowloris_is_closed_after_the_header_timeout(node: Node) -> None:
    sock = _raw(node, b"GET /v1/controller/metadata HTTP/1.1\r\nHost: x\r\n")  # never ends its head
    started = time.monotonic()
    with contextlib.suppress(OSError):
        while time.monotonic() - started < 10:
            sock.sendall(b"X-A: b\r\n")
            time.sleep(0.2)
    closed_after = time.monotonic() - started
    assert closed_after < 6, closed_after  # httpHeaderTimeoutMills=1500, checked by aiohttp's timer
    idle = _raw(node, b"")
    started = time.monotonic()
    assert _answer(idle) == b""
    assert time.monotonic() - started < 6


def test_a_body_that_never_comes_gets_408(node: Node) -> None:
    head = (
        f"PUT /v1/controller/config HTTP/1.1\r\nHost: {node.address}\r\n"
        f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n{"
    )
    sock = _raw(node, head.encode())
    started = time.monotonic()
    answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"httpBodyTimeoutMills" in answer
    assert time.monotonic() - started < 6


def test_connections_over_the_cap_get_503_with_a_code(tmp_path: Path) -> None:
    with ProcessGroup() as group:
        cluster = ControllerCluster(
            group, tmp_path, size=1, settings={**SETTINGS, "httpMaxConnections": "20"}
        )
        cluster.start()
        node = cluster.leader(timeout=10)
        held = [_raw(node, b"") for _ in range(20)]
        time.sleep(0.5)  # all 20 accepted and served (waiting for a head)
        extra = _raw(node, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _answer(extra)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["codeName"] == "SYSTEM_BUSY"
        for sock in held:
            sock.close()
        wait_until(lambda: node.get("/healthz")[0] == 200, 10, interval=0.2, message="served again")
        assert (_metric(node, "mqha_controller_http_connections_refused_total") or 0) >= 1


def test_console_streams_are_capped(node: Node) -> None:
    async def streams() -> list[int]:
        async with aiohttp.ClientSession() as session:
            opened = [await session.get(f"{node.url}/v1/console/events") for _ in range(6)]
            statuses = [r.status for r in opened]
            for response in opened:
                response.close()
            return statuses

    statuses = asyncio.run(streams())
    assert statuses.count(200) == 4 and statuses.count(503) == 2, statuses


def _metric(node: Node, name: str) -> float | None:
    status, text = node.get("/metrics")
    assert status == 200
    for line in str(text).splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    return None


# ------------------------------------------------------------------------------------- the broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("broker-limits")
    with ProcessGroup() as group:
        cluster = ControllerCluster(group, base / "controllers", size=1)
        cluster.start()
        settings = {
            **BROKER_TEST_SETTINGS,
            **{k: v for k, v in SETTINGS.items() if k.startswith(("http", "authentication", "inner"))},
            "httpMaxConnections": "30",
            "initAuthenticationUser": render_user(USER),
        }
        node = Broker("b0", base / "b0", settings)
        node.start(group, cluster.leader(timeout=10).address)
        wait_until(lambda: (node.try_status() or {}).get("role") == "MASTER", 20, message="master")
        yield node


def test_the_broker_refuses_an_anonymous_put_from_its_headers(broker: Broker) -> None:
    head = f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {BODY}\r\n\r\n"
    answer = _answer(_raw(broker, head.encode()))  # no body byte sent
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_the_broker_times_out_a_slow_body_and_a_slowloris(broker: Broker) -> None:
    head = (
        f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: {basic_header(USER)}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    started = time.monotonic()
    answer = _answer(_raw(broker, head.encode()))
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - started < 6
    started = time.monotonic()
    assert _answer(_raw(broker, b"GET /v1/status HTTP/1.1\r\n")) == b""  # a head that never ends
    assert time.monotonic() - started < 6


def test_the_broker_caps_its_connections(broker: Broker) -> None:
    held = [_raw(broker, b"") for _ in range(30)]
    time.sleep(0.5)
    answer = _answer(_raw(broker, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["codeName"] == "SYSTEM_BUSY"
    for sock in held:
        sock.close()
    wait_until(lambda: broker.try_status() is not None, 10, interval=0.2, message="served again")
    refused = [
        line
        for line in broker.metrics_text().splitlines()
        if line.startswith("mqha_broker_http_connections_refused")
    ]
    assert refused and float(refused[0].rsplit(" ", 1)[1]) >= 1, refused
