"""Group commit for one broker group: concurrent sends coalesced into batch puts (shell; §13).

Every send through the proxy is one gRPC call and, without this, one HTTP put, and every put costs
the group one replication round (the master's request, two slaves' appends and acknowledgements: about
1 ms of the brokers' CPU whether it carries one message or sixteen). The policy is ``next_batch``
(pure); this shell keeps the clock and one timer. A group *expects* as many sends as were inside the
batcher at once during its last cycle (from one put leaving to the next): the number of senders a
closed loop keeps busy; after a put of one send it expects one again, so another client's send that
came by once makes nobody wait. Expecting one, a send that finds the group idle is its own put, made in the
caller's task (no hand-over, no wait: one sender sees no added latency). Expecting more, sends that
find the group idle wait until as many as expected have come, at most ``MAX_HOLD_S`` after the first
of them, and leave as one put (at most ``MAX_MESSAGES`` messages or ``MAX_BYTES`` of bodies) with the
earliest deadline among them; a sender that stopped costs one cycle one hold, then the group expects
fewer. Sends arriving while a put is out wait for it. A second put (up to ``MAX_IN_FLIGHT``) starts
only for a full batch, so bursts beyond one batch per put still flow. A batch is stored all or
nothing with one status for all; one a broker refuses as invalid is sent again message by message,
so a bad message fails alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from mqha.client.producer import OutgoingMessage, Producer
from mqha.client.results import SendResult, SendStatus

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 4
MAX_MESSAGES = 64
MAX_BYTES = 1024 * 1024
MAX_HOLD_S = 0.02
"""How long sends on an idle group wait at most for the rest of the sends it expects: 16 senders'
sends reach the batcher within 2-4 ms on a quiet machine and up to ~15 ms at load 13 on 2 CPUs; a
client that sends without waiting for answers (an open loop) can pay up to this much latency."""


def next_batch(
    in_flight: int,
    sizes: Sequence[int],
    *,
    expected: int = 1,
    waited_s: float = 0.0,
    max_hold_s: float = MAX_HOLD_S,
    max_in_flight: int = MAX_IN_FLIGHT,
    max_messages: int = MAX_MESSAGES,
    max_bytes: int = MAX_BYTES,
) -> int:
    """How many of the waiting sends (their body ``sizes``, oldest first; at most ``max_messages + 1``
    are looked at) leave now as one put while ``in_flight`` puts are out; 0: they wait (pure).

    The batch is the longest prefix within ``max_messages`` and ``max_bytes``, and at least one send
    (a body too large on its own is the broker's to refuse). It leaves when it is full (a limit held
    some back) and fewer than ``max_in_flight`` puts are out; or when none is out and it holds the
    ``expected`` number of sends, or the oldest of them has ``waited_s`` ``max_hold_s`` for them."""
    count = total = 0
    for size in sizes:
        if count >= max_messages or (count and total + size > max_bytes):
            break
        count += 1
        total += size
    if not count or in_flight >= max_in_flight:
        return 0
    if count == max_messages or count < len(sizes):  # full
        return count
    return count if in_flight == 0 and (count >= expected or waited_s >= max_hold_s) else 0


@dataclass
class _Waiting:
    """One send waiting for its batch: the message, its deadline, where its result goes."""

    message: OutgoingMessage
    deadline: float
    answer: asyncio.Future[SendResult]


class GroupBatcher:
    """Puts into one group through its producer, coalescing concurrent sends (module docstring)."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._waiting: deque[_Waiting] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._inside = 0  # sends in ``send`` now
        self._peak = 0  # the most inside at once since the last put left
        self._expected = 1  # what the group expects (module docstring)
        self._first_arrival = 0.0  # of the oldest waiting send
        self._timer: asyncio.TimerHandle | None = None

    async def send(self, message: OutgoingMessage, timeout_s: float) -> SendResult:
        self._inside += 1
        self._peak = max(self._peak, self._inside)
        try:
            if self._in_flight == 0 and not self._waiting and self._expected == 1:
                return await self._alone(message, timeout_s)  # one sender: its own put, right here
            answer: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
            now = time.monotonic()
            if not self._waiting:
                self._first_arrival = now
            self._waiting.append(_Waiting(message, now + timeout_s, answer))
            self._start_batches()
            return await answer
        finally:
            self._inside -= 1

    async def _alone(self, message: OutgoingMessage, timeout_s: float) -> SendResult:
        self._leaving(1)
        self._in_flight += 1
        try:
            return (await self._producer.send_each([message], timeout=max(0.05, timeout_s)))[0]
        finally:
            self._returned()

    def _leaving(self, count: int) -> None:
        """A put of ``count`` sends leaves: this cycle's peak is what the next one expects, unless
        the put carried one send (a lone sender, or another's send that came by once): then one."""
        self._expected = self._peak if count > 1 else 1
        self._peak = self._inside

    def _returned(self) -> None:
        self._in_flight -= 1
        self._start_batches()

    def _start_batches(self) -> None:
        while self._waiting:
            now = time.monotonic()
            waited = now - self._first_arrival
            sizes = [len(w.message.body) for w in islice(self._waiting, MAX_MESSAGES + 1)]
            count = next_batch(self._in_flight, sizes, expected=self._expected, waited_s=waited)
            if not count:
                if self._in_flight == 0 and self._timer is None:  # held for more: look again then
                    self._timer = asyncio.get_running_loop().call_later(
                        max(0.0, MAX_HOLD_S - waited), self._on_timer
                    )
                return
            batch = [self._waiting.popleft() for _ in range(count)]
            if self._waiting:
                self._first_arrival = now
            self._leaving(count)
            self._in_flight += 1
            task = asyncio.ensure_future(self._put(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _on_timer(self) -> None:
        self._timer = None
        self._start_batches()

    async def _put(self, batch: list[_Waiting]) -> None:
        try:
            timeout = max(0.05, min(w.deadline for w in batch) - time.monotonic())
            results = await self._producer.send_each([w.message for w in batch], timeout=timeout)
            if len(batch) > 1 and any(_invalid(r) for r in results):
                results = [await self._retry_alone(w) for w in batch]
            for waiting, result in zip(batch, results, strict=True):
                if not waiting.answer.done():
                    waiting.answer.set_result(result)
        except BaseException as exc:  # every waiter gets an answer, whatever happened
            for waiting in batch:
                if not waiting.answer.done():
                    waiting.answer.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._returned()

    async def _retry_alone(self, waiting: _Waiting) -> SendResult:
        timeout = max(0.05, waiting.deadline - time.monotonic())
        return (await self._producer.send_each([waiting.message], timeout=timeout))[0]

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _invalid(result: SendResult) -> bool:
    return result.status is SendStatus.FAILED and (result.error or "").startswith("MESSAGE_ILLEGAL")
