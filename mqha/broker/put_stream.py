"""The put stream: puts over one WebSocket on the broker's HTTP port (shell; docs/architecture.md §4.6).

``GET /v1/messages/stream`` upgrades to a WebSocket. Each binary frame the client sends is one put,
the body a ``POST /v1/messages`` would carry. The broker answers each with one binary frame, in order:
the 2-byte big-endian HTTP status that POST would have had, then its JSON reply. The put itself is
``POST /v1/messages``'s (``BrokerHttpServer.put_body``): the same checks, decoder, writes and replies.

Why: mqproxy's every send waits for one put, and a frame costs both ends about 0.07 ms of CPU less
than an HTTP request and its answer (measured on this machine; docs/performance.md §9).

The upgrade needs the credentials a put needs (``authenticationEnabled``) and is refused from its
headers as a POST would be. A frame larger than ``maxRequestBodyBytes``, a text frame or a broken
frame closes that connection only; a body that is not a put gets its error reply and the connection
stays open. A client that has sent a frame and gets no reply cannot know whether it was stored. A
stream idle for ``IDLE_CLOSE_S`` is closed, and a stopping broker closes its streams first (both with
1001 ``GOING_AWAY``), so a stop does not wait for idle clients.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec
from aiohttp import WSCloseCode, WSMsgType, web

from mqha.broker.protocol import internal_error_reply, request_error_reply
from mqha.errors import RequestError
from mqha.wire.broker_api import encode_stream_reply

log = logging.getLogger(__name__)


class PutServer(Protocol):
    """What a put stream needs of the broker's HTTP server (``mqha.broker.server``)."""

    max_body: int
    put_streams: set[web.WebSocketResponse]

    def client_refusal(self, request: web.Request, route: str) -> web.Response | None: ...

    async def put_body(
        self, read: Callable[[], Awaitable[bytes]], started: float
    ) -> tuple[int, dict[str, Any]]: ...


CLOSE_WAIT_S = 0.5
"""How long closing a put stream waits for the client's side of the closing handshake."""
IDLE_CLOSE_S = 75.0
"""A put stream without a frame for this long is closed, as aiohttp closes an idle keep-alive
connection (its ``keepalive_timeout``); clients stop reusing theirs sooner."""


async def serve_put_stream(server: PutServer, request: web.Request) -> web.StreamResponse:
    """Upgrade to the put stream and serve its puts until the client closes it."""
    refused = server.client_refusal(request, "put")
    if refused is not None:
        return refused
    stream = web.WebSocketResponse(
        max_msg_size=server.max_body,
        timeout=CLOSE_WAIT_S,
        receive_timeout=IDLE_CLOSE_S,
        autoclose=True,
        autoping=True,
        compress=False,
    )
    await stream.prepare(request)
    server.put_streams.add(stream)
    try:
        await _serve(server, stream)
    except TimeoutError:  # idle for IDLE_CLOSE_S
        await stream.close(code=WSCloseCode.GOING_AWAY, message=b"idle")
    finally:
        server.put_streams.discard(stream)
    return stream


async def close_put_streams(streams: set[web.WebSocketResponse]) -> None:
    """Close every open put stream (the broker is stopping): an idle client does not answer the
    closing handshake, so each waits ``CLOSE_WAIT_S`` at most."""
    await asyncio.gather(
        *(stream.close(code=WSCloseCode.GOING_AWAY, message=b"broker stopping") for stream in list(streams)),
        return_exceptions=True,
    )


async def _serve(server: PutServer, stream: web.WebSocketResponse) -> None:
    async for frame in stream:
        if frame.type is not WSMsgType.BINARY:  # a text frame, or aiohttp's report of a broken one
            await stream.close(code=WSCloseCode.UNSUPPORTED_DATA, message=b"put frames are binary")
            break
        started = time.perf_counter()
        data: bytes = frame.data
        try:
            status, reply = await server.put_body(functools.partial(_given, data), started)
        except RequestError as exc:
            status, reply = request_error_reply(exc)
        except Exception:
            log.exception("a put on the put stream failed")
            status, reply = internal_error_reply()
        try:
            await stream.send_bytes(encode_stream_reply(status, msgspec.json.encode(reply)))
        except ConnectionResetError:  # the client went away during its put: the put stands
            break


async def _given(data: bytes) -> bytes:
    return data
