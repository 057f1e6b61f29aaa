"""bench.lean_http's response reading (aiohttp's parser over a stream): Content-Length, chunked and
close-delimited bodies, keep-alive, bad framing."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.http import HttpProcessingError

from mqha.bench.lean_http import read_response, response_parser


def read(raw: bytes) -> tuple[int, bytes, bool]:
    async def go() -> tuple[int, bytes, bool]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_response(reader, response_parser())

    return asyncio.run(go())


def test_content_length_body() -> None:
    raw = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{"a": 1}'
    assert read(raw) == (200, b'{"a": 1}', True)


def test_chunked_body_and_header_case() -> None:
    head = b"HTTP/1.1 409 Conflict\r\ntransfer-encoding: Chunked\r\n\r\n"
    raw = head + b'3\r\n{"a\r\n5;x=y\r\n": 1}\r\n0\r\n\r\n'
    assert read(raw) == (409, b'{"a": 1}', True)


def test_no_body() -> None:
    assert read(b"HTTP/1.1 204 No Content\r\n\r\n") == (204, b"", True)


def test_close_delimited_body_and_connection_close() -> None:
    assert read(b"HTTP/1.0 200 OK\r\n\r\n{}") == (200, b"{}", False)
    assert read(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")[2] is False


def test_a_body_in_several_reads() -> None:
    async def go() -> tuple[int, bytes, bool]:
        reader = asyncio.StreamReader()
        task = asyncio.create_task(read_response(reader, response_parser()))
        for part in (b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: 4\r\n\r\n[1", b",2"):
            reader.feed_data(part)
            await asyncio.sleep(0)
        return await task

    assert asyncio.run(go()) == (200, b"[1,2", True)


def test_keep_alive_responses_one_after_another() -> None:
    async def go() -> list[tuple[int, bytes, bool]]:
        reader, parser = asyncio.StreamReader(), response_parser()
        answers = []
        for body in (b"[1]", b"[22]"):
            reader.feed_data(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            answers.append(await read_response(reader, parser))
        return answers

    assert asyncio.run(go()) == [(200, b"[1]", True), (200, b"[22]", True)]


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",  # the stream ends inside the body
        b"HTTP/1.1 2x0 OK\r\n\r\n",  # not a status line
        b"",  # closed before any answer
    ],
)
def test_bad_or_short_answers_raise(raw: bytes) -> None:
    with pytest.raises(HttpProcessingError):
        read(raw)
