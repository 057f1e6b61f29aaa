"""Consumer-offset bodies of the controller API (docs/architecture.md §4.5, §13): mqproxy's commits of
its consumer groups' positions and their query. Strict like every request (``mqha.wire.codec``)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from mqha.wire.codec import Payload, Request
from mqha.wire.types import BrokerName, ConsumerGroupName, QueueId, QueueOffset, TopicName

__all__ = [
    "MAX_OFFSETS_PER_UPDATE",
    "ConsumerOffsetData",
    "ConsumerOffsetsPayload",
    "QueryConsumerOffsetRequest",
    "UpdateConsumerOffsetRequest",
]

MAX_OFFSETS_PER_UPDATE = 4096
"""Queue positions in one updateConsumerOffset request (a proxy sends more as several)."""


class ConsumerOffsetData(Request, frozen=True, kw_only=True):
    """One consumer group's committed position in one queue.

    Every message of the queue below ``commitOffset`` (a commit-log offset, docs/architecture.md §4.4)
    is acknowledged by the group (§4.5, §13). Requests and replies carry it alike."""

    consumer_group: ConsumerGroupName
    topic: TopicName
    broker_name: BrokerName
    queue_id: QueueId
    commit_offset: QueueOffset

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.consumer_group, self.topic, self.broker_name, self.queue_id)


class UpdateConsumerOffsetRequest(Request, frozen=True, kw_only=True):
    """The body of updateConsumerOffset: raise consumer groups' positions.

    RocketMQ's UPDATE_CONSUMER_OFFSET, many queues at once; a position below the stored one changes
    nothing."""

    offsets: Annotated[tuple[ConsumerOffsetData, ...], msgspec.Meta(max_length=MAX_OFFSETS_PER_UPDATE)]


class QueryConsumerOffsetRequest(Request, frozen=True, kw_only=True):
    """The query of queryConsumerOffset: a consumer group's positions, in one topic or in all."""

    consumer_group: ConsumerGroupName
    topic: TopicName | None = None


class ConsumerOffsetsPayload(Payload, frozen=True, kw_only=True):
    """The reply of queryConsumerOffset and updateConsumerOffset: positions as the state holds them.

    After an update: every queue it named, its offset raised or already higher."""

    offsets: tuple[ConsumerOffsetData, ...] = ()
