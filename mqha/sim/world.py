"""The simulated world: one seeded random source, the clock, the event queue and the network.

Everything that happens in a run is an event on one heap ordered by (due time, sequence number), so a
seed replays exactly. The network delivers a message after a random delay, may drop it (message
loss) and, since delays are drawn per message, reorders messages between the same two nodes; a
partition cuts a pair of nodes both ways (a message already under way is lost when it arrives).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Faults:
    """How often each kind of fault strikes (per scheduler step) and how the network misbehaves."""

    crash: float = 0.0
    pause: float = 0.0
    partition: float = 0.0
    power_loss: float = 0.0
    disk_wipe: float = 0.0
    controller_crash: float = 0.0
    split: float = 0.0  # the nodes split in two halves
    leader_split: float = 0.0  # the #7017 topology: the controller leader and the master cut off together
    group_power_loss: float = 0.0  # every broker at once
    disk_full: float = 0.0
    clone: float = 0.0  # a copy of a broker's store starts beside it
    message_loss: float = 0.0
    max_delay_ms: int = 30

    def any(self) -> bool:
        return any((self.crash, self.pause, self.partition, self.power_loss, self.disk_wipe))


@dataclass(order=True)
class _Event:
    """One scheduled action, ordered by due time, then by scheduling order."""

    due_ms: int
    seq: int
    action: Callable[[], None] = field(compare=False)


class World:
    """Clock, events and network of one run (``seed`` decides every random choice)."""

    def __init__(self, seed: int, faults: Faults) -> None:
        self.rng = random.Random(seed)
        self.faults = faults
        self.now_ms = 0
        self._events: list[_Event] = []
        self._seq = 0
        self.cut: set[frozenset[str]] = set()  # partitioned pairs of node names
        self.down: set[str] = set()  # crashed or paused nodes: they neither send nor receive
        self.trace: list[str] = []

    # -- events ------------------------------------------------------------------------------------

    def at(self, delay_ms: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._events, _Event(self.now_ms + max(0, delay_ms), self._seq, action))

    def run_until(self, end_ms: int) -> None:
        """Run every event due before ``end_ms``; the clock then reads ``end_ms``."""
        events = self._events
        while events and events[0].due_ms < end_ms:
            event = heapq.heappop(events)
            self.now_ms = event.due_ms
            event.action()
        self.now_ms = end_ms

    def next_number(self) -> int:
        self._seq += 1
        return self._seq

    def note(self, text: str) -> None:
        self.trace.append(f"{self.now_ms:>7} {text}")

    # -- network -----------------------------------------------------------------------------------

    def reachable(self, a: str, b: str) -> bool:
        return a not in self.down and b not in self.down and frozenset((a, b)) not in self.cut

    def send(self, src: str, dst: str, deliver: Callable[[], None], *, lossy: bool = True) -> None:
        """Deliver ``deliver`` at ``dst`` after a random delay, unless the pair is cut by then or the
        message is lost (``lossy``: datagram-like; a stream's bytes are never lost, only cut)."""
        if not self.reachable(src, dst):
            return
        if lossy and self.faults.message_loss and self.rng.random() < self.faults.message_loss:
            return
        delay = self.rng.randint(1, max(1, self.faults.max_delay_ms))

        def arrive() -> None:
            if self.reachable(src, dst):
                deliver()

        self.at(delay, arrive)
