"""Reading HTTP/1.1 responses off a keep-alive connection with aiohttp's own parser (shell helpers).

aiohttp's parser (llhttp, in C, exported by ``aiohttp.http``) reads a response in ~3 us; its
``ClientSession`` around it costs ~150 us of CPU per request. The lean clients that write their own
request heads -- the load generator's (``mqha.bench.lean_http``) and mqproxy's puts to brokers
(``mqha.proxy.puts``) -- read their answers with these.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.http import HttpProcessingError, HttpResponseParser

# A body larger than this would make the parser ask for flow control, which this client does not do
# (it drains the body after every read); controller, etcd and broker put answers are a few KiB at most.
_BODY_LIMIT = 1 << 22


class _NoFlowControl:
    """Stands in for the aiohttp protocol that the parser's payload buffer reports to.

    The client reads one response at a time and drains it at once, so pausing the transport is never
    needed.
    """

    connected = True
    _reading_paused = False

    def pause_reading(self, *args: Any, **kwargs: Any) -> None:
        pass

    def resume_reading(self, *args: Any, **kwargs: Any) -> None:
        pass


def response_parser() -> HttpResponseParser:
    """The parser of one connection's responses (kept for the connection: a new one costs ~5 us)."""
    loop = asyncio.get_running_loop()
    return HttpResponseParser(_NoFlowControl(), loop, _BODY_LIMIT, read_until_eof=True, auto_decompress=False)


async def read_response(reader: asyncio.StreamReader, parser: HttpResponseParser) -> tuple[int, bytes, bool]:
    """Status, body and "the connection may be reused" of the next response on a connection (any
    framing llhttp reads). The stream ending before a complete response, or bad framing, raises
    ``HttpProcessingError``."""
    body: list[bytes] = []
    message = payload = None
    while payload is None or not payload.is_eof():
        data = await reader.read(65536)
        if data:
            messages, _, _ = parser.feed_data(data)
            if messages:
                message, payload = messages[0]
        else:
            parser.feed_eof()  # raises on a short body; ends a close-delimited one
            if payload is None:
                raise HttpProcessingError(message="connection closed before a response")
        if payload is not None:
            if payload.exception() is not None:
                raise HttpProcessingError(message=str(payload.exception()))
            body.append(payload.read_nowait(-1))
    assert message is not None
    return message.code, b"".join(body), not message.should_close
