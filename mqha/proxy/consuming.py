"""POP consumption for the v2 consumers: QueryAssignment, ReceiveMessage, AckMessage,
ChangeInvisibleDuration (shell; docs/architecture.md §13).

The decisions are ``mqha.proxy.pop``'s; this module reads the queues from each broker group's master
(``BrokerGroups.read_queue``), hands messages out in RocketMQ's stream order (status, messages, then
the delivery timestamp) and long-polls until the client's long polling time (capped at
``LONG_POLLING_TIMEOUT_S`` and its deadline) runs out: woken at once when this proxy stores a message
of the topic, else re-reading every ``POLL_PAUSE_S`` (messages sent through another proxy, or
invisibility that ran out).

Offsets: a queue starts where the controllers say the group got to (``OffsetStore.load``, one load
per group and topic serving its queues for a period; a receive while they cannot say skips the queue
rather than start it at 0), and
every ``flushConsumerOffsetInterval`` the acknowledged positions that rose since the last commit are
committed in one request (``OffsetCommits``), whose answer also moves a queue forward when another
proxy serving the group got further.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from mqha.proxy.brokers import BrokerGroups, QueueReadError
from mqha.proxy.messages import TAGS, StoredView, v2_message
from mqha.proxy.offset_store import OffsetStore
from mqha.proxy.pop import Handle, OffsetCommits, OffsetKey, PopQueue, tag_filter
from mqha.proxy.routes import status, topic_not_found
from mqha.proxy.settings import LONG_POLLING_TIMEOUT_S
from mqha.proxy.v2 import definition as d
from mqha.proxy.v2 import service as s
from mqha.wire.offsets_api import MAX_OFFSETS_PER_UPDATE

log = logging.getLogger(__name__)

POLL_PAUSE_S = 0.5
AUTO_RENEW_INVISIBLE_MS = 60_000
"""A hand-out with ``auto_renew`` stays invisible this long (the Java proxy's default; no renewal yet)."""
DEFAULT_INVISIBLE_MS = 30_000
MAX_BATCH = 32
MAX_COMMITS_PER_FLUSH = 8
"""Commit requests in one period at most (each up to ``MAX_OFFSETS_PER_UPDATE`` queues)."""


class PopConsumers:
    """Every consumer group's queues, as this proxy hands them out."""

    def __init__(self, config: Mapping[str, Any], groups: BrokerGroups) -> None:
        self._groups = groups
        self._margin_s: float = config["proxySendHoldMarginMillis"] / 1000
        self._queues: dict[OffsetKey, PopQueue] = {}
        self._locks: dict[OffsetKey, asyncio.Lock] = {}
        self._turn = 0
        self._arrivals: dict[str, asyncio.Event] = {}  # topic -> set when this proxy stores into it
        self._store = OffsetStore(config)
        self._commits = OffsetCommits(MAX_OFFSETS_PER_UPDATE)
        self._flush_s: float = config["flushConsumerOffsetInterval"] / 1000
        # (group, topic) -> (when loaded, its offsets by (broker group, queue)): reused for a period
        # only, so a queue first used later starts where another proxy may have taken the group since.
        self._loaded: dict[tuple[str, str], tuple[float, dict[tuple[str, int], int]]] = {}
        self._load_failed: dict[tuple[str, str], float] = {}  # (group, topic) -> when a load last failed
        self._flusher: asyncio.Task[None] | None = None

    async def close(self) -> None:
        """Stop committing; commit what was acknowledged since the last period first."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flush(), 3.0)
        await self._store.close()

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self._flush_s)
            try:
                await self.flush()
            except Exception:  # the loop must outlive any one failure; the next period tries again
                log.exception("committing consumer offsets")

    async def flush(self) -> None:
        """Commit the positions that rose (and ask for the ones in use); move queues forward that
        another proxy serving their group got further in."""
        for _ in range(MAX_COMMITS_PER_FLUSH):
            entries = self._commits.due({key: queue.committed for key, queue in self._queues.items()})
            if not entries:
                return
            answer = await self._store.commit(entries)
            if answer is None:
                return
            self._commits.answered(answer)
            for key, offset in answer:
                queue, lock = self._queues.get(key), self._locks.get(key)
                # Never while a fetch of the queue is under way (its read position would move under it).
                if (
                    queue is not None
                    and lock is not None
                    and not lock.locked()
                    and queue.fast_forward(offset)
                ):
                    log.info("%s: another proxy committed %d; going on from there", key, offset)

    def stored(self, topic: str) -> None:
        """This proxy stored a message of ``topic``: wake the receives long-polling it."""
        event = self._arrivals.pop(topic, None)
        if event is not None:
            event.set()

    async def _queue(self, key: OffsetKey) -> tuple[PopQueue, asyncio.Lock]:
        """The group's queue, made at first use at the offset the controllers hold (QueueReadError
        while they cannot answer: starting at 0 would hand everything out again)."""
        if key not in self._queues:
            group, topic, broker, queue_id = key
            loaded_at, offsets = self._loaded.get((group, topic), (0.0, None))
            if offsets is None or time.monotonic() - loaded_at > self._flush_s:
                failed_at = self._load_failed.get((group, topic))
                if failed_at is not None and time.monotonic() - failed_at < self._flush_s:
                    # One try per period: a receive over many queues must not wait for each in turn.
                    raise QueueReadError(f"the offsets of {group} in {topic}: no controller leader answered")
                offsets = await self._store.load(group, topic)
                if offsets is None:
                    self._load_failed[(group, topic)] = time.monotonic()
                    raise QueueReadError(f"the offsets of {group} in {topic}: no controller leader answered")
                self._load_failed.pop((group, topic), None)
                self._loaded[(group, topic)] = (time.monotonic(), offsets)
            if key not in self._queues:  # another receive may have made it meanwhile
                start = offsets.get((broker, queue_id), 0)
                self._queues[key] = PopQueue(start)
                self._locks[key] = asyncio.Lock()
                self._commits.loaded(key, start)
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_forever())
        self._commits.touched(key)
        return self._queues[key], self._locks[key]

    async def query_assignment(self, request: Any) -> Any:
        layout = await self._groups.layout(request.topic.name)
        if layout is None:
            return s.QueryAssignmentResponse(
                status=status(d.Code.TOPIC_NOT_FOUND, topic_not_found(request.topic.name))
            )
        groups = [entry.group for entry in layout if entry.read > 0]
        if not groups:
            return s.QueryAssignmentResponse(status=status(d.Code.NOT_FOUND, "no broker group is registered"))
        assignments = [
            d.Assignment(
                message_queue=d.MessageQueue(
                    topic=request.topic,
                    id=-1,  # any queue of that broker group: the proxy picks
                    permission=d.Permission.READ_WRITE,
                    broker=d.Broker(name=group, id=0, endpoints=request.endpoints),
                    accept_message_types=[d.MessageType.NORMAL],
                )
            )
            for group in groups
        ]
        return s.QueryAssignmentResponse(status=status(), assignments=assignments)

    async def receive(self, request: Any, remaining_s: float | None) -> AsyncIterator[Any]:
        """The ReceiveMessage stream."""
        found, problem = await self._collect(request, remaining_s)
        if problem is not None:
            yield s.ReceiveMessageResponse(status=problem)
        elif found:
            yield s.ReceiveMessageResponse(status=status())
            for message in found:
                yield s.ReceiveMessageResponse(message=message)
        else:
            yield s.ReceiveMessageResponse(status=status(d.Code.MESSAGE_NOT_FOUND, "no new message"))
        stamp = s.ReceiveMessageResponse()
        stamp.delivery_timestamp.GetCurrentTime()
        yield stamp

    async def _collect(self, request: Any, remaining_s: float | None) -> tuple[list[Any], Any]:
        expression = request.filter_expression
        if expression.type not in (d.FilterType.FILTER_TYPE_UNSPECIFIED, d.FilterType.TAG):
            return [], status(d.Code.UNSUPPORTED, "mqproxy filters by TAG only")
        tags = tag_filter(expression.expression)
        group, topic = request.group.name, request.message_queue.topic.name
        batch = max(1, min(request.batch_size or MAX_BATCH, MAX_BATCH))
        if request.auto_renew or not request.HasField("invisible_duration"):
            invisible_ms = AUTO_RENEW_INVISIBLE_MS if request.auto_renew else DEFAULT_INVISIBLE_MS
        else:
            invisible_ms = max(1, request.invisible_duration.ToMilliseconds())
        layout = await self._groups.layout(topic)
        if layout is None:
            return [], status(d.Code.TOPIC_NOT_FOUND, topic_not_found(topic))
        named = request.message_queue.broker.name
        # Every readable queue of the broker group, whatever queue the client names: RocketMQ's proxy
        # pops with queue id -1 too (and Node 1.0.8's SimpleConsumer only ever names queue 0).
        readable = {entry.group: entry.read for entry in layout if not named or entry.group == named}
        poll_s = (
            request.long_polling_timeout.ToMilliseconds() / 1000
            if request.HasField("long_polling_timeout")
            else 0
        )
        budget = 3.0 if remaining_s is None else max(0.05, remaining_s - self._margin_s)
        deadline = time.monotonic() + min(max(poll_s, 0.0), LONG_POLLING_TIMEOUT_S, budget)
        slots = [(broker, queue_id) for broker, reads in readable.items() for queue_id in range(reads)]
        out: list[Any] = []
        while True:
            self._turn += 1
            start = self._turn % len(slots) if slots else 0
            for broker, queue_id in slots[start:] + slots[:start]:
                if len(out) >= batch:
                    break
                key = (group, topic, broker, queue_id)
                try:
                    out += await self._take(key, tags, batch - len(out), invisible_ms, deadline)
                except QueueReadError as exc:
                    log.info("receive %s: %s", key, exc)
            pause = min(POLL_PAUSE_S, deadline - time.monotonic())
            if out or pause <= 0:
                return out, None
            arrival = self._arrivals.setdefault(topic, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrival.wait(), pause)

    async def _take(
        self,
        key: OffsetKey,
        tags: frozenset[str] | None,
        want: int,
        invisible_ms: int,
        deadline: float,
    ) -> list[Any]:
        _, topic, broker, queue_id = key
        queue, lock = await self._queue(key)
        out: list[Any] = []
        timeout = max(0.2, deadline - time.monotonic())
        async with lock:  # one fetch of a queue at a time: two would hand out the same messages
            for offset in queue.due(_now_ms(), want):  # visible again: read it back by its position
                views, _ = await self._groups.read_queue(
                    broker, topic, queue_id, offset, max_messages=1, timeout_s=timeout
                )
                if not views or views[0].offset != offset:
                    queue.skip(offset)  # gone (retention)
                    continue
                out.append(self._hand_out(queue, views[0], broker, invisible_ms))
            room = min(queue.room(), want - len(out))
            if room > 0:
                views, next_position = await self._groups.read_queue(
                    broker, topic, queue_id, queue.fetched_to, max_messages=room, timeout_s=timeout
                )
                queue.fetched([v.offset for v in views], next_position)
                for view in views:
                    if tags is not None and view.properties.get(TAGS) not in tags:
                        queue.skip(view.offset)
                    else:
                        out.append(self._hand_out(queue, view, broker, invisible_ms))
        return out

    @staticmethod
    def _hand_out(queue: PopQueue, view: StoredView, broker: str, invisible_ms: int) -> Any:
        token = secrets.token_hex(8)
        attempt = queue.hand_out(view.offset, _now_ms(), invisible_ms, token)
        message = v2_message(view, queue_offset=view.offset)
        system = message.system_properties
        system.receipt_handle = Handle(broker, view.queue_id, view.offset, token).text()
        system.delivery_attempt = attempt
        system.invisible_duration.FromMilliseconds(invisible_ms)
        return message

    def ack(self, request: Any) -> Any:
        results = []
        for entry in request.entries:
            handle = Handle.parse(entry.receipt_handle)
            key = (request.group.name, request.topic.name, handle.broker, handle.queue_id) if handle else None
            queue = self._queues.get(key) if key else None
            if handle is None or queue is None or not queue.ack(handle.offset, handle.token):
                code = status(d.Code.INVALID_RECEIPT_HANDLE, "unknown or stale receipt handle")
            else:
                code = status()
            results.append(
                s.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=code
                )
            )
        if len(results) == 1:
            top = results[0].status
        elif all(r.status.code == d.Code.OK for r in results):
            top = status()
        else:
            top = status(d.Code.MULTIPLE_RESULTS, "the entries ended differently")
        return s.AckMessageResponse(status=top, entries=results)

    def change_invisible_duration(self, request: Any) -> Any:
        handle = Handle.parse(request.receipt_handle)
        key = (request.group.name, request.topic.name, handle.broker, handle.queue_id) if handle else None
        queue = self._queues.get(key) if key else None
        token = secrets.token_hex(8)
        invisible_ms = max(0, request.invisible_duration.ToMilliseconds())
        if (
            handle is None
            or queue is None
            or not queue.change_invisible(handle.offset, handle.token, _now_ms(), invisible_ms, token)
        ):
            return s.ChangeInvisibleDurationResponse(
                status=status(d.Code.INVALID_RECEIPT_HANDLE, "unknown or stale receipt handle")
            )
        new = Handle(handle.broker, handle.queue_id, handle.offset, token)
        return s.ChangeInvisibleDurationResponse(status=status(), receipt_handle=new.text())


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
