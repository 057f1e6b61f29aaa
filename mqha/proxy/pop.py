"""POP consumption state: what each consumer group has been handed and has acknowledged (core; §13).

RocketMQ 5's POP model, per (consumer group, topic, broker group, queue): the server keeps the group's
position and hands messages out; a handed-out message is invisible for a while and comes back with
its attempt count raised unless it is acknowledged first. Positions are commit-log offsets (the
broker's queue index, docs/architecture.md §4.4), the same on every replica, so a group keeps its
place when the broker group's master moves. What is in flight lives in the proxy's memory; the
acknowledged prefix of each queue (``PopQueue.committed``) is committed to the controllers
(``OffsetCommits`` decides what to send, ``mqha.proxy.offset_store`` sends it), and a queue starts from
the committed offset there. So a proxy restart, or a second proxy, redelivers at most what was
acknowledged after the last commit, and what was in flight (delivery stays at least once).

A receipt handle names the delivery it acknowledges: ``"<broker> <queue> <offset> <token>"``, the
token fresh for each hand-out and each visibility change, so a stale handle is refused.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

MAX_PENDING = 1024
"""Messages of one queue handed out (or fetched) and not yet acknowledged, at most."""


class State(Enum):
    """Where one fetched message of a queue stands."""

    WAITING = "waiting"  # fetched, not handed out (or visible again)
    INVISIBLE = "invisible"  # handed out; comes back at ``visible_at_ms``
    ACKED = "acked"


@dataclass
class Entry:
    """One message of a queue from the group's position on."""

    offset: int
    state: State = State.WAITING
    attempt: int = 0
    visible_at_ms: int = 0
    token: str = ""


@dataclass(frozen=True)
class Handle:
    """A decoded receipt handle."""

    broker: str
    queue_id: int
    offset: int
    token: str

    def text(self) -> str:
        return f"{self.broker} {self.queue_id} {self.offset} {self.token}"

    @classmethod
    def parse(cls, text: str) -> Handle | None:
        parts = text.split(" ")
        if len(parts) != 4 or not parts[1].isdigit() or not parts[2].isdigit() or not parts[3]:
            return None
        return cls(parts[0], int(parts[1]), int(parts[2]), parts[3])


class PopQueue:
    """One consumer group's position in one queue and the messages it handed out beyond it."""

    def __init__(self, start: int = 0, max_pending: int = MAX_PENDING) -> None:
        self.committed = start  # every message of the queue below is acknowledged
        self.fetched_to = start  # the next position to fetch from the broker
        self.max_pending = max_pending
        self._entries: OrderedDict[int, Entry] = OrderedDict()

    def room(self) -> int:
        """How many more messages may be fetched now."""
        return max(0, self.max_pending - len(self._entries))

    def due(self, now_ms: int, limit: int) -> list[int]:
        """Offsets to hand out again, oldest first: never handed out, or invisible no longer."""
        out = []
        for entry in self._entries.values():
            if len(out) >= limit:
                break
            if entry.state is State.WAITING or (
                entry.state is State.INVISIBLE and entry.visible_at_ms <= now_ms
            ):
                out.append(entry.offset)
        return out

    def fetched(self, offsets: list[int], next_position: int) -> None:
        """Messages read from the broker at ``fetched_to`` (in order); ``next_position``: where to go on."""
        for offset in offsets:
            if offset < self.fetched_to:
                raise ValueError(f"fetched {offset} below the fetch position {self.fetched_to}")
            self._entries[offset] = Entry(offset)
            self.fetched_to = offset + 1
        self.fetched_to = max(self.fetched_to, next_position)
        self._advance()

    def hand_out(self, offset: int, now_ms: int, invisible_ms: int, token: str) -> int:
        """Hand the message at ``offset`` out until ``now + invisible``; its attempt number."""
        entry = self._entries[offset]
        entry.state = State.INVISIBLE
        entry.attempt += 1
        entry.visible_at_ms = now_ms + invisible_ms
        entry.token = token
        return entry.attempt

    def skip(self, offset: int) -> None:
        """A message the group will never get (filtered out by tag, or gone): acknowledged as is."""
        entry = self._entries.get(offset)
        if entry is not None:
            entry.state = State.ACKED
            self._advance()

    def ack(self, offset: int, token: str) -> bool:
        """Acknowledge the hand-out ``token`` of ``offset``; False for a stale or unknown handle."""
        entry = self._entries.get(offset)
        if entry is None or entry.state is not State.INVISIBLE or entry.token != token:
            return False
        entry.state = State.ACKED
        self._advance()
        return True

    def change_invisible(
        self, offset: int, token: str, now_ms: int, invisible_ms: int, new_token: str
    ) -> bool:
        """Make a handed-out message visible at ``now + invisible`` instead; it takes ``new_token``."""
        entry = self._entries.get(offset)
        if entry is None or entry.state is not State.INVISIBLE or entry.token != token:
            return False
        entry.visible_at_ms = now_ms + invisible_ms
        entry.token = new_token
        return True

    def attempt_of(self, offset: int) -> int:
        entry = self._entries.get(offset)
        return entry.attempt if entry is not None else 0

    def fast_forward(self, position: int) -> bool:
        """The group is known to have acknowledged everything below ``position`` (another proxy serving
        it committed that): forget what this queue holds below it. True when that moved the queue."""
        if position <= self.committed:
            return False
        for offset in [offset for offset in self._entries if offset < position]:
            del self._entries[offset]  # a hand-out below it is acknowledged already: its handle goes stale
        self.fetched_to = max(self.fetched_to, position)
        self.committed = position
        self._advance()
        return True

    def _advance(self) -> None:
        while self._entries:
            offset, entry = next(iter(self._entries.items()))
            if entry.state is not State.ACKED:
                self.committed = offset
                return
            del self._entries[offset]
        self.committed = self.fetched_to


def tag_filter(expression: str) -> frozenset[str] | None:
    """RocketMQ's TAG expression: ``*`` (or empty) is every message (None), else tags joined by ``||``."""
    text = expression.strip()
    if not text or text == "*":
        return None
    return frozenset(tag.strip() for tag in text.split("||") if tag.strip())


OffsetKey = tuple[str, str, str, int]
"""(consumer group, topic, broker group, queue id)."""


class OffsetCommits:
    """What this proxy tells the controllers about its consumer groups' positions, and when.

    Per key, the offset last known stored at the controllers (loaded, or answered by a commit). Each
    period the proxy sends ``due``: the positions above what is stored (an offset only rises there,
    so nothing else is worth a write), plus the keys received from since the last period, whose
    answer tells whether another proxy serving the group got further (``fast_forward``).
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.stored: dict[OffsetKey, int] = {}
        self._active: set[OffsetKey] = set()

    def loaded(self, key: OffsetKey, offset: int) -> None:
        self.stored[key] = max(offset, self.stored.get(key, 0))

    def touched(self, key: OffsetKey) -> None:
        """``key`` was received from: ask for its stored offset at the next commit."""
        self._active.add(key)

    def due(self, positions: Mapping[OffsetKey, int]) -> list[tuple[OffsetKey, int]]:
        """The entries of the next commit (at most ``max_entries``; raised positions first, the rest
        wait for the next period), and forget the active keys it names."""
        raised = [(k, p) for k, p in sorted(positions.items()) if p > self.stored.get(k, 0)]
        named = {k for k, _ in raised}
        refresh = [(k, positions[k]) for k in sorted(self._active) if k in positions and k not in named]
        out = (raised + refresh)[: self.max_entries]
        self._active.difference_update(k for k, _ in out)
        return out

    def answered(self, offsets: Iterable[tuple[OffsetKey, int]]) -> None:
        """What the controllers hold after a commit (each named queue's offset)."""
        for key, offset in offsets:
            self.loaded(key, offset)
