"""Limits an HTTP port holds to before anyone has proved who they are (shell; docs/architecture.md §12.10).

The controller's and the broker's API serve on a ``LimitedSite``:

- at most ``httpMaxConnections`` connections at once: one more gets a canned ``503`` with code 2
  (``SYSTEM_BUSY``) and is closed, before a byte of it is read;
- a request's head must arrive within ``httpHeaderTimeoutMills`` of the connection's start or of the
  previous answer (aiohttp's keep-alive timer, which also runs before the first request): a peer that
  trickles header bytes, or sends none, is closed;
- aiohttp reads at most ``PRE_AUTH_BUFFER_BYTES`` (x2, its high-water mark) of a body ahead of the
  handler, so an unread body costs that much; the handlers check credentials from the headers before
  reading a body, read it under ``httpBodyTimeoutMills`` (``read_body``: 408 past it) and close the
  connection of a refusal after discarding what arrives of its body for ``LINGER_S`` at most (the
  controller: not at all).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from mqha.codes import ResponseCode
from mqha.config import MILLIS, POSITIVE_INT, Key

PRE_AUTH_BUFFER_BYTES = 16 * 1024
"""aiohttp's ``read_bufsize``: what it buffers of a body before the handler reads it (twice this at most)."""
LINGER_S = 1.0
"""How long the unread rest of a refused body is read and discarded before the connection closes, so
the client can read its answer rather than a reset (aiohttp's default is 10 s). The controller, whose
callers send small bodies (read ahead whole, nothing left to drain), passes 0: a flood of refused big
bodies is then not read at all."""

HTTP_LIMIT_KEYS = (
    Key(
        "httpMaxConnections",
        int,
        1024,
        "connections the HTTP API holds at once; more get 503 (code 2 SYSTEM_BUSY) and are closed",
        rule=POSITIVE_INT,
        rocketmq=False,
    ),
    Key(
        "httpHeaderTimeoutMills",
        int,
        20_000,
        "a request head must arrive within this of the connection's start or the previous answer, "
        "else the connection is closed (also the idle keep-alive time)",
        rule=MILLIS,
        rocketmq=False,
    ),
    Key(
        "httpBodyTimeoutMills",
        int,
        30_000,
        "a request body must arrive within this once its head did, else 408 and the connection closes",
        rule=MILLIS,
        rocketmq=False,
    ),
)


def runner_args(config: Mapping[str, Any], linger_s: float = LINGER_S) -> dict[str, Any]:
    """The ``web.AppRunner`` arguments of the limits (the keep-alive timer, the read-ahead, lingering)."""
    return {
        "keepalive_timeout": config["httpHeaderTimeoutMills"] / 1000,
        "read_bufsize": PRE_AUTH_BUFFER_BYTES,
        "lingering_time": linger_s,
    }


def busy_answer(limit: int) -> bytes:
    """The canned answer of a connection over ``httpMaxConnections``."""
    body = json.dumps(
        {
            "code": int(ResponseCode.SYSTEM_BUSY),
            "codeName": ResponseCode.SYSTEM_BUSY.name,
            "remark": f"too many connections: this node holds at most httpMaxConnections={limit}",
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class ConnectionStats:
    """What a ``LimitedSite`` reports to the metrics: connections refused over the cap, and open now."""

    refused: int = 0
    open: Callable[[], int] = lambda: 0


class _Refuse(asyncio.Protocol):
    """Answers a connection over the cap with the canned 503 and closes it, reading nothing."""

    def __init__(self, answer: bytes) -> None:
        self._answer = answer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(self._answer)
        transport.close()


class LimitedSite(web.BaseSite):
    """A TCP site whose connections are capped at ``max_connections`` (the rest: ``busy_answer``).

    Counted are the connections aiohttp serves (with TLS, from the end of their handshake, which
    asyncio bounds at 60 s); ``stats`` counts the refused ones and reads the open ones."""

    __slots__ = ("_host", "_max_connections", "_port", "_reuse_address", "_stats")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        max_connections: int,
        stats: ConnectionStats | None = None,
        ssl_context: Any = None,
        reuse_address: bool | None = None,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host, self._port = host, port
        self._max_connections = max_connections
        self._stats = stats or ConnectionStats()
        self._reuse_address = reuse_address

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        answer = busy_answer(self._max_connections)
        stats = self._stats
        stats.open = lambda: len(server.connections)

        def protocol() -> asyncio.Protocol:
            if len(server.connections) >= self._max_connections:
                stats.refused += 1
                return _Refuse(answer)
            return server()

        self._server = await asyncio.get_running_loop().create_server(
            protocol,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
        )


async def read_body(
    content: Any,
    limit: int,
    timeout_s: float,
    too_large: Callable[[], Exception],
    too_slow: Callable[[], Exception],
) -> bytes:
    """A request's body (``request.content``), at most ``limit`` bytes (``too_large()`` raised beyond,
    without buffering the rest), within ``timeout_s`` (``too_slow()`` raised after)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while chunk := await content.read(65536):
                size += len(chunk)
                if size > limit:
                    raise too_large()
                chunks.append(chunk)
    except TimeoutError:
        raise too_slow() from None
    return b"".join(chunks)
