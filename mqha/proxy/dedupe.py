"""Sends the proxy has in flight or stored, by the client's message id (core; docs/architecture.md §13).

A v2 client keeps its ``message_id`` across its own retries of one send. When an attempt reaches the
proxy while an earlier attempt of the same id is still being stored (the client gave up on its
deadline and tried again), the retry waits for that attempt instead of storing the message a second
time; a retry of an id stored within ``window_ms`` gets the stored answer again. A send whose outcome
was not a store (failed or unknown) is forgotten, so the client's retry sends it again: at least
once, the duplicate recognisable by its msgId.
"""

from __future__ import annotations

from collections import OrderedDict
from enum import Enum
from typing import Generic, TypeVar

Result = TypeVar("Result")


class Decision(Enum):
    """What an arriving attempt of a message does."""

    SEND = "send"  # nobody has it: this attempt sends it
    WAIT = "wait"  # an earlier attempt is storing it: wait for that one, then ask again
    STORED = "stored"  # stored already: answer with the stored result


class SendLedger(Generic[Result]):
    """Message ids in flight and recently stored; at most ``capacity`` stored ones are kept."""

    def __init__(self, window_ms: int, capacity: int) -> None:
        self.window_ms = window_ms
        self.capacity = capacity
        self._in_flight: set[str] = set()
        self._stored: OrderedDict[str, tuple[Result, int]] = OrderedDict()  # in finishing order

    def begin(self, msg_id: str, now_ms: int) -> tuple[Decision, Result | None]:
        """What an attempt of ``msg_id`` arriving at ``now_ms`` does; ``SEND`` marks it in flight."""
        self.expire(now_ms)
        if msg_id in self._in_flight:
            return Decision.WAIT, None
        stored = self._stored.get(msg_id)
        if stored is not None:
            return Decision.STORED, stored[0]
        self._in_flight.add(msg_id)
        return Decision.SEND, None

    def finish(self, msg_id: str, stored: Result | None, now_ms: int) -> None:
        """The attempt that sent ``msg_id`` ended: ``stored`` is its result if the message was stored."""
        self._in_flight.discard(msg_id)
        if stored is not None:
            self._stored[msg_id] = (stored, now_ms)
            self._stored.move_to_end(msg_id)
            if len(self._stored) > self.capacity:  # the window is enforced as attempts begin
                self.expire(now_ms)

    def expire(self, now_ms: int) -> None:
        """Forget stored ids older than the window, and the oldest beyond ``capacity``."""
        while self._stored:
            key, (_, at_ms) = next(iter(self._stored.items()))
            if len(self._stored) <= self.capacity and now_ms - at_ms <= self.window_ms:
                break
            del self._stored[key]

    def __len__(self) -> int:
        return len(self._in_flight) + len(self._stored)
