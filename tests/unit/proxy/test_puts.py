"""The proxy's puts (mqha.proxy.puts.BrokerConnections: put streams, keep-alive HTTP/1.1 POSTs) against
real servers on 127.0.0.1: aiohttp web servers as the brokers run them, and bare sockets for the
failures -- nothing to connect to means not sent, a request written without a complete answer means no
answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from mqha.proxy import put_streams
from mqha.proxy.errors import NoAnswer, NotSent
from mqha.proxy.puts import BrokerConnections
from mqha.wire.broker_api import PUT_PATH, PUT_STREAM_PATH, encode_stream_reply
from tests.helpers.processes import free_port
from tests.helpers.run_async import run_async


@asynccontextmanager
async def web_server(keepalive_timeout: float = 75.0) -> AsyncIterator[tuple[str, list[int]]]:
    """An aiohttp server echoing the request body; the client ports it saw, one per request."""
    ports: list[int] = []

    async def echo(request: web.Request) -> web.StreamResponse:
        ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        body = await request.read()
        if request.query.get("chunked"):
            response = web.StreamResponse(status=201)
            response.enable_chunked_encoding()
            await response.prepare(request)
            for part in (body[:3], body[3:]):
                await response.write(part)
            await response.write_eof()
            return response
        if request.query.get("auth"):
            return web.Response(text=request.headers.get("Authorization", ""))
        return web.Response(body=body, status=200)

    app = web.Application()
    app.router.add_post("/v1/messages", echo)
    async with serving(app, keepalive_timeout=keepalive_timeout) as address:
        yield address, ports


@asynccontextmanager
async def serving(app: web.Application, **runner_options: Any) -> AsyncIterator[str]:
    """``app`` served on 127.0.0.1; its ``host:port``."""
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@run_async(30)
async def test_answers_come_back_and_one_connection_carries_consecutive_puts() -> None:
    connections = BrokerConnections({"Authorization": "Basic eDp5"})
    async with web_server() as (address, ports):
        for i in range(3):
            status, body = await connections.post(
                address, "/v1/messages", f'{{"n":{i}}}'.encode(), timeout_s=5, connect_timeout_s=1
            )
            assert (status, body) == (200, f'{{"n":{i}}}'.encode())
        status, body = await connections.post(
            address, "/v1/messages?chunked=1", b"chunked body", timeout_s=5, connect_timeout_s=1
        )
        assert (status, body) == (201, b"chunked body")
        _, auth = await connections.post(
            address, "/v1/messages?auth=1", b"", timeout_s=5, connect_timeout_s=1
        )
        assert auth == b"Basic eDp5"
        assert len(set(ports)) == 1
    await connections.close()


@run_async(30)
async def test_a_connection_the_broker_closed_while_idle_is_not_reused() -> None:
    connections = BrokerConnections()
    async with web_server(keepalive_timeout=0.2) as (address, ports):
        assert (await connections.post(address, "/v1/messages", b"1", timeout_s=5, connect_timeout_s=1))[
            0
        ] == 200
        await asyncio.sleep(0.6)  # the server closed it by now
        assert (await connections.post(address, "/v1/messages", b"2", timeout_s=5, connect_timeout_s=1))[
            0
        ] == 200
        assert len(set(ports)) == 2
    await connections.close()


@run_async(30)
async def test_nothing_listening_is_not_sent() -> None:
    with pytest.raises(NotSent):
        await BrokerConnections().post(
            f"127.0.0.1:{free_port()}", "/v1/messages", b"{}", timeout_s=1, connect_timeout_s=0.5
        )


@asynccontextmanager
async def raw_server(behaviour: str) -> AsyncIterator[str]:
    """Reads a request, then never answers ("silent") or closes the connection ("close")."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if behaviour == "close":
            writer.close()
            return
        await asyncio.sleep(10)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()


@pytest.mark.parametrize("behaviour", ["silent", "close"])
def test_a_written_request_without_an_answer_is_no_answer(behaviour: str) -> None:
    @run_async(30)
    async def run() -> None:
        async with raw_server(behaviour) as address:
            with pytest.raises(NoAnswer):
                await BrokerConnections().post(
                    address, "/v1/messages", b"{}", timeout_s=0.3, connect_timeout_s=0.5
                )

    run()


@asynccontextmanager
async def stream_server(
    behaviour: str = "echo", *, with_stream: bool = True, needs_auth: bool = False
) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """A broker-like server: POST /v1/messages echoes with status 200, and (``with_stream``) the put
    stream answers each frame by ``behaviour`` -- "echo" (status 200, the frame back), "close" (closes
    without a reply), "short" (a reply without a status), "idle-close" (echoes, then drops the
    connection 0.1 s later, as a broker process that died). Counts what it saw: upgrades, frames, posts."""
    seen = {"upgrades": 0, "frames": 0, "posts": 0}

    async def post(request: web.Request) -> web.Response:
        seen["posts"] += 1
        if needs_auth and "Authorization" not in request.headers:
            return web.Response(status=401, body=b'{"code":16}')
        return web.Response(body=await request.read())

    async def stream(request: web.Request) -> web.StreamResponse:
        seen["upgrades"] += 1
        if needs_auth and "Authorization" not in request.headers:
            return web.Response(status=401)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for frame in ws:
            seen["frames"] += 1
            if behaviour == "close":
                break
            await ws.send_bytes(b"\x00" if behaviour == "short" else encode_stream_reply(200, frame.data))
            if behaviour == "idle-close":
                await asyncio.sleep(0.1)
                assert request.transport is not None
                request.transport.close()
                break
        return ws

    app = web.Application()
    app.router.add_post(PUT_PATH, post)
    if with_stream:
        app.router.add_get(PUT_STREAM_PATH, stream)
    async with serving(app) as address:
        yield address, seen


async def _put(connections: BrokerConnections, address: str, body: bytes) -> tuple[int, bytes]:
    return await connections.put(address, body, timeout_s=2, connect_timeout_s=1)


@run_async(30)
async def test_puts_go_over_one_put_stream_when_the_broker_has_one() -> None:
    connections = BrokerConnections()
    async with stream_server() as (address, seen):
        for i in range(3):
            assert await _put(connections, address, b'{"n":%d}' % i) == (200, b'{"n":%d}' % i)
        assert seen == {"upgrades": 1, "frames": 3, "posts": 0}
        await connections.close()


@run_async(30)
async def test_a_broker_without_a_put_stream_gets_posts_and_no_second_upgrade() -> None:
    connections = BrokerConnections()
    async with stream_server(with_stream=False) as (address, seen):
        for i in range(3):
            assert await _put(connections, address, b'{"n":%d}' % i) == (200, b'{"n":%d}' % i)
        assert seen["posts"] == 3
        assert not connections._streams.available(address)
    await connections.close()


@run_async(30)
async def test_a_refused_upgrade_makes_the_put_a_post_that_says_why() -> None:
    connections = BrokerConnections()
    async with stream_server(needs_auth=True) as (address, seen):
        assert await _put(connections, address, b"{}") == (401, b'{"code":16}')
        assert seen == {"upgrades": 1, "frames": 0, "posts": 1}
        assert connections._streams.available(address)  # tried again next time: not a missing route
    await connections.close()


@pytest.mark.parametrize("behaviour", ["close", "short"])
def test_a_frame_sent_without_a_reply_frame_is_no_answer(behaviour: str) -> None:
    @run_async(30)
    async def run() -> None:
        connections = BrokerConnections()
        async with stream_server(behaviour) as (address, seen):
            with pytest.raises(NoAnswer):
                await _put(connections, address, b"{}")
            assert seen["posts"] == 0
        await connections.close()

    run()


@run_async(30)
async def test_a_put_stream_the_broker_closed_while_idle_is_not_reused() -> None:
    connections = BrokerConnections()
    async with stream_server("idle-close") as (address, seen):
        assert await _put(connections, address, b"1") == (200, b"1")
        await asyncio.sleep(0.5)  # the server closed it by now
        assert await _put(connections, address, b"2") == (200, b"2")
        assert seen == {"upgrades": 2, "frames": 2, "posts": 0}
    await connections.close()


@run_async(30)
async def test_no_put_stream_to_open_is_not_sent() -> None:
    connections = BrokerConnections()
    with pytest.raises(NotSent):
        await connections.put(f"127.0.0.1:{free_port()}", b"{}", timeout_s=1, connect_timeout_s=0.5)
    await connections.close()


def test_a_put_stream_idle_too_long_is_closed_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(put_streams, "REUSE_IDLE_S", 0.2)

    @run_async(30)
    async def run() -> None:
        connections = BrokerConnections()
        async with stream_server() as (address, seen):
            assert await _put(connections, address, b"1") == (200, b"1")
            await asyncio.sleep(0.3)
            assert await _put(connections, address, b"2") == (200, b"2")
            assert seen == {"upgrades": 2, "frames": 2, "posts": 0}
            await connections.close()

    run()


def test_streams_to_an_address_no_longer_put_to_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed-over master's address may never be put to again: a put elsewhere, once streams have
    been idle for REUSE_IDLE_S, closes them rather than keeping their sockets."""
    monkeypatch.setattr(put_streams, "REUSE_IDLE_S", 0.2)

    @run_async(30)
    async def run() -> None:
        connections = BrokerConnections()
        async with stream_server() as (old, _), stream_server() as (new, seen):
            assert await _put(connections, old, b"1") == (200, b"1")
            (old_stream, _since), *others = connections._streams._idle[old]
            assert not others
            await asyncio.sleep(0.3)
            assert await _put(connections, new, b"2") == (200, b"2")
            assert old not in connections._streams._idle
            await asyncio.sleep(0.1)  # the close handshake runs in the background
            assert old_stream.closed
            assert await _put(connections, new, b"3") == (200, b"3")  # the fresh one is kept
            assert seen == {"upgrades": 1, "frames": 2, "posts": 0}
            await connections.close()

    run()
