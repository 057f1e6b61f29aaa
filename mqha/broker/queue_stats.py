"""``GET /v1/queues`` of the broker API: a topic's queues and a consumer's backlog in each (core;
docs/architecture.md §4.4): the query's validation and the reply's shape, beside ``mqha.broker.protocol``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqha.broker.protocol import BrokerCode, envelope, illegal
from mqha.broker.queue_index import MAX_QUEUE_ID, QueueStats
from mqha.wire.types import NAME_RULE, is_valid_name

__all__ = ["MAX_STATS_POSITIONS", "QueueStatsRequest", "parse_queue_stats_request", "queue_stats_reply"]


@dataclass(frozen=True)
class QueueStatsRequest:
    """A validated ``GET /v1/queues``: a topic's queues, and for some a consumer's position."""

    topic: str
    positions: Mapping[int, int]


MAX_STATS_POSITIONS = 1024


def parse_queue_stats_request(query: Mapping[str, str]) -> QueueStatsRequest:
    """Query of GET ``/v1/queues`` (``topic``, optional ``consumerOffsets=qid:offset,qid:offset``) →
    :class:`QueueStatsRequest`, or ``RequestError``."""
    topic = query.get("topic", "")
    if not is_valid_name(topic):
        raise illegal(f"query parameter 'topic' must be {NAME_RULE}, got {topic[:140]!r}")
    positions: dict[int, int] = {}
    raw = query.get("consumerOffsets", "")
    for item in raw.split(",") if raw else ():
        qid, _, offset = item.partition(":")
        if not (qid.isdigit() and offset.isdigit()) or int(qid) > MAX_QUEUE_ID or int(offset) > 2**63 - 1:
            raise illegal(
                f"query parameter 'consumerOffsets': expected queueId:offset,..., got {item[:40]!r}"
            )
        positions[int(qid)] = int(offset)
    if len(positions) > MAX_STATS_POSITIONS:
        raise illegal(f"query parameter 'consumerOffsets': at most {MAX_STATS_POSITIONS} queues")
    return QueueStatsRequest(topic, positions)


def queue_stats_reply(
    topic: str, stats: Sequence[QueueStats], indexed_to: int, confirm_offset: int
) -> dict[str, Any]:
    """A topic's queues (``GET /v1/queues``): positions are commit-log offsets (§4.4), ``count`` and
    ``pending`` are numbers of messages; ``indexedTo`` below ``confirmOffset``: the index is behind."""
    queues = []
    for q in stats:
        item: dict[str, Any] = {
            "queueId": q.queue_id,
            "minOffset": q.min_offset,
            "maxOffset": q.max_offset,
            "count": q.count,
        }
        if q.pending is not None:
            item["pending"] = q.pending
        queues.append(item)
    return envelope(
        BrokerCode.SUCCESS,
        "",
        topic=topic,
        queues=queues,
        indexedTo=min(indexed_to, confirm_offset),
        confirmOffset=confirm_offset,
    )
