"""The HTTP limits' pieces that need no server: the canned busy answer, the bounded body read, the
runner arguments."""

from __future__ import annotations

import asyncio
import json

import pytest

from mqha.security.http_limits import PRE_AUTH_BUFFER_BYTES, busy_answer, read_body, runner_args


class TooLarge(Exception):
    pass


class TooSlow(Exception):
    pass


def _read(chunks: list[bytes], *, eof: bool, limit: int = 100, timeout_s: float = 0.2) -> bytes:
    async def go() -> bytes:
        content = asyncio.StreamReader()
        for chunk in chunks:
            content.feed_data(chunk)
        if eof:
            content.feed_eof()
        return await read_body(content, limit, timeout_s, too_large=TooLarge, too_slow=TooSlow)

    return asyncio.run(go())


def test_a_whole_body_within_the_limit_is_read() -> None:
    assert _read([b"ab", b"cd"], eof=True) == b"abcd"
    assert _read([b"x" * 100], eof=True) == b"x" * 100


def test_a_body_over_the_limit_is_refused_at_the_limit() -> None:
    with pytest.raises(TooLarge):
        _read([b"x" * 60, b"y" * 60], eof=False)  # never ends: refused without waiting for the rest


def test_a_body_that_stops_coming_times_out() -> None:
    with pytest.raises(TooSlow):
        _read([b"{"], eof=False, timeout_s=0.05)


def test_the_busy_answer_is_a_complete_http_response_with_a_code() -> None:
    answer = busy_answer(7)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ") and b"Connection: close" in head
    assert f"Content-Length: {len(body)}".encode() in head
    reply = json.loads(body)
    assert (
        reply["code"] == 2
        and reply["codeName"] == "SYSTEM_BUSY"
        and "httpMaxConnections=7" in reply["remark"]
    )


def test_runner_arguments_follow_the_keys() -> None:
    args = runner_args({"httpHeaderTimeoutMills": 1500}, linger_s=0)
    assert args == {"keepalive_timeout": 1.5, "read_bufsize": PRE_AUTH_BUFFER_BYTES, "lingering_time": 0}
