"""QueryRoute answers, a topic's queues in each broker group, and the queue a send goes to (core;
docs/architecture.md §4.5, §13).

A route names the proxies, never a broker: each broker group appears as a broker of that name with
id 0 (clients keep master queues only) whose endpoints are the access point the client used (the
Java proxy's cluster mode). A broker crash therefore never strands a client on a dead address; the
proxy follows the group's master itself.

A topic's queues come from the controllers (``mqadmin updateTopic``): in each broker group that holds
it, queue ids 0..max(read, write)-1, READ_WRITE below both counts, WRITE or READ above one of them
(RocketMQ's queue ids: writes go to 0..write-1, reads cover 0..read-1). A topic the controllers do not
know is, with ``autoCreateTopicEnable`` (RocketMQ's default), in every group with
``defaultTopicQueueNums`` queues; without it, it does not exist (TOPIC_NOT_FOUND).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqha.proxy.v2 import definition as d
from mqha.proxy.v2 import service as s
from mqha.wire.controller_api import TopicQueueData
from mqha.wire.types import NAME_RULE, is_valid_name

_READ_PERM, _WRITE_PERM = 4, 2  # RocketMQ's PermName bits


def status(code: int = d.Code.OK, message: str = "OK") -> Any:
    return d.Status(code=code, message=message)


@dataclass(frozen=True)
class GroupQueues:
    """A topic's queues in one broker group: reads cover ids 0..read-1, writes go to 0..write-1."""

    group: str
    read: int
    write: int

    def permission(self, queue_id: int) -> Any:
        readable, writable = queue_id < self.read, queue_id < self.write
        if readable and writable:
            return d.Permission.READ_WRITE
        return d.Permission.WRITE if writable else d.Permission.READ


def topic_not_found(topic: str) -> str:
    """RocketMQ's TOPIC_NOT_EXIST text for a topic nobody may use."""
    return f"topic[{topic}] not exist, apply first please!"


def topic_layout(
    topic: str,
    groups: Sequence[str],
    topics: Mapping[str, Sequence[TopicQueueData]],
    *,
    auto_create: bool,
    default_queue_nums: int,
) -> tuple[GroupQueues, ...] | None:
    """``topic``'s queues in the known ``groups``, sorted by group; None when the topic does not exist.

    ``topics`` is the controllers' topic table (topicList's ``topicQueues``)."""
    known = set(groups)
    datas = topics.get(topic)
    if datas:
        return tuple(
            GroupQueues(
                data.broker_name,
                data.read_queue_nums if data.perm & _READ_PERM else 0,
                data.write_queue_nums if data.perm & _WRITE_PERM else 0,
            )
            for data in sorted(datas, key=lambda data: data.broker_name)
            if data.broker_name in known
        )
    if not auto_create:
        return None
    return tuple(GroupQueues(group, default_queue_nums, default_queue_nums) for group in sorted(known))


def query_route(topic: Any, endpoints: Any, layout: Sequence[GroupQueues] | None) -> Any:
    """The ``QueryRouteResponse`` for ``topic`` (a ``Resource``) asked through ``endpoints``."""
    if not is_valid_name(topic.name):
        return s.QueryRouteResponse(status=status(d.Code.ILLEGAL_TOPIC, f"topic is not {NAME_RULE}"))
    if not endpoints.addresses:
        return s.QueryRouteResponse(
            status=status(d.Code.ILLEGAL_ACCESS_POINT, "the request names no endpoints (access point)")
        )
    if layout is None:
        return s.QueryRouteResponse(status=status(d.Code.TOPIC_NOT_FOUND, topic_not_found(topic.name)))
    queues = []
    for entry in layout:
        broker = d.Broker(name=entry.group, id=0, endpoints=endpoints)
        queues.extend(
            d.MessageQueue(
                topic=topic,
                id=queue_id,
                permission=entry.permission(queue_id),
                broker=broker,
                accept_message_types=[d.MessageType.NORMAL],
            )
            for queue_id in range(max(entry.read, entry.write))
        )
    if not queues:
        text = "no broker group is registered with the controllers" if not layout else "it has no queue"
        return s.QueryRouteResponse(status=status(d.Code.TOPIC_NOT_FOUND, f"topic {topic.name}: {text}"))
    return s.QueryRouteResponse(status=status(), message_queues=queues)


@functools.lru_cache(maxsize=1024)
def _writable_slots(layout: tuple[GroupQueues, ...]) -> tuple[tuple[tuple[str, int], ...], bool]:
    """A layout's writable (group, queue id) pairs, queue by queue and group by group (consecutive
    sends go to different groups), and whether they span several groups. Cached: every send asks."""
    width = max((entry.write for entry in layout), default=0)
    slots = tuple((entry.group, q) for q in range(width) for entry in layout if q < entry.write)
    return slots, len({group for group, _ in slots}) > 1


class QueueChooser:
    """Picks the (group, queue id) of each send, round robin per topic over its writable queues.

    The proxy picks the queue, as RocketMQ's does (a v2 ``SendMessageRequest`` names none); ``avoid``
    skips a group that just failed when another one exists."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def choose(self, topic: str, layout: Sequence[GroupQueues], avoid: str | None = None) -> tuple[str, int]:
        """Raises ``ValueError`` when no group has a writable queue of the topic."""
        slots, several = _writable_slots(tuple(layout))
        if not slots:
            raise ValueError("no writable queue")
        turn = self._next.get(topic, 0)
        for step in range(len(slots)):
            slot = (turn + step) % len(slots)
            if slots[slot][0] != avoid or not several:
                self._next[topic] = slot + 1
                return slots[slot]
        raise AssertionError("unreachable: some group differs from avoid")
