"""The load generator's HTTP/1.1 client: keep-alive JSON requests with aiohttp's own response parser.

Why not aiohttp's ``ClientSession``: it spends ~150 us of CPU per request; on a 2-core machine shared
with the servers under test that was ~30 % of a core at 2,000 requests/s, taken from whatever the run
measures. Why not h11: its pure-Python state machine cost ~100 us of client CPU per request against
~50 us for the hand-written framing it replaced (measured side by side); aiohttp's parser (llhttp, in
C, exported by ``aiohttp.http``) reads a response in ~3 us and is already a dependency. The request
head is four fixed header lines, written here, plus the headers of an optional ``signer`` (the proof of
one request with authentication on; without one the bytes sent are exactly the four lines).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiohttp.http import HttpProcessingError, HttpResponseParser

from mqha.client.http1 import read_response, response_parser
from mqha.controller_client.caller import Signer


class LeanHttp:
    """Sends keep-alive JSON requests for one closed-loop client, one request at a time.

    One connection per host:port. Transport and framing errors raise ``ConnectionResetError`` (an
    ``OSError``) and drop the connection; the next request opens a new one.
    """

    def __init__(self) -> None:
        self._conns: dict[str, tuple[asyncio.StreamReader, asyncio.StreamWriter, HttpResponseParser]] = {}

    async def request(
        self,
        method: str,
        url: str,
        body: Any = None,
        timeout: float | None = None,
        signer: Signer | None = None,
    ) -> tuple[int, Any]:
        """(status, decoded JSON body or None) of one request; ``signer`` adds its headers, computed
        over exactly the target and body bytes sent."""
        origin, _, path = url.removeprefix("http://").partition("/")
        payload = b"" if body is None else msgspec.json.encode(body)
        proof = ""
        if signer is not None:
            proof = "".join(
                f"{name}: {value}\r\n" for name, value in signer(method, origin, "/" + path, payload).items()
            )
        head = (
            f"{method} /{path} HTTP/1.1\r\nHost: {origin}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n{proof}\r\n"
        )
        try:
            async with asyncio.timeout(timeout):
                reader, writer, parser = await self._connection(origin)
                writer.write(head.encode("ascii") + payload)
                status, data, keep_alive = await read_response(reader, parser)
        except (TimeoutError, OSError, HttpProcessingError, ValueError) as exc:
            self._drop(origin)
            if isinstance(exc, TimeoutError | OSError):
                raise
            raise ConnectionResetError(f"{url}: {exc!r}") from exc
        if not keep_alive:
            self._drop(origin)
        return status, msgspec.json.decode(data) if data.strip() else None

    async def _connection(
        self, origin: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, HttpResponseParser]:
        conn = self._conns.get(origin)
        if conn is None or conn[1].is_closing():
            host, _, port = origin.rpartition(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            conn = self._conns[origin] = (reader, writer, response_parser())
        return conn

    def _drop(self, origin: str) -> None:
        conn = self._conns.pop(origin, None)
        if conn is not None:
            conn[1].transport.abort()

    def close(self) -> None:
        for origin in list(self._conns):
            self._drop(origin)
