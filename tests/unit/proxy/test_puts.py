"""The proxy's keep-alive HTTP/1.1 puts (mqha.proxy.puts.BrokerConnections) against real servers on
127.0.0.1: an aiohttp web server as the brokers run it, and bare sockets for the failures -- nothing
to connect to means not sent, a request written without a complete answer means no answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from mqha.proxy.puts import BrokerConnections, NoAnswer, NotSent
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
    runner = web.AppRunner(app, keepalive_timeout=keepalive_timeout)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"127.0.0.1:{port}", ports
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
    connections.close()


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
    connections.close()


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
