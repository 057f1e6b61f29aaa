"""bench.lean_http's response reading (aiohttp's parser over a stream): Content-Length, chunked and
close-delimited bodies, keep-alive, bad framing; the request bytes with and without a signer."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.http import HttpProcessingError

from mqha.bench.lean_http import LeanHttp, read_response, response_parser
from mqha.controller_client.caller import Signer


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


class _Writer:
    """Stands in for a connection's writer: keeps what the client sends."""

    def __init__(self) -> None:
        self.sent = b""

    def write(self, data: bytes) -> None:
        self.sent += data

    def is_closing(self) -> bool:
        return False


def sent_request(signer: Signer | None) -> bytes:
    """The bytes LeanHttp writes for one POST (answered by a canned 200)."""
    writer = _Writer()

    async def go() -> tuple[int, object]:
        reader = asyncio.StreamReader()
        reader.feed_data(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        http = LeanHttp()
        http._conns["127.0.0.1:1"] = (reader, writer, response_parser())  # type: ignore[assignment]
        return await http.request("POST", "http://127.0.0.1:1/v1/x?a=b", {"k": 1}, signer=signer)

    assert asyncio.run(go()) == (200, {})
    return writer.sent


def test_without_a_signer_the_request_is_the_four_header_lines() -> None:
    assert sent_request(None) == (
        b"POST /v1/x?a=b HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 7\r\n\r\n{"k":1}'
    )


def test_a_signer_signs_the_node_target_and_body_sent_and_adds_its_headers() -> None:
    seen = []

    def signer(method: str, node: str, target: str, body: bytes) -> dict[str, str]:
        seen.append((method, node, target, body))
        return {"Authorization": "Proof 1", "X-Other": "2"}

    sent = sent_request(signer)
    assert seen == [("POST", "127.0.0.1:1", "/v1/x?a=b", b'{"k":1}')]
    assert sent.endswith(b'Content-Length: 7\r\nAuthorization: Proof 1\r\nX-Other: 2\r\n\r\n{"k":1}')
