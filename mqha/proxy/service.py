"""``apache.rocketmq.v2.MessagingService`` over mqha's broker groups (shell, grpc.aio; §13).

Implemented: QueryRoute, Telemetry (answers ``Settings``), Heartbeat, SendMessage,
NotifyClientTermination, and POP consumption (QueryAssignment, ReceiveMessage, AckMessage,
ChangeInvisibleDuration; ``mqha.proxy.consuming``). Every other RPC answers UNIMPLEMENTED naming itself.

A send is held, not failed, while its group elects a new master: the group's producer retries until
``proxySendHoldMarginMillis`` before the client's deadline, so a client sees an answer in time and,
in the common case, no error at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import grpc

from mqha.client.results import SendResult, SendStatus
from mqha.proxy.brokers import BrokerGroups
from mqha.proxy.consuming import PopConsumers
from mqha.proxy.dedupe import Decision, SendLedger
from mqha.proxy.messages import MessageRefused, put_fields
from mqha.proxy.routes import QueueChooser, query_route, status, topic_not_found
from mqha.proxy.settings import settings_reply
from mqha.proxy.v2 import definition as d
from mqha.proxy.v2 import service as s
from mqha.proxy.v2 import service_grpc as sg

log = logging.getLogger(__name__)

IMPLEMENTED = frozenset(
    {
        "QueryRoute",
        "Telemetry",
        "Heartbeat",
        "SendMessage",
        "NotifyClientTermination",
        "QueryAssignment",
        "ReceiveMessage",
        "AckMessage",
        "ChangeInvisibleDuration",
    }
)
NO_DEADLINE_S = 10.0
"""How long a send is held when the client set no deadline."""
DEDUPE_WINDOW_MS = 60_000
DEDUPE_CAPACITY = 100_000

# The codes a send answers, looked up once (each d.Code.X is a Python-level lookup).
_OK, _BAD_REQUEST, _FORBIDDEN = d.Code.OK, d.Code.BAD_REQUEST, d.Code.FORBIDDEN
_PROXY_TIMEOUT, _MULTIPLE_RESULTS = d.Code.PROXY_TIMEOUT, d.Code.MULTIPLE_RESULTS
# mqha's stored statuses as the v2 codes the Java proxy answers (SendMessageActivity): the client
# retries the two timeouts with the same message id.
_STORED_CODES = {
    SendStatus.PUT_OK: d.Code.OK,
    SendStatus.FLUSH_DISK_TIMEOUT: d.Code.MASTER_PERSISTENCE_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: d.Code.SLAVE_PERSISTENCE_TIMEOUT,
}


def entry_for(msg_id: str, result: SendResult) -> Any:
    """A ``SendResultEntry`` from what mqha's producer reports (pure)."""
    if result.status in _STORED_CODES:
        code = _STORED_CODES[result.status]
        text = "OK" if code == _OK else result.status.value
        return s.SendResultEntry(status=status(code, text), message_id=msg_id, offset=result.offset or 0)
    if result.status is SendStatus.FAILED and (result.error or "").startswith("MESSAGE_ILLEGAL"):
        return s.SendResultEntry(status=status(_BAD_REQUEST, result.error or ""), message_id=msg_id)
    if result.status is SendStatus.FAILED and (result.error or "").startswith("NO_PERMISSION"):
        return s.SendResultEntry(status=status(_FORBIDDEN, result.error or ""), message_id=msg_id)
    # No master in time, or an answer that never came: the client may retry (same message id).
    why = f"{result.status.value} after {result.attempts} attempts: {result.error or 'no master in time'}"
    return s.SendResultEntry(status=status(_PROXY_TIMEOUT, why), message_id=msg_id)


class ClientSessionRpcs(sg.MessagingServiceServicer):
    """The RPCs that keep a client's session: Heartbeat, NotifyClientTermination, Telemetry (Settings)."""

    _max_body: int

    async def Heartbeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return s.HeartbeatResponse(status=status())

    async def NotifyClientTermination(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return s.NotifyClientTerminationResponse(status=status())

    async def Telemetry(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async for command in requests:
            if command.WhichOneof("command") == "settings":
                reply = settings_reply(command.settings, max_body_size=self._max_body)
                yield s.TelemetryCommand(status=status(), settings=reply)


class MessagingService(ClientSessionRpcs):
    """The servicer; one per process."""

    def __init__(self, config: Mapping[str, Any], groups: BrokerGroups) -> None:
        self._groups = groups
        self._max_body: int = config["maxMessageSize"]
        self._margin_s: float = config["proxySendHoldMarginMillis"] / 1000
        self._chooser = QueueChooser()
        self._ledger: SendLedger[Any] = SendLedger(DEDUPE_WINDOW_MS, DEDUPE_CAPACITY)
        self._done: dict[str, asyncio.Event] = {}  # message id -> set when its in-flight send ends
        self._pop = PopConsumers(config, groups)

    async def close(self) -> None:
        """Commit the consumer groups' last acknowledged positions and stop committing."""
        await self._pop.close()

    async def QueryRoute(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        layout = await self._groups.layout(request.topic.name)
        return query_route(request.topic, request.endpoints, layout)

    async def QueryAssignment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._pop.query_assignment(request)

    async def ReceiveMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async for response in self._pop.receive(request, context.time_remaining()):
            yield response

    async def AckMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return self._pop.ack(request)

    async def ChangeInvisibleDuration(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return self._pop.change_invisible_duration(request)

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        messages = request.messages
        if not messages:  # RocketMQ's proxy: MESSAGE_CORRUPTED
            return s.SendMessageResponse(status=status(d.Code.MESSAGE_CORRUPTED, "no message to send"))
        remaining = context.time_remaining()
        budget = NO_DEADLINE_S if remaining is None else remaining - self._margin_s
        deadline = time.monotonic() + max(0.05, budget)
        if len(messages) == 1:
            entry = await self._send_one(messages[0], deadline)
            return s.SendMessageResponse(status=entry.status, entries=[entry])
        topic = messages[0].topic
        if any(message.topic != topic for message in messages):
            return s.SendMessageResponse(
                status=status(d.Code.MESSAGE_CORRUPTED, "topic in message is not same")
            )
        entries = await self._send_batch(messages, deadline)
        return s.SendMessageResponse(status=batch_status(entries), entries=entries)

    async def _send_one(self, message: Any, deadline: float) -> Any:
        msg_id = message.system_properties.message_id
        while True:
            decision, stored = self._ledger.begin(msg_id, _now_ms())
            if decision is Decision.STORED:
                return stored
            if decision is Decision.SEND:
                break
            # Another attempt of this message is being stored: its outcome is this one's.
            done = self._done.setdefault(msg_id, asyncio.Event())
            try:
                await asyncio.wait_for(done.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return s.SendResultEntry(
                    status=status(
                        d.Code.PROXY_TIMEOUT, "an earlier attempt of this message is still running"
                    ),
                    message_id=msg_id,
                )
        entry = None
        try:
            entry = await self._store(message, deadline)
        finally:
            self._finish(msg_id, entry, _now_ms())
        return entry

    def _finish(self, msg_id: str, entry: Any, now_ms: int) -> None:
        """End this attempt of ``msg_id``: the ledger keeps an entry that stored it (None: nothing
        stored), and attempts of other requests waiting for it wake."""
        stored_ok = entry is not None and entry.status.code == _OK
        self._ledger.finish(msg_id, entry if stored_ok else None, now_ms)
        event = self._done.pop(msg_id, None)
        if event is not None:
            event.set()

    async def _store(self, message: Any, deadline: float) -> Any:
        msg_id = message.system_properties.message_id
        target = await self._queue_for(message.topic.name)
        if not isinstance(target, tuple):
            return s.SendResultEntry(status=target, message_id=msg_id)
        group, queue_id = target
        try:
            fields = put_fields(message, queue_id, self._max_body)
        except MessageRefused as exc:
            return s.SendResultEntry(status=status(exc.code, str(exc)), message_id=msg_id)
        result = await self._groups.send(group, fields, max(0.05, deadline - time.monotonic()))
        self._stored(group, result, fields.topic)
        return entry_for(msg_id, result)

    async def _queue_for(self, topic: str) -> tuple[str, int] | Any:
        """The group and queue a send of ``topic`` goes to, or the ``Status`` that refuses it."""
        layout = await self._groups.layout(topic)
        if layout is None:
            return status(d.Code.TOPIC_NOT_FOUND, topic_not_found(topic))
        if not layout:
            return status(d.Code.PROXY_TIMEOUT, "no broker group is registered with the controllers")
        try:
            return self._chooser.choose(topic, layout)
        except ValueError:
            forbidden = f"the topic[{topic}] sending message is forbidden: it has no writable queue"
            return status(d.Code.FORBIDDEN, forbidden)

    def _stored(self, group: str, result: SendResult, topic: str) -> None:
        """Wake the topic's long polls when ``result`` stored a message; log one that did not."""
        if result.status in _STORED_CODES:
            self._pop.stored(topic)
        else:
            log.info("send %s to %s: %s (%s)", result.msg_id, group, result.status.value, result.error)

    async def _send_batch(self, messages: Any, deadline: float) -> list[Any]:
        """Several messages of one topic in one request: one queue and one put, as RocketMQ's proxy
        sends them as one batch. A batch holding a message id the ledger knows (a retry, an attempt in
        flight, or the same id twice) goes message by message instead, so the ledger answers each."""
        now = _now_ms()
        ids = [message.system_properties.message_id for message in messages]
        begun: list[str] = []
        for msg_id in ids:
            decision, _ = self._ledger.begin(msg_id, now)
            if decision is not Decision.SEND:
                for held in begun:  # held for no time: nobody waits on them
                    self._finish(held, None, now)
                return [await self._send_one(message, deadline) for message in messages]
            begun.append(msg_id)
        entries: list[Any] | None = None
        try:
            entries = await self._store_batch(messages, ids, deadline)
        finally:
            now = _now_ms()
            for index, msg_id in enumerate(ids):
                self._finish(msg_id, entries[index] if entries is not None else None, now)
        return entries

    async def _store_batch(self, messages: Any, ids: list[str], deadline: float) -> list[Any]:
        target = await self._queue_for(messages[0].topic.name)
        if not isinstance(target, tuple):
            return [s.SendResultEntry(status=target, message_id=msg_id) for msg_id in ids]
        group, queue_id = target
        try:
            fields = [put_fields(message, queue_id, self._max_body) for message in messages]
        except MessageRefused as exc:  # the batch is refused whole, as one put would be
            return [s.SendResultEntry(status=status(exc.code, str(exc)), message_id=msg_id) for msg_id in ids]
        results = await self._groups.send_batch(group, fields, max(0.05, deadline - time.monotonic()))
        for result in results:
            self._stored(group, result, fields[0].topic)
        return [entry_for(msg_id, result) for msg_id, result in zip(ids, results, strict=True)]


def batch_status(entries: list[Any]) -> Any:
    """The status of a response to several messages: their one code, else MULTIPLE_RESULTS (pure; as
    RocketMQ's proxy answers)."""
    codes = {entry.status.code for entry in entries}
    if len(codes) > 1:
        return status(_MULTIPLE_RESULTS, "the messages ended differently: see the entries")
    return entries[0].status


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _unimplemented(name: str) -> Any:
    async def handler(self: MessagingService, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED,
            f"mqproxy does not implement {name} yet (docs/architecture.md §13 lists what it does)",
        )

    handler.__name__ = name
    return handler


for _method in s.DESCRIPTOR.services_by_name["MessagingService"].methods:
    if _method.name not in IMPLEMENTED:
        setattr(MessagingService, _method.name, _unimplemented(_method.name))
