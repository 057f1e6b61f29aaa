"""The broker HTTP API (docs/architecture.md §4) on real sockets, in process, without the controller.

The test plays the ReplicasManager through the broker hooks (``ha_nodes.Node``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.integration.ha_nodes import Node, eventually

pytestmark = pytest.mark.integration


def run_async(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 60))

    return wrapper


async def call(method: str, url: str, body: Any = None, *, raw: bytes | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        async with session.request(method, url, data=data) as response:
            text = await response.text()
            try:
                return response.status, json.loads(text)
            except ValueError:
                return response.status, text


@run_async
async def test_fenced_broker_rejects_everything_spec_9(tmp_path: Path) -> None:
    node = await Node.start(tmp_path / "a", 1, http=True)
    try:
        status, body = await call("POST", f"{node.url}/v1/messages", {"topic": "t", "body": "x"})
        assert status == 503 and body["code"] == 14 and "fenced" in body["remark"]
        status, body = await call("GET", f"{node.url}/v1/messages?offset=0")
        assert status == 503 and "fenced" in body["remark"]
        status, body = await call("GET", f"{node.url}/healthz")
        assert status == 200 and body["codeName"] == "SUCCESS"
    finally:
        await node.stop()


@run_async
async def test_put_read_epochs_status_and_metrics_on_a_master(tmp_path: Path) -> None:
    node = await Node.start(tmp_path / "a", 3, http=True)
    try:
        assert await node.become_master(4)
        first = {"topic": "orders", "body": "first", "keys": "k1"}
        status, one = await call("POST", f"{node.url}/v1/messages", first)
        assert status == 200
        assert {k: one[k] for k in ("code", "codeName", "status", "offset", "epoch")} == {
            "code": 0,
            "codeName": "SUCCESS",
            "status": "PUT_OK",
            "offset": 0,
            "epoch": 4,
        }
        batch = {"messages": [{"topic": "orders", "body": f"m{i}"} for i in range(5)]}
        status, many = await call("POST", f"{node.url}/v1/messages", batch)
        assert status == 200 and [r["status"] for r in many["results"]] == ["PUT_OK"] * 5
        offsets = [r["offset"] for r in many["results"]]
        assert offsets[0] == one["offset"] + one["size"] and offsets == sorted(offsets)

        status, read = await call("GET", f"{node.url}/v1/messages?offset=0&maxMessages=3")
        assert status == 200 and [m["body"] for m in read["messages"]] == ["first", "m0", "m1"]
        assert read["messages"][0]["msgId"] == one["msgId"] and read["messages"][0]["keys"] == "k1"
        status, rest = await call("GET", f"{node.url}/v1/messages?offset={read['nextOffset']}")
        assert [m["body"] for m in rest["messages"]] == ["m2", "m3", "m4"]
        assert rest["nextOffset"] == node.store.max_offset == rest["confirmOffset"]

        status, epochs = await call("GET", f"{node.url}/v1/epochs")
        assert status == 200
        assert epochs["brokerId"] == 0 and epochs["controllerBrokerId"] == 3  # role id on the master (§9.8)
        assert epochs["epochList"] == [{"epoch": 4, "startOffset": 0, "endOffset": node.store.max_offset}]
        assert (epochs["clusterName"], epochs["brokerName"]) == ("DefaultCluster", "broker-a")

        status, ha = await call("GET", f"{node.url}/v1/ha/status")
        assert status == 200 and ha["master"] is True
        assert ha["masterCommitLogMaxOffset"] == node.store.max_offset

        status, info = await call("GET", f"{node.url}/v1/status")
        assert info["role"] == "MASTER" and info["brokerRole"] == "SYNC_MASTER"
        assert info["syncStateSet"] == [3] and info["masterEpoch"] == 4 and info["fenced"] is False

        status, text = await call("GET", f"{node.url}/metrics")
        assert status == 200
        assert 'mqha_broker_role{broker_name="broker-a",role="MASTER"} 1.0' in text
        puts = 'mqha_broker_put_requests_total{ack_mode="async",broker_name="broker-a",status="PUT_OK"} 2.0'
        assert puts in text
        assert "mqha_broker_put_latency_seconds_bucket" in text and "mqha_broker_ha_sent_bytes_total" in text
    finally:
        await node.stop()


@run_async
async def test_slave_answers_503_with_the_master_address(tmp_path: Path) -> None:
    a = await Node.start(tmp_path / "a", 1, http=True)
    b = await Node.start(tmp_path / "b", 2, http=True)
    try:
        assert await a.become_master(1)
        assert await b.follow(a, 1)
        status, body = await call("POST", f"{b.url}/v1/messages", {"topic": "t", "body": "x"})
        assert status == 503 and body["status"] == "SERVICE_NOT_AVAILABLE"
        assert body["masterAddress"] == f"127.0.0.1:{a.config['listenPort']}"
        status, _ = await call("POST", f"{a.url}/v1/messages", {"topic": "t", "body": "replicated"})
        assert status == 200
        # A slave serves reads up to its confirm offset (the master's, as told by the master).
        await eventually(lambda: b.ha.gate.confirm_offset() == a.store.max_offset)
        status, read = await call("GET", f"{b.url}/v1/messages")
        assert [m["body"] for m in read["messages"]] == ["replicated"]
        status, epochs = await call("GET", f"{b.url}/v1/epochs")
        assert epochs["brokerId"] == 2 and epochs["controllerBrokerId"] == 2
        status, ha = await call("GET", f"{b.url}/v1/ha/status")
        assert ha["master"] is False and ha["haClientRuntimeInfo"]["masterAddr"] == a.ha_address
    finally:
        await b.stop()
        await a.stop()


@run_async
async def test_bad_puts_are_rejected_and_nothing_is_written(tmp_path: Path) -> None:
    node = await Node.start(tmp_path / "a", 1, http=True, maxRequestBodyBytes=1024 * 1024)
    try:
        assert await node.become_master(1)
        url = f"{node.url}/v1/messages"
        cases: list[tuple[Any, bytes | None, str]] = [
            ({"topic": "t", "body": 42}, None, "field 'body' of PutMessage: expected a string, got integer"),
            ({"topic": ["t"], "body": "x"}, None, "field 'topic' of PutMessage: expected a string"),
            (None, b"{not json", "not JSON"),
            ({"messages": [{"topic": "t", "body": "ok"}, {"topic": "t", "body": None}]}, None, "messages[1]"),
            ({"topic": "t", "body": "x" * 70_000}, None, "exceeds maxMessageSize"),
        ]
        for body, raw, fragment in cases:
            status, reply = await call("POST", url, body, raw=raw)
            assert status == 400 and reply["code"] == 13 and reply["codeName"] == "MESSAGE_ILLEGAL", reply
            assert fragment in reply["remark"]
        status, reply = await call("GET", f"{node.url}/v1/messages?offset=abc")
        assert status == 400 and "offset" in reply["remark"]
        assert node.store.max_offset == 0
        status, reply = await call("POST", url, {"topic": "t", "body": "still serving"})
        assert status == 200 and reply["offset"] == 0
    finally:
        await node.stop()


def _send_huge_body(port: int, declared: int, chunked: bool) -> tuple[int, float, int]:
    """Start a POST with a huge body; return (HTTP status, seconds to the answer, bytes sent).

    A thread streams the body (whole chunks, blocking) while this one waits for the answer."""
    head = "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {declared}\r\n\r\n"
    chunk = b"x" * (256 * 1024)
    piece = (b"%x\r\n" % len(chunk)) + chunk + b"\r\n" if chunked else chunk
    sent = [0]
    stop = threading.Event()

    def stream(sock: socket.socket) -> None:
        try:
            while sent[0] < declared and not stop.is_set():
                sock.sendall(piece)
                sent[0] += len(chunk)
        except OSError:
            pass  # the broker answered and closed: expected

    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head.encode())
        sender = threading.Thread(target=stream, args=(sock,), daemon=True)
        sender.start()
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except OSError:
            pass
        elapsed = time.monotonic() - started
        stop.set()
        sock.shutdown(socket.SHUT_RDWR)
        sender.join(10)
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else -1
    return status, elapsed, sent[0]


@run_async
async def test_a_100_mb_body_is_refused_with_413_before_it_is_read(tmp_path: Path) -> None:
    node = await Node.start(tmp_path / "a", 1, http=True)  # maxRequestBodyBytes: 8 MiB default
    try:
        assert await node.become_master(1)
        assert node.http is not None and node.http.bound_port is not None
        port = node.http.bound_port
        status, elapsed, sent = await asyncio.to_thread(_send_huge_body, port, 100 * 2**20, False)
        assert status == 413 and sent < 100 * 2**20, (status, elapsed, sent)
        # Without a Content-Length the limit still holds while reading.
        status, _, sent = await asyncio.to_thread(_send_huge_body, port, 100 * 2**20, True)
        assert status == 413 and sent < 100 * 2**20
        status, reply = await call("POST", f"{node.url}/v1/messages", {"topic": "t", "body": "after"})
        assert status == 200 and node.store.max_offset == reply["size"]
    finally:
        await node.stop()


@run_async
async def test_sync_flush_put_is_durable_when_acknowledged_and_replicated(tmp_path: Path) -> None:
    a = await Node.start(tmp_path / "a", 1, flushDiskType="SYNC_FLUSH", allAckInSyncStateSet=True)
    b = await Node.start(tmp_path / "b", 2, flushDiskType="SYNC_FLUSH", allAckInSyncStateSet=True)
    try:
        assert await a.become_master(1)
        assert await b.follow(a, 1)
        await eventually(lambda: a.ha.keeper.local_set() == {1, 2})
        outcomes = await asyncio.gather(*(a.put(4, tag=f"c{i}-") for i in range(8)))  # flushes shared
        assert {o.status.value for o in outcomes} == {"PUT_OK"}
        end = max(o.appended[-1].offset + o.appended[-1].size for o in outcomes)
        assert a.store.log.flushed_offset >= end and b.store.log.flushed_offset >= end
    finally:
        await b.stop()
        await a.stop()
