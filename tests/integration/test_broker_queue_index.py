"""The broker's per-(topic, queue) index over a real group (3 controllers, 3 replicas): a queue read
returns exactly that queue's messages in log order, confirm-bounded, and its positions are the same on
the next master after a ``kill -9``, so a reader resumes where it stopped (docs/architecture.md §4.4).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from mqha.client import Producer
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import Node, http_json

pytestmark = pytest.mark.integration

GROUP = "broker-a"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("queue-index"), controllers=3, groups=1, replicas=3) as local:
        local.wait_ready(90)
        yield local
    assert local.running_pids() == []


def send(cluster: LocalCluster, items: list[tuple[str, int | None]]) -> list[str]:
    """Put one message per (topic, queue) in order; their msgIds."""

    async def run() -> list[str]:
        ids = []
        async with Producer(cluster.controller_addresses, GROUP) as producer:
            for i, (topic, queue) in enumerate(items):
                props = {"QUEUE_ID": str(queue)} if queue is not None else None
                result = await producer.send(topic, f"m{i}", properties=props)
                assert result.ok, result
                ids.append(result.msg_id)
        return ids

    return asyncio.run(run())


def read_queue(
    node: Node, topic: str, queue: int, offset: int, page: int = 7
) -> tuple[list[dict[str, Any]], int]:
    """Every message of the queue from ``offset`` on, page by page; and the position to continue from."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        query = urlencode({"topic": topic, "queueId": queue, "offset": offset, "maxMessages": page})
        status, body = http_json("GET", f"{node.url}/v1/queues/messages?{query}")
        assert status == 200 and body["code"] == 0, body
        assert body["topic"] == topic and body["queueId"] == queue
        assert body["nextOffset"] >= offset
        out += body["messages"]
        if not body["messages"] and body["nextOffset"] == offset:
            return out, offset
        offset = body["nextOffset"]
    raise AssertionError("queue read did not settle")


def test_queue_reads_match_the_log_and_survive_a_master_kill(cluster: LocalCluster) -> None:
    items = [("Q", i % 3) for i in range(60)] + [("Other", None)] * 5 + [("Q", None)] * 4
    ids = send(cluster, items)
    expected = {q: [i for (t, qq), i in zip(items, ids, strict=True) if t == "Q" and qq == q] for q in (1, 2)}
    expected[0] = [i for (t, qq), i in zip(items, ids, strict=True) if t == "Q" and qq in (0, None)]

    old = cluster.master(GROUP, timeout=30)
    assert old is not None
    positions = {}
    for queue in (0, 1, 2):
        got, resume = read_queue(old, "Q", queue, 0)
        assert [m["msgId"] for m in got] == expected[queue]
        assert all(m["topic"] == "Q" for m in got)
        offsets = [m["offset"] for m in got]
        assert offsets == sorted(offsets)
        positions[queue] = (offsets, resume)
    assert [m["msgId"] for m in read_queue(old, "Other", 0, 0)[0]] == ids[60:65]

    cluster.kill(old)
    deadline = time.monotonic() + 60
    new = None
    while new is None or new.name == old.name:
        assert time.monotonic() < deadline, cluster.status_table()
        new = cluster.master(GROUP)
        time.sleep(0.05)
    # The same positions on the new master: its index is built from its own copy of the log.
    for queue in (0, 1, 2):
        got, resume = read_queue(new, "Q", queue, 0)
        assert [m["offset"] for m in got] == positions[queue][0]
        assert [m["msgId"] for m in got] == expected[queue]
    # A reader resumes where it stopped on the old master and sees only what came since.
    more = send(cluster, [("Q", 1)] * 5)
    got, _ = read_queue(new, "Q", 1, positions[1][1])
    assert [m["msgId"] for m in got] == more

    cluster.start_node(old, timeout=60)
    cluster.wait_ready(90, groups=[GROUP])
