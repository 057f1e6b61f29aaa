"""The broker's put stream (``GET /v1/messages/stream``, docs/architecture.md §4.6) on real sockets,
in process: puts as WebSocket frames answer what the same POST would, on one connection; a bad put
gets its error and the stream goes on; a text frame, an oversized frame or a broken frame closes that
stream only; the upgrade needs a put's credentials; idle streams are closed, and a stop does not wait
for them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mqha.broker import put_stream
from mqha.wire.broker_api import PUT_STREAM_PATH, decode_stream_reply
from tests.integration.ha_nodes import Node
from tests.integration.test_broker_api import call, run_async

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def broker(tmp_path: Path, *, epoch: int | None = 1, **overrides: Any) -> AsyncIterator[Node]:
    """A broker serving its HTTP API: the master of ``epoch``, or fenced (None)."""
    node = await Node.start(tmp_path / "a", 1, http=True, **overrides)
    try:
        if epoch is not None:
            assert await node.become_master(epoch)
        yield node
    finally:
        await node.stop()


@contextlib.asynccontextmanager
async def opened(
    node: Node, headers: Mapping[str, str] | None = None
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(node.url + PUT_STREAM_PATH, headers=headers) as stream,
    ):
        yield stream


async def put(
    stream: aiohttp.ClientWebSocketResponse, body: Any, raw: bytes | None = None
) -> tuple[int, Any]:
    await stream.send_bytes(raw if raw is not None else json.dumps(body).encode())
    frame = await stream.receive(timeout=10)
    assert frame.type is aiohttp.WSMsgType.BINARY, frame
    status, reply = decode_stream_reply(frame.data)
    return status, json.loads(reply)


async def closed_with(stream: aiohttp.ClientWebSocketResponse, code: int) -> aiohttp.WSMessage:
    frame = await stream.receive(timeout=5)
    assert frame.type is aiohttp.WSMsgType.CLOSE and frame.data == code, frame
    return frame


@run_async
async def test_puts_on_one_stream_answer_as_posts_and_are_stored(tmp_path: Path) -> None:
    async with broker(tmp_path, epoch=3) as node:
        async with opened(node) as stream:
            status, one = await put(stream, {"topic": "orders", "body": "first", "keys": "k1"})
            assert status == 200
            assert (one["code"], one["status"], one["offset"], one["epoch"]) == (0, "PUT_OK", 0, 3)
            status, batch = await put(
                stream, {"messages": [{"topic": "orders", "body": "b1"}, {"topic": "orders", "body": "b2"}]}
            )
            first, second = batch["results"]
            assert status == 200 and first["offset"] == one["size"]
            assert second["offset"] == first["offset"] + first["size"]
        status, _ = await call("POST", f"{node.url}/v1/messages", {"topic": "orders", "body": "third"})
        assert status == 200
        status, read = await call("GET", f"{node.url}/v1/messages?offset=0&maxMessages=10")
        assert status == 200 and [m["body"] for m in read["messages"]] == ["first", "b1", "b2", "third"]


def open_streams(node: Node) -> float:
    """``mqha_broker_put_streams`` as the broker's metrics show it."""
    line = next(
        line
        for line in node.http.metrics.render().decode().splitlines()
        if line.startswith("mqha_broker_put_streams{")
    )
    return float(line.rsplit(" ", 1)[1])


@run_async
async def test_the_open_streams_are_a_metric(tmp_path: Path) -> None:
    async with broker(tmp_path) as node:
        assert open_streams(node) == 0
        async with opened(node) as first, opened(node):
            assert (await put(first, {"topic": "t", "body": "x"}))[0] == 200
            assert open_streams(node) == 2
        deadline = time.monotonic() + 5
        while open_streams(node) and time.monotonic() < deadline:  # the broker sees the close shortly
            await asyncio.sleep(0.01)
        assert open_streams(node) == 0


@run_async
async def test_a_bad_put_gets_its_error_and_the_stream_goes_on(tmp_path: Path) -> None:
    async with broker(tmp_path) as node, opened(node) as stream:
        status, reply = await put(stream, {"topic": "t", "body": 42})
        assert status == 400 and reply["code"] == 13 and "field 'body'" in reply["remark"]
        status, reply = await put(stream, None, raw=b"{not json")
        assert status == 400 and "not JSON" in reply["remark"]
        assert node.store.max_offset == 0
        status, reply = await put(stream, {"topic": "t", "body": "still serving"})
        assert status == 200 and reply["offset"] == 0


@run_async
async def test_a_fenced_broker_answers_each_frame_503(tmp_path: Path) -> None:
    async with broker(tmp_path, epoch=None) as node, opened(node) as stream:
        status, reply = await put(stream, {"topic": "t", "body": "x"})
        assert status == 503 and reply["code"] == 14 and "fenced" in reply["remark"]


@run_async
async def test_a_text_or_oversized_frame_closes_that_stream_only_and_writes_nothing(tmp_path: Path) -> None:
    async with broker(tmp_path, maxRequestBodyBytes=64 * 1024) as node:
        async with opened(node) as stream:
            await stream.send_str(json.dumps({"topic": "t", "body": "as text"}))
            await closed_with(stream, aiohttp.WSCloseCode.UNSUPPORTED_DATA)
        async with opened(node) as stream:
            await stream.send_bytes(json.dumps({"topic": "t", "body": "x" * 70_000}).encode())
            await closed_with(stream, aiohttp.WSCloseCode.MESSAGE_TOO_BIG)
        assert node.store.max_offset == 0
        async with opened(node) as stream:
            status, reply = await put(stream, {"topic": "t", "body": "after"})
            assert status == 200 and reply["offset"] == 0


def _broken_frame(port: int) -> bytes:
    """Upgrade by hand, send a frame with a reserved opcode; what the broker answers before closing."""
    key = base64.b64encode(b"0123456789abcdef").decode()
    head = (
        f"GET {PUT_STREAM_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 101"), answer
        sock.sendall(bytes([0x83, 0x80]) + b"mask")  # FIN, opcode 3 (reserved), masked, empty
        rest = b""
        while True:
            data = sock.recv(4096)
            if not data:
                return rest
            rest += data


@run_async
async def test_a_broken_frame_closes_that_stream_and_the_broker_keeps_serving(tmp_path: Path) -> None:
    async with broker(tmp_path) as node:
        assert node.http is not None and node.http.bound_port is not None
        closing = await asyncio.to_thread(_broken_frame, node.http.bound_port)
        assert closing[:1] == b"\x88"  # a CLOSE frame, then the connection ends
        status, reply = await call("POST", f"{node.url}/v1/messages", {"topic": "t", "body": "after"})
        assert status == 200 and reply["offset"] == 0


@run_async
async def test_the_upgrade_needs_the_credentials_a_put_needs(tmp_path: Path) -> None:
    user = {"username": "alice", "password": "alice-password-1"}
    inner = {"accessKey": "brokers", "secretKey": "inner-secret-1"}
    settings = {
        "authenticationEnabled": "true",
        "initAuthenticationUser": json.dumps(user),
        "innerClientAuthenticationCredentials": json.dumps(inner),
    }
    async with broker(tmp_path, **settings) as node:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            async with opened(node):
                pass
        assert refused.value.status == 401
        good = "Basic " + base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        async with opened(node, {"Authorization": good}) as stream:
            status, reply = await put(stream, {"topic": "t", "body": "with credentials"})
            assert status == 200 and reply["offset"] == 0


def test_a_stream_idle_too_long_is_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(put_stream, "IDLE_CLOSE_S", 0.3)

    @run_async
    async def run() -> None:
        async with broker(tmp_path) as node, opened(node) as stream:
            status, _ = await put(stream, {"topic": "t", "body": "x"})
            assert status == 200
            frame = await closed_with(stream, aiohttp.WSCloseCode.GOING_AWAY)  # nothing sent for 0.3 s
            assert frame.extra == "idle"

    run()


@run_async
async def test_a_stop_closes_idle_put_streams_without_waiting_for_them(tmp_path: Path) -> None:
    node = await Node.start(tmp_path / "a", 1, http=True)
    stopped = False
    try:
        assert await node.become_master(1)
        async with opened(node) as stream:
            status, _ = await put(stream, {"topic": "t", "body": "x"})
            assert status == 200
            started = time.monotonic()
            await node.stop()  # the stream stays idle: this client never answers the closing handshake
            stopped = True
            assert time.monotonic() - started < 1.5
            await closed_with(stream, aiohttp.WSCloseCode.GOING_AWAY)
    finally:
        if not stopped:
            await node.stop()
