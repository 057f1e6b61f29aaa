"""Group commit for one broker group: concurrent sends coalesced into batch puts (shell; §13).

Every send through the proxy is one gRPC call and, without this, one HTTP put: the put path cost as
much CPU as gRPC itself. The policy is ``next_batch`` (pure): a send that finds the group idle is its
own put, made in the caller's task (no hand-over, so one sender sees no added latency); sends that
arrive while a put is out wait for it and then leave together as one batch (at most ``MAX_MESSAGES``
messages or ``MAX_BYTES`` of bodies) with the earliest deadline among them. A second put (up to
``MAX_IN_FLIGHT``) starts only for a full batch, so bursts beyond one batch per put still flow. A batch
is stored all or nothing with one status for all; one a broker refuses as invalid is sent again
message by message, so a bad message fails alone.
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


def next_batch(
    in_flight: int,
    sizes: Sequence[int],
    *,
    max_in_flight: int = MAX_IN_FLIGHT,
    max_messages: int = MAX_MESSAGES,
    max_bytes: int = MAX_BYTES,
) -> int:
    """How many of the waiting sends (their body ``sizes``, oldest first; at most ``max_messages + 1``
    are looked at) leave now as one put while ``in_flight`` puts are out; 0: they wait (pure).

    The batch is the longest prefix within ``max_messages`` and ``max_bytes``, and at least one send
    (a body too large on its own is the broker's to refuse). It leaves when no put is out, or when
    it is full (a limit held some back) and fewer than ``max_in_flight`` are out."""
    count = total = 0
    for size in sizes:
        if count >= max_messages or (count and total + size > max_bytes):
            break
        count += 1
        total += size
    if not count or in_flight >= max_in_flight:
        return 0
    full = count == max_messages or count < len(sizes)
    return count if in_flight == 0 or full else 0


@dataclass
class _Waiting:
    """One send waiting for its batch: the message, its deadline, where its result goes."""

    message: OutgoingMessage
    deadline: float
    answer: asyncio.Future[SendResult]


class GroupBatcher:
    """Puts into one group through its producer, coalescing what arrives while a put is out."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._waiting: deque[_Waiting] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, message: OutgoingMessage, timeout_s: float) -> SendResult:
        if self._in_flight == 0 and not self._waiting:  # idle: this send is its own put, right here
            self._in_flight += 1
            try:
                return (await self._producer.send_each([message], timeout=max(0.05, timeout_s)))[0]
            finally:
                self._in_flight -= 1
                self._start_batches()
        answer: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(message, time.monotonic() + timeout_s, answer))
        self._start_batches()
        return await answer

    def _start_batches(self) -> None:
        while self._waiting:
            sizes = [len(w.message.body) for w in islice(self._waiting, MAX_MESSAGES + 1)]
            count = next_batch(self._in_flight, sizes)
            if not count:
                return
            batch = [self._waiting.popleft() for _ in range(count)]
            self._in_flight += 1
            task = asyncio.ensure_future(self._put(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _put(self, batch: list[_Waiting]) -> None:
        try:
            timeout = max(0.05, min(w.deadline for w in batch) - time.monotonic())
            results = await self._producer.send_each([w.message for w in batch], timeout=timeout)
            if len(batch) > 1 and any(_invalid(r) for r in results):
                results = [await self._alone(w) for w in batch]
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
            self._in_flight -= 1
            self._start_batches()

    async def _alone(self, waiting: _Waiting) -> SendResult:
        timeout = max(0.05, waiting.deadline - time.monotonic())
        return (await self._producer.send_each([waiting.message], timeout=timeout))[0]

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _invalid(result: SendResult) -> bool:
    return result.status is SendStatus.FAILED and (result.error or "").startswith("MESSAGE_ILLEGAL")
