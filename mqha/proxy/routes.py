"""QueryRoute answers and the queue a send goes to (core; docs/architecture.md §13).

A route names the proxies, never a broker: each broker group appears as a broker of that name with
id 0 (clients keep master queues only) whose endpoints are the access point the client used (the
Java proxy's cluster mode). A broker crash therefore never strands a client on a dead address; the
proxy follows the group's master itself. Until topics live in the controller (issue 29, step 2) every
topic exists in every group with ``defaultTopicQueueNums`` queues (``autoCreateTopicEnable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mqha.proxy.v2 import definition as d
from mqha.proxy.v2 import service as s
from mqha.wire.types import NAME_RULE, is_valid_name


def status(code: int = d.Code.OK, message: str = "OK") -> Any:
    return d.Status(code=code, message=message)


def query_route(topic: Any, endpoints: Any, groups: Sequence[str], queue_nums: int) -> Any:
    """The ``QueryRouteResponse`` for ``topic`` (a ``Resource``) asked through ``endpoints``."""
    if not is_valid_name(topic.name):
        return s.QueryRouteResponse(status=status(d.Code.ILLEGAL_TOPIC, f"topic is not {NAME_RULE}"))
    if not endpoints.addresses:
        return s.QueryRouteResponse(
            status=status(d.Code.ILLEGAL_ACCESS_POINT, "the request names no endpoints (access point)")
        )
    if not groups:
        return s.QueryRouteResponse(
            status=status(d.Code.TOPIC_NOT_FOUND, "no broker group is registered with the controllers")
        )
    queues = []
    for group in sorted(groups):
        broker = d.Broker(name=group, id=0, endpoints=endpoints)
        queues.extend(
            d.MessageQueue(
                topic=topic,
                id=queue_id,
                permission=d.Permission.READ_WRITE,
                broker=broker,
                accept_message_types=[d.MessageType.NORMAL],
            )
            for queue_id in range(queue_nums)
        )
    return s.QueryRouteResponse(status=status(), message_queues=queues)


class QueueChooser:
    """Picks the (group, queue id) of each send, round robin per topic.

    The proxy picks the queue, as RocketMQ's does (a v2 ``SendMessageRequest`` names none); ``avoid``
    skips a group that just failed when another one exists."""

    def __init__(self, queue_nums: int) -> None:
        self.queue_nums = queue_nums
        self._next: dict[str, int] = {}

    def choose(self, topic: str, groups: Sequence[str], avoid: str | None = None) -> tuple[str, int]:
        if not groups:
            raise ValueError("no broker group")
        ordered = sorted(groups)
        slots = len(ordered) * self.queue_nums
        turn = self._next.get(topic, 0)
        for step in range(slots):
            slot = (turn + step) % slots
            group = ordered[slot % len(ordered)]
            if group != avoid or len(ordered) == 1:
                self._next[topic] = slot + 1
                return group, (slot // len(ordered)) % self.queue_nums
        raise AssertionError("unreachable: some group differs from avoid")
