"""Each (topic, queue)'s messages, indexed from the broker's own log (core; docs/architecture.md §4.4).

RocketMQ's ConsumeQueue idea, kept in memory: the queue a message belongs to is in its record (the
``QUEUE_ID`` property mqproxy writes; none means queue 0), so every replica derives the same index from
its own log and nothing extra is replicated. A queue position is the message's commit-log offset:
sparse, but the same on every replica and across restarts and retention, so a consumer offset stays
valid wherever the group's master moves. The index is built lazily, in log order, up to the offsets
reads may see; a truncation of the log resets it (the caller compares ``generation``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

QUEUE_ID_PROPERTY = "QUEUE_ID"
MAX_QUEUE_ID = 65_535


def queue_id_of(properties: Mapping[str, str]) -> int:
    """The queue of a record with these properties: ``QUEUE_ID``, or 0 when absent or not a queue id."""
    raw = properties.get(QUEUE_ID_PROPERTY)
    if raw is None or not raw.isdigit():
        return 0
    value = int(raw)
    return value if value <= MAX_QUEUE_ID else 0


class Indexed(Protocol):
    """What the index reads of a stored message."""

    @property
    def offset(self) -> int: ...

    @property
    def topic(self) -> str: ...

    @property
    def properties(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class QueueSpan:
    """One queue's extent in the index: its first and last message's offsets and how many there are."""

    first: int
    last: int
    count: int


@dataclass(frozen=True)
class QueueStats:
    """One queue as mqadmin's consumerProgress sees it.

    Its first message's position, the position after its last (``max_offset``), how many messages,
    and how many a consumer at a given position has yet to consume (None when no position was given).
    """

    queue_id: int
    min_offset: int
    max_offset: int
    count: int
    pending: int | None = None


class QueueIndex:
    """The commit-log offsets of each (topic, queue id)'s messages, in log order, up to ``indexed_to``."""

    def __init__(self, start: int = 0, generation: int = 0) -> None:
        self.indexed_to = start
        self.generation = generation
        self._queues: dict[tuple[str, int], array[int]] = {}
        self.damaged: list[int] = []  # offsets of damaged records passed over, in log order

    def reset(self, start: int, generation: int) -> None:
        """Forget everything: the log was cut, emptied or repaired (``generation`` names the log's new
        lineage)."""
        self._queues.clear()
        self.damaged.clear()
        self.indexed_to = start
        self.generation = generation

    def pass_damaged(self, offset: int, resume: int) -> None:
        """Flag the damaged record at ``offset`` (its topic and queue are unknown) and go on at
        ``resume``, where valid data follows it: every other queue's messages stay readable
        (docs/architecture.md §4.7). A repair resets the index, which then takes the record."""
        if not self.indexed_to <= offset < resume:
            raise ValueError(f"damaged record at {offset} (resume {resume}) is not at the indexed offset")
        self.damaged.append(offset)
        self.indexed_to = resume

    def add(self, messages: Iterable[Indexed], next_offset: int) -> None:
        """Index ``messages``, read in order from ``indexed_to``; ``next_offset`` is where the read
        stopped (past a segment's blank marker, too). Raises ``ValueError`` on a message out of order."""
        for message in messages:
            if message.offset < self.indexed_to:
                raise ValueError(f"message at {message.offset} is below the indexed offset {self.indexed_to}")
            key = (message.topic, queue_id_of(message.properties))
            offsets = self._queues.get(key)
            if offsets is None:
                offsets = self._queues[key] = array("q")
            offsets.append(message.offset)
            self.indexed_to = message.offset + 1
        if next_offset < self.indexed_to:
            raise ValueError(f"read stopped at {next_offset}, below the last message indexed")
        self.indexed_to = next_offset

    def read(self, topic: str, queue_id: int, position: int, max_count: int) -> list[int]:
        """Up to ``max_count`` offsets of the queue's messages at or after ``position``."""
        offsets = self._queues.get((topic, queue_id))
        if not offsets:
            return []
        start = bisect_left(offsets, position)
        return offsets[start : start + max_count].tolist()

    def queue_stats(self, topic: str, limit: int, positions: Mapping[int, int]) -> list[QueueStats]:
        """Every queue of ``topic`` with messages below ``limit``, and for each queue named in
        ``positions`` how many of them are at or after that position (a consumer's backlog)."""
        out = []
        for (name, queue_id), offsets in sorted(self._queues.items()):
            if name != topic:
                continue
            end = bisect_left(offsets, limit)
            if end == 0:
                continue
            position = positions.get(queue_id)
            pending = None if position is None else end - min(end, bisect_left(offsets, position))
            out.append(QueueStats(queue_id, offsets[0], offsets[end - 1] + 1, end, pending))
        return out

    def spans(self, topic: str) -> dict[int, QueueSpan]:
        """Every queue of ``topic`` that has messages, by queue id."""
        return {
            queue_id: QueueSpan(offsets[0], offsets[-1], len(offsets))
            for (name, queue_id), offsets in sorted(self._queues.items())
            if name == topic and offsets
        }
