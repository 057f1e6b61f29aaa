"""A hostile client for mqproxy's flood test, run as its own process (docs/architecture.md §13, Limits).

usage: ``python -m tests.helpers.grpc_flood HOST:PORT IDLE SLOW OVERSIZED_PER_S [STALLED]``

* ``IDLE`` idle connections: half bare TCP that never says a word, half that send HTTP/2's preface
  and SETTINGS (and answer the server's SETTINGS and PINGs) and then open no stream;
* ``SLOW`` slow streams, 50 per connection: each a SendMessage whose gRPC frame announces a 4 MiB
  message, of which 1 KiB comes at once and 1 KiB a second after (within HTTP/2 flow control);
* ``STALLED`` stalled streams, 50 per connection: each a SendMessage announcing 4 MiB that sends all
  but its last KiB as fast as HTTP/2 flow control lets it, then stops;
* ``OVERSIZED_PER_S`` requests a second of 6 MiB each (above ``grpcMaxInboundMessageSize``), over
  gRPC, each expected to end RESOURCE_EXHAUSTED.

Frames are built by hand (HPACK literals without indexing), so a stream can stay unfinished. One JSON
line on stdout when everything is open (``"ready": true``), then one a second with the counts, until
SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import signal
import sys
import time
from typing import Any

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
ACK, END_HEADERS = 0x1, 0x4
SEND = b"/apache.rocketmq.v2.MessagingService/SendMessage"
ANNOUNCED = 4 * 1024 * 1024
CHUNK = b"\x0a" * 1024
STREAMS_PER_CONNECTION = 50
counts: dict[str, Any] = {
    "idle_open": 0,
    "idle_refused": 0,
    "idle_closed": 0,
    "slow_streams": 0,
    "stalled_streams": 0,
    "slow_reset": 0,
    "stalled_sent_mib": 0.0,
    "slow_goaway": 0,
    "oversized_exhausted": 0,
    "oversized_other": [],
}


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header field without indexing, new name (lengths under 127)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


class RawConnection:
    """One HTTP/2 connection that answers SETTINGS and PING and counts what the server says."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.window = 65535  # the connection's send window
        self.initial = 65535  # each stream's initial send window (the server's SETTINGS)
        self.streams: dict[int, int] = {}  # stream -> its send window beyond the initial one
        self.reset: set[int] = set()
        self.moved = asyncio.Event()  # set when a window grows
        self.closed = asyncio.Event()

    async def serve(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(9)
                length, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
                payload = await self.reader.readexactly(length)
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                if kind == SETTINGS and not flags & ACK:
                    for at in range(0, len(payload), 6):
                        if int.from_bytes(payload[at : at + 2], "big") == 4:  # INITIAL_WINDOW_SIZE
                            self.initial = int.from_bytes(payload[at + 2 : at + 6], "big")
                    self.writer.write(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    self.writer.write(frame(PING, ACK, 0, payload))
                elif kind == WINDOW_UPDATE and stream == 0:
                    self.window += int.from_bytes(payload, "big") & 0x7FFFFFFF
                    self.moved.set()
                elif kind == WINDOW_UPDATE:
                    grown = int.from_bytes(payload, "big") & 0x7FFFFFFF
                    self.streams[stream] = self.streams.get(stream, 0) + grown
                    self.moved.set()
                elif kind == RST_STREAM:
                    counts["slow_reset"] += 1
                    self.reset.add(stream)
                elif kind == GOAWAY:
                    counts["slow_goaway"] += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed.set()

    def send_data(self, stream: int, payload: bytes) -> bool:
        own = self.initial + self.streams.get(stream, 0)
        if self.window < len(payload) or own < len(payload) or self.closed.is_set():
            return False
        self.window -= len(payload)
        self.streams[stream] = self.streams.get(stream, 0) - len(payload)
        self.writer.write(frame(DATA, 0, stream, payload))
        return True


async def open_raw(host: str, port: int) -> RawConnection:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(PREFACE + frame(SETTINGS, 0, 0))
    connection = RawConnection(reader, writer)
    asyncio.get_running_loop().create_task(connection.serve())
    return connection


async def idle(host: str, port: int, speaks_http2: bool, held: list[Any]) -> None:
    try:
        if speaks_http2:
            held.append(await open_raw(host, port))
        else:
            held.append(await asyncio.open_connection(host, port))
        counts["idle_open"] += 1
    except OSError:
        counts["idle_refused"] += 1


def send_headers(host: str, port: int) -> bytes:
    authority = f"{host}:{port}".encode()
    return (
        literal(b":method", b"POST")
        + literal(b":scheme", b"http")
        + literal(b":path", SEND)
        + literal(b":authority", authority)
        + literal(b"content-type", b"application/grpc")
        + literal(b"te", b"trailers")
    )


async def slow_streams(host: str, port: int, streams: int) -> None:
    """``streams`` unfinished SendMessage calls on one connection, fed 1 KiB a second each."""
    connection = await open_raw(host, port)
    block = send_headers(host, port)
    ids = [1 + 2 * i for i in range(streams)]
    for stream in ids:
        connection.writer.write(frame(HEADERS, END_HEADERS, stream, block))
        connection.send_data(stream, b"\x00" + ANNOUNCED.to_bytes(4, "big") + CHUNK)
        counts["slow_streams"] += 1
    await connection.writer.drain()
    while not connection.closed.is_set():
        await asyncio.sleep(1.0)
        for stream in ids:
            connection.send_data(stream, CHUNK)
        await connection.writer.drain()


async def stalled_streams(host: str, port: int, streams: int) -> None:
    """``streams`` SendMessage calls on one connection, each sending all but the last KiB of a 4 MiB
    request as fast as flow control allows, then nothing more."""
    connection = await open_raw(host, port)
    await asyncio.sleep(0.2)  # the server's SETTINGS (its initial window) first
    block = send_headers(host, port)
    ids = [1 + 2 * i for i in range(streams)]
    left = dict.fromkeys(ids, ANNOUNCED - len(CHUNK))
    for stream in ids:
        connection.writer.write(frame(HEADERS, END_HEADERS, stream, block))
        connection.send_data(stream, b"\x00" + ANNOUNCED.to_bytes(4, "big"))
        counts["stalled_streams"] += 1
    piece = 16 * 1024
    while not connection.closed.is_set():
        connection.moved.clear()
        for stream in ids:
            while left[stream] > 0 and stream not in connection.reset:
                size = min(piece, left[stream])
                if not connection.send_data(stream, b"\x0a" * size):
                    break
                left[stream] -= size
                counts["stalled_sent_mib"] += size / 2**20
        await connection.writer.drain()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(connection.moved.wait(), 1.0)


async def oversized(target: str, per_second: float) -> None:
    import grpc

    async with grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        call = channel.unary_unary(SEND.decode())
        body = b"\x0a" * (6 * 1024 * 1024)
        while True:
            try:
                await call(body, timeout=10)
                counts["oversized_other"].append("OK")
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    counts["oversized_exhausted"] += 1
                else:
                    counts["oversized_other"].append(f"{exc.code().name}: {exc.details()}"[:200])
            await asyncio.sleep(1.0 / per_second)


async def main(
    target: str, idle_count: int, slow_count: int, oversized_per_s: float, stalled: int = 0
) -> None:
    host, port_text = target.rsplit(":", 1)
    port = int(port_text)
    held: list[Any] = []
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    started = time.monotonic()
    for first in range(0, idle_count, 100):  # in waves: a listen backlog is not a flood test
        wave = range(first, min(first + 100, idle_count))
        await asyncio.gather(*(idle(host, port, i % 2 == 1, held) for i in wave))
    tasks = [
        asyncio.create_task(slow_streams(host, port, min(STREAMS_PER_CONNECTION, slow_count - first)))
        for first in range(0, slow_count, STREAMS_PER_CONNECTION)
    ]
    tasks += [
        asyncio.create_task(stalled_streams(host, port, min(STREAMS_PER_CONNECTION, stalled - first)))
        for first in range(0, stalled, STREAMS_PER_CONNECTION)
    ]
    while (counts["slow_streams"] < slow_count or counts["stalled_streams"] < stalled) and (
        time.monotonic() - started < 60
    ):
        await asyncio.sleep(0.05)
    if oversized_per_s > 0:
        tasks.append(asyncio.create_task(oversized(target, oversized_per_s)))
    print(json.dumps({"ready": True, "setup_s": round(time.monotonic() - started, 2), **counts}), flush=True)
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
        counts["idle_closed"] = sum(1 for h in held if isinstance(h, RawConnection) and h.closed.is_set())
        print(json.dumps(counts), flush=True)
    for task in tasks:
        task.cancel()


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = int(sys.argv[2]) + 1024
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    stalled = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), stalled))
