"""Group commit for one broker group: concurrent sends coalesced into batch puts (shell; §13).

Every send through the proxy is one gRPC call and, without this, one HTTP put: the put path cost as
much CPU as gRPC itself. Sends that arrive while ``MAX_IN_FLIGHT`` puts are out wait and leave
together as one batch (at most ``MAX_MESSAGES`` messages or ``MAX_BYTES`` of bodies), with the
earliest deadline among them; a lone send on an idle group goes at once. A batch is stored all or
nothing with one status for all; one a broker refuses as invalid is sent again message by message, so
a bad message fails alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

from mqha.client.producer import OutgoingMessage, Producer
from mqha.client.results import SendResult, SendStatus

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 4
MAX_MESSAGES = 64
MAX_BYTES = 1024 * 1024


@dataclass
class _Waiting:
    """One send waiting for its batch: the message, its deadline, where its result goes."""

    message: OutgoingMessage
    deadline: float
    answer: asyncio.Future[SendResult]


class GroupBatcher:
    """Puts into one group through its producer, coalescing what arrives while puts are in flight."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._waiting: deque[_Waiting] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, message: OutgoingMessage, timeout_s: float) -> SendResult:
        answer: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(message, time.monotonic() + timeout_s, answer))
        self._start_batches()
        return await answer

    def _start_batches(self) -> None:
        while self._waiting and self._in_flight < MAX_IN_FLIGHT:
            batch = [self._waiting.popleft()]
            size = len(batch[0].message.body)
            while self._waiting and len(batch) < MAX_MESSAGES:
                following = len(self._waiting[0].message.body)
                if size + following > MAX_BYTES:
                    break
                batch.append(self._waiting.popleft())
                size += following
            self._in_flight += 1
            task = asyncio.ensure_future(self._put(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _put(self, batch: list[_Waiting]) -> None:
        try:
            timeout = max(0.05, min(w.deadline for w in batch) - time.monotonic())
            log.debug("put of %d messages (%d more waiting)", len(batch), len(self._waiting))
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
