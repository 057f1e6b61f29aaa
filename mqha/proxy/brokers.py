"""The broker groups behind the proxy and one mqha producer per group (shell; docs/architecture.md §13).

Groups and topics come from the controllers (``GET /v1/groups`` and ``GET /v1/topics`` on the leader,
through ``controller_client``), reused for ``proxyGroupRefreshMillis``; a topic's queues in each group
are ``mqha.proxy.routes.topic_layout``'s. Each group's master is followed by mqha's own
:class:`~mqha.client.producer.Producer`: it asks the controllers for the master's address
(replica-info) when a put is refused or a connection breaks, and retries within the deadline it is
given with the same msgId, so a send that meets a master crash waits for the new master instead of
failing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from mqha.client.producer import OutgoingMessage
from mqha.client.results import NoRouteError, Route, SendResult
from mqha.client.route import RouteResolver
from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer
from mqha.controller_client.policy import Policy
from mqha.errors import MqhaError, RemoteProtocolError
from mqha.proxy.batching import GroupBatcher
from mqha.proxy.config import controller_addresses
from mqha.proxy.messages import PutFields, StoredView
from mqha.proxy.puts import BrokerConnections, PutProducer
from mqha.proxy.routes import GroupQueues, topic_layout
from mqha.security.basic import basic_header
from mqha.security.credentials import User, parse_user
from mqha.wire.controller_api import GroupsPayload, TopicListPayload, TopicQueueData

log = logging.getLogger(__name__)
_LIST_TIMEOUT_S = 1.0
_READ_RETRY_PAUSE_S = 0.05


class QueueReadError(MqhaError):
    """A queue read that found no serving master in time."""


class BrokerGroups:
    """Every broker group registered with the controllers, with a producer for each."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._controllers = controller_addresses(config)
        self._refresh_s = config["proxyGroupRefreshMillis"] / 1000
        user_text = config["initAuthenticationUser"]
        self._user: User | None = parse_user(user_text) if user_text else None
        self._session: aiohttp.ClientSession | None = None
        self._caller: LeaderCaller | None = None
        self._groups: tuple[str, ...] = ()
        self._topics: dict[str, tuple[TopicQueueData, ...]] = {}
        self._layouts: dict[str, tuple[GroupQueues, ...] | None] = {}  # per topic, of the last listing
        self._auto_create: bool = config["autoCreateTopicEnable"]
        self._default_queue_nums: int = config["defaultTopicQueueNums"]
        self._listed_at: float | None = None
        self._lock = asyncio.Lock()
        self._producers: dict[str, PutProducer] = {}
        self._batchers: dict[str, GroupBatcher] = {}
        self._resolver: RouteResolver | None = None
        self._routes: dict[str, Route] = {}
        self._auth = {"Authorization": basic_header(self._user)} if self._user is not None else {}
        self._connections = BrokerConnections(self._auth)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        policy = Policy(rounds=1, discover=False, max_redirects=max(2, len(self._controllers)))
        self._caller = LeaderCaller(self._controllers, policy, session=self._session)
        self._resolver = RouteResolver(self._controllers, self._session)

    async def close(self) -> None:
        for batcher in self._batchers.values():
            await batcher.close()
        for producer in self._producers.values():
            await producer.close()
        self._producers.clear()
        await self._connections.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def names(self) -> tuple[str, ...]:
        """The groups' names; the last list when the controllers cannot answer right now."""
        fresh = self._listed_at is not None and time.monotonic() - self._listed_at < self._refresh_s
        if fresh and self._groups:
            return self._groups
        async with self._lock:  # concurrent requests share one listing
            fresh = self._listed_at is not None and time.monotonic() - self._listed_at < self._refresh_s
            if not (fresh and self._groups):
                await self._list()
        return self._groups

    async def layout(self, topic: str) -> tuple[GroupQueues, ...] | None:
        """``topic``'s queues in each group (``routes.topic_layout``); None when it does not exist."""
        groups = await self.names()
        try:
            return self._layouts[topic]
        except KeyError:
            layout = self._layouts[topic] = topic_layout(
                topic,
                groups,
                self._topics,
                auto_create=self._auto_create,
                default_queue_nums=self._default_queue_nums,
            )
            return layout

    async def _list(self) -> None:
        assert self._caller is not None
        try:
            answer = await self._caller.call("GET", "/v1/groups", timeout_s=_LIST_TIMEOUT_S)
            reply = answer.reply
            if not reply.ok:
                log.warning("listing broker groups: %s %s", reply.code.name, reply.remark)
                return
            payload = GroupsPayload.from_json(reply.payload)
        except (NoLeaderAnswer, RemoteProtocolError) as exc:
            log.warning("listing broker groups: no controller leader answered: %s", exc)
            return
        topics = await self._list_topics()
        if topics is None:
            return
        self._topics = topics
        self._layouts = {}
        self._groups = tuple(sorted({name for names in payload.clusters.values() for name in names}))
        self._listed_at = time.monotonic()

    async def _list_topics(self) -> dict[str, tuple[TopicQueueData, ...]] | None:
        """The controllers' topic table; None when it cannot be read now. A controller without topics
        (older than them: 404 code 3) has none, so every topic is auto-created."""
        assert self._caller is not None
        try:
            answer = await self._caller.call("GET", "/v1/topics", timeout_s=_LIST_TIMEOUT_S)
            reply = answer.reply
            if reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                return {}
            if not reply.ok:
                log.warning("listing topics: %s %s", reply.code.name, reply.remark)
                return None
            return dict(TopicListPayload.from_json(reply.payload).topic_queues)
        except (NoLeaderAnswer, RemoteProtocolError) as exc:
            log.warning("listing topics: no controller leader answered: %s", exc)
            return None

    def producer(self, group: str) -> PutProducer:
        """The producer that follows ``group``'s master (made at first use); its puts share the
        proxy's broker connections (``mqha.proxy.puts``)."""
        producer = self._producers.get(group)
        if producer is None:
            producer = PutProducer(
                self._controllers,
                group,
                user=self._user,
                connect_timeout=0.25,
                client_id=f"mqproxy-{group}",
                connections=self._connections,
            )
            self._producers[group] = producer
        return producer

    async def send(self, group: str, fields: PutFields, timeout_s: float) -> SendResult:
        """Put one message into ``group``'s master, following failovers for up to ``timeout_s``
        (coalesced with concurrent sends to the group: ``mqha.proxy.batching``)."""
        batcher = self._batchers.get(group)
        if batcher is None:
            batcher = self._batchers[group] = GroupBatcher(self.producer(group))
        return await batcher.send(_outgoing(fields), timeout_s)

    async def send_batch(self, group: str, batch: Sequence[PutFields], timeout_s: float) -> list[SendResult]:
        """Put ``batch`` into ``group``'s master as one put (a client's batch: not coalesced with other
        sends), following failovers for up to ``timeout_s``; one result per message."""
        return await self.producer(group).send_each(
            [_outgoing(fields) for fields in batch], timeout=timeout_s
        )

    async def read_queue(
        self, group: str, topic: str, queue_id: int, position: int, *, max_messages: int, timeout_s: float
    ) -> tuple[list[StoredView], int]:
        """One queue's messages at or after ``position`` from ``group``'s master (``GET
        /v1/queues/messages``, confirm-bounded), following the master for up to ``timeout_s``; the
        messages and the position to continue from. Raises :class:`QueueReadError`."""
        assert self._session is not None and self._resolver is not None
        deadline = time.monotonic() + timeout_s
        params = {
            "topic": topic,
            "queueId": str(queue_id),
            "offset": str(position),
            "maxMessages": str(max_messages),
        }
        last = "no attempt"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise QueueReadError(f"reading {topic}/{queue_id} of {group}: {last}")
            route = self._routes.get(group)
            try:
                if route is None:
                    self._resolver.timeout = max(0.05, min(1.0, remaining))
                    route = self._routes[group] = await self._resolver.resolve(group)
                async with self._session.get(
                    f"http://{route.master_address}/v1/queues/messages",
                    params=params,
                    headers=self._auth,
                    timeout=aiohttp.ClientTimeout(total=min(3.0, remaining), sock_connect=0.25),
                ) as response:
                    body = await response.json(content_type=None)
                    if response.status == 200 and isinstance(body, dict) and body.get("code") == 0:
                        views = [StoredView.from_json(item) for item in body["messages"]]
                        return views, int(body["nextOffset"])
                    last = f"HTTP {response.status} {body.get('remark') if isinstance(body, dict) else body}"
            except NoRouteError as exc:
                last = str(exc)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            self._routes.pop(group, None)  # a slave, a dead master or none: ask the controllers again
            await asyncio.sleep(min(_READ_RETRY_PAUSE_S, max(0.0, deadline - time.monotonic())))


def _outgoing(fields: PutFields) -> OutgoingMessage:
    return OutgoingMessage(
        fields.topic,
        fields.body,
        keys=fields.keys or None,
        properties=fields.properties,
        msg_id=fields.msg_id,
        born_timestamp=fields.born_timestamp,
    )
