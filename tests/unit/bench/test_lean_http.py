"""bench.loadgen's lean HTTP/1.1 response reader: Content-Length and chunked bodies, bad framing."""

from __future__ import annotations

import asyncio

import pytest

from mqha.bench.loadgen import _read_response


def read(raw: bytes) -> tuple[int, bytes]:
    async def go() -> tuple[int, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await _read_response(reader)

    return asyncio.run(go())


def test_content_length_body() -> None:
    raw = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{"a": 1}'
    assert read(raw) == (200, b'{"a": 1}')


def test_chunked_body_and_header_case() -> None:
    head = b"HTTP/1.1 409 Conflict\r\ntransfer-encoding: Chunked\r\n\r\n"
    raw = head + b'3\r\n{"a\r\n5;x=y\r\n": 1}\r\n0\r\n\r\n'
    assert read(raw) == (409, b'{"a": 1}')


def test_no_body() -> None:
    assert read(b"HTTP/1.1 204 No Content\r\n\r\n") == (204, b"")


def test_a_short_body_raises() -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
