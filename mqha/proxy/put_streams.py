"""The proxy's put streams: its puts as frames over brokers' put streams (shell; docs/architecture.md §13).

A broker's put stream (``mqha.broker.put_stream``) is a WebSocket on its HTTP port that carries
``POST /v1/messages`` bodies as frames and answers each with a frame. A frame costs both ends about
0.07 ms of CPU less than an HTTP request. Every send through the proxy waits for one put, so the
proxy uses streams where it can.

- Streams are kept per broker address and reused. Each carries one put at a time, as a keep-alive
  connection does. One idle for ``REUSE_IDLE_S`` is closed instead of reused, and at most that often
  the streams idle that long to every address are closed: after a failover the old master's address
  may never be put to again (a restarted pod gets a new one), and its streams would hold sockets.
- A broker that answers the upgrade with 404 or 405 has no put stream (it is older). It gets POSTs for
  ``NO_STREAM_RETRY_S``, and then the upgrade is tried again.
- Any other refusal of the upgrade (401, 503, ...) makes this put a POST, and the POST's answer says
  why.

A failure means what it means for a POST: no stream opened -> nothing was sent; a frame sent and no
reply frame -> the outcome is unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp

from mqha.client.results import describe
from mqha.proxy.errors import NoAnswer, NotSent
from mqha.wire.broker_api import PUT_STREAM_PATH, decode_stream_reply

NO_STREAM_RETRY_S = 60.0
"""How long a broker without a put stream gets POSTs before the upgrade is tried again."""
_IDLE_PER_ADDRESS = 64
REUSE_IDLE_S = 60.0
"""A stream idle this long is closed, not reused: a broker closes one idle for 75 s
(``mqha.broker.put_stream.IDLE_CLOSE_S``), and a put on a stream the broker is closing has no answer."""
_CLOSE_WAIT_S = 1.0
_NO_STREAM = frozenset({404, 405})


class PutStreams:
    """Put streams to brokers, by ``host:port``."""

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        self._headers = dict(headers or {})
        self._session: aiohttp.ClientSession | None = None
        self._idle: dict[str, list[tuple[aiohttp.ClientWebSocketResponse, float]]] = {}  # and when idle since
        self._none_until: dict[str, float] = {}
        self._closing: set[asyncio.Task[bool]] = set()
        self._swept = 0.0  # loop time of the last sweep of idle streams

    def available(self, address: str) -> bool:
        """False while ``address`` is known to have no put stream."""
        until = self._none_until.get(address)
        if until is None:
            return True
        if asyncio.get_running_loop().time() < until:
            return False
        del self._none_until[address]
        return True

    async def put(
        self, address: str, body: bytes, *, timeout_s: float, connect_timeout_s: float
    ) -> tuple[int, bytes] | None:
        """Put ``body`` over a stream to ``address``; the status and the JSON reply, or None when the
        broker has no stream or refused it (POST instead). Raises :class:`NotSent` or :class:`NoAnswer`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        stream = self._take(address)
        if stream is None:
            stream = await self._open(address, min(connect_timeout_s, timeout_s))
            if stream is None:
                return None
        try:
            await stream.send_bytes(body)
            async with asyncio.timeout_at(deadline):
                frame = await stream.receive()
        except TimeoutError:  # before OSError, its base class
            self._discard(stream)
            raise NoAnswer(f"no answer within {timeout_s:.3f} s") from None
        except (OSError, aiohttp.ClientError, RuntimeError) as exc:  # RuntimeError: sent on a closed one
            self._discard(stream)
            raise NoAnswer(describe(exc)) from exc
        except BaseException:  # cancelled mid-put: the stream's state is unknown
            self._discard(stream)
            raise
        if frame.type is not aiohttp.WSMsgType.BINARY:
            self._discard(stream)
            raise NoAnswer(f"the put stream ended ({frame.type.name}: {frame.extra or frame.data})")
        try:
            answer = decode_stream_reply(frame.data)
        except ValueError as exc:
            self._discard(stream)
            raise NoAnswer(str(exc)) from exc
        self._give_back(address, stream)
        return answer

    def _take(self, address: str) -> aiohttp.ClientWebSocketResponse | None:
        idle = self._idle.get(address)
        now = asyncio.get_running_loop().time()
        while idle:
            stream, since = idle.pop()
            # A stream the broker closed while idle (a restart) has lost its transport by now.
            if now - since < REUSE_IDLE_S and not stream.closed and stream.get_extra_info("peername"):
                return stream
            self._discard(stream)
        return None

    def _give_back(self, address: str, stream: aiohttp.ClientWebSocketResponse) -> None:
        now = asyncio.get_running_loop().time()
        idle = self._idle.setdefault(address, [])
        if len(idle) < _IDLE_PER_ADDRESS:
            idle.append((stream, now))
        else:
            self._discard(stream)
        if now - self._swept >= REUSE_IDLE_S:
            self._swept = now
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        """Close the streams idle for ``REUSE_IDLE_S`` at every address (module docstring)."""
        for address, idle in list(self._idle.items()):
            fresh = []
            for stream, since in idle:
                if now - since < REUSE_IDLE_S:
                    fresh.append((stream, since))
                else:
                    self._discard(stream)
            if fresh:
                self._idle[address] = fresh
            else:
                del self._idle[address]

    async def _open(self, address: str, timeout_s: float) -> aiohttp.ClientWebSocketResponse | None:
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        try:
            async with asyncio.timeout(max(0.001, timeout_s)):
                return await self._session.ws_connect(
                    f"http://{address}{PUT_STREAM_PATH}",
                    headers=self._headers,
                    autoping=True,
                    timeout=aiohttp.ClientWSTimeout(ws_close=_CLOSE_WAIT_S),
                )
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status in _NO_STREAM:
                self._none_until[address] = asyncio.get_running_loop().time() + NO_STREAM_RETRY_S
            return None
        except TimeoutError:
            raise NotSent(f"opening a put stream to {address}: none within {timeout_s:.3f} s") from None
        except (OSError, aiohttp.ClientError) as exc:
            raise NotSent(f"opening a put stream to {address}: {describe(exc)}") from exc

    def _discard(self, stream: aiohttp.ClientWebSocketResponse) -> None:
        """Close ``stream`` in the background (its closing handshake waits for the broker)."""
        task = asyncio.ensure_future(stream.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for idle in self._idle.values():
            for stream, _ in idle:
                self._discard(stream)
        self._idle.clear()
        await asyncio.gather(*self._closing, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
