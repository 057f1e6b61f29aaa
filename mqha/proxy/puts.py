"""The proxy's puts to a group's master: mqha's own failover producer over the proxy's own transport
(shell; docs/architecture.md §13).

Every send through the proxy pays one put on its critical path. :class:`PutProducer` is mqha's
:class:`~mqha.client.producer.Producer` (route from the controllers, retries with the same msgId,
refused / unknown / stored, holding until the deadline) with only the one put exchanged over
:class:`BrokerConnections`. A put goes as a frame over the master's put stream
(``mqha.proxy.put_streams``, docs/architecture.md §4.6). Where the broker has none, it is POSTed over
a keep-alive HTTP/1.1 connection written and read directly: aiohttp's client spent about 0.18 ms of CPU
per put more (measured against a broker on this machine). Each connection carries one request at a
time, connections are kept per master address and reused while the broker keeps them open, and
answers are read with aiohttp's own parser (``mqha.client.http1``, as the benchmarks' lean client).

What a failure means is what the producer expects of any transport: no connection (refused, timed
out connecting) -> nothing was sent, retry anywhere; the request written and no complete answer
(reset, EOF, timeout) -> the outcome is unknown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import msgspec
from aiohttp.http import HttpProcessingError

from mqha.client.http1 import read_response, response_parser
from mqha.client.producer import Producer, _Attempt, classify_reply
from mqha.client.results import Route, describe
from mqha.proxy.errors import NoAnswer, NotSent
from mqha.proxy.put_streams import PutStreams
from mqha.wire.broker_api import PUT_PATH

_IDLE_PER_ADDRESS = 64


class _Connection:
    """One keep-alive connection to a broker and the parser of its answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = response_parser()

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.transport.is_closing()

    def close(self) -> None:
        self.writer.close()


class BrokerConnections:
    """Put streams and keep-alive connections to brokers, by ``host:port``.

    Each carries one request at a time."""

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._extra_headers = extra.encode("latin-1")
        self._idle: dict[str, list[_Connection]] = {}
        self._streams = PutStreams(headers)

    async def put(
        self, address: str, body: bytes, *, timeout_s: float, connect_timeout_s: float
    ) -> tuple[int, bytes]:
        """One put to ``address``: over its put stream (``mqha.proxy.put_streams``), else POSTed; the
        status and the JSON reply. Raises :class:`NotSent` or :class:`NoAnswer`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._streams.available(address):
            answer = await self._streams.put(
                address, body, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s
            )
            if answer is not None:
                return answer
        return await self.post(
            address,
            PUT_PATH,
            body,
            timeout_s=max(0.001, deadline - loop.time()),
            connect_timeout_s=connect_timeout_s,
        )

    async def post(
        self, address: str, path: str, body: bytes, *, timeout_s: float, connect_timeout_s: float
    ) -> tuple[int, bytes]:
        """POST ``body`` (JSON) to ``address``; the status and the body of the answer. Raises
        :class:`NotSent` or :class:`NoAnswer`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        connection = self._take(address)
        if connection is None:
            connection = await self._connect(address, min(connect_timeout_s, timeout_s))
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        ).encode("latin-1")
        try:
            connection.writer.write(head + self._extra_headers + b"\r\n" + body)
            async with asyncio.timeout_at(deadline):
                status, answer, keep = await read_response(connection.reader, connection.parser)
        except TimeoutError:  # before OSError, its base class
            connection.close()
            raise NoAnswer(f"no answer within {timeout_s:.3f} s") from None
        except (OSError, HttpProcessingError, ValueError) as exc:
            connection.close()
            raise NoAnswer(describe(exc)) from exc
        except BaseException:  # cancelled mid-request: the connection's state is unknown
            connection.close()
            raise
        if keep:
            self._give_back(address, connection)
        else:
            connection.close()
        return status, answer

    def _take(self, address: str) -> _Connection | None:
        idle = self._idle.get(address)
        while idle:
            connection = idle.pop()
            if connection.usable():
                return connection
            connection.close()  # closed by the broker while idle (its keep-alive timeout, a restart)
        return None

    def _give_back(self, address: str, connection: _Connection) -> None:
        idle = self._idle.setdefault(address, [])
        if len(idle) < _IDLE_PER_ADDRESS:
            idle.append(connection)
        else:
            connection.close()

    @staticmethod
    async def _connect(address: str, timeout_s: float) -> _Connection:
        host, _, port = address.rpartition(":")
        try:
            async with asyncio.timeout(max(0.001, timeout_s)):
                reader, writer = await asyncio.open_connection(host, int(port))
        except TimeoutError:
            raise NotSent(f"connecting to {address}: no connection within {timeout_s:.3f} s") from None
        except (OSError, ValueError) as exc:
            raise NotSent(f"connecting to {address}: {describe(exc)}") from exc
        return _Connection(reader, writer)

    async def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
        await self._streams.close()


class PutProducer(Producer):
    """mqha's producer whose puts go over :class:`BrokerConnections`.

    Plain HTTP: the proxy does not speak TLS to brokers (docs/architecture.md §13)."""

    def __init__(self, *args: Any, connections: BrokerConnections, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections = connections

    async def _post(self, route: Route, payload: dict[str, Any], deadline: float) -> _Attempt:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _Attempt("refused", error="send deadline passed")
        try:
            status, answer = await self._connections.put(
                route.master_address,
                msgspec.json.encode(payload),
                timeout_s=min(self.request_timeout, remaining),
                connect_timeout_s=self.connect_timeout,
            )
        except NotSent as exc:
            return _Attempt("refused", error=str(exc))
        except NoAnswer as exc:
            return _Attempt("unknown", error=str(exc))
        try:
            body = msgspec.json.decode(answer) if answer else None
        except msgspec.DecodeError:
            body = None
        return classify_reply(status, body)
