"""Consumer: reads a broker group's log from an offset, following master changes (shell, aiohttp).

Usage::

    async with Consumer(controllers, "broker-a", offset=0) as consumer:
        while True:
            for message in await consumer.poll():
                handle(message)

Reads go to the group's current master (route from the controllers, refreshed when the master stops
answering or a broker refuses). A read never returns anything past the broker's ``confirmOffset``:
the broker enforces it, and the consumer drops any message beyond the ``confirmOffset`` of the reply
as a second guard -- so nothing it hands out can be truncated by a later failover, short of a loss
the controller declares (every replica lost it, docs/architecture.md §3.2). For that case each read
carries the epoch of the last message delivered; a broker whose log was cut back under that position
answers ``OFFSET_DIVERGED`` and the consumer reads again from where the epoch ends there, so nothing
written after the loss is skipped (``rewound_bytes`` counts what it reads twice). An offset the
broker's retention deleted answers ``OFFSET_TOO_SMALL``: the consumer continues from the log start the
broker names and counts the skipped bytes in ``skipped_bytes``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Sequence
from ssl import SSLContext

import aiohttp

from mqha.client.recording import RecordTarget
from mqha.client.results import Message, NoRouteError, ReadError, Route, describe, json_field
from mqha.client.route import RoutedClient
from mqha.security.credentials import User
from mqha.wire.broker_api import OFFSET_DIVERGED, OFFSET_TOO_SMALL

log = logging.getLogger(__name__)


_PAUSE_MIN = 0.005
_PAUSE_MAX = 0.1


class Consumer(RoutedClient):
    """Reads one broker group (``broker_name``) from ``offset`` (a message boundary; 0 = the start).

    Args:
        controllers: controller API addresses, ``"h:p;h:p"`` or a list.
        broker_name: the broker group to read.
        offset: where to start (commit-log offset of a message, e.g. a ``SendResult.offset``).
        max_messages: default batch size of :meth:`poll` (the broker caps it at 1024).
        request_timeout: bound of one read request.
        poll_timeout: default time :meth:`poll` keeps trying to reach a master before ``ReadError``.
        record_to: record every delivered message as a ``reads`` row.
        client_id: the ``client`` column of recorded rows.
        session: an aiohttp session to share (not closed by the consumer).
        ssl: a TLS context trusting the cluster's CA (``mqha.security.tls.trust_context``) for a cluster
            with ``tlsEnable=true``: every call goes over https.
        user: the broker API user (``initAuthenticationUser``) sent as HTTP Basic credentials with
            every read; needed when the brokers run with ``authenticationEnabled=true``.
        local_address: the local IP address its connections come from (as the producer's).
    """

    def __init__(
        self,
        controllers: str | Sequence[str],
        broker_name: str,
        *,
        offset: int = 0,
        max_messages: int = 32,
        request_timeout: float = 2.0,
        poll_timeout: float = 10.0,
        record_to: RecordTarget | None = None,
        client_id: str | None = None,
        session: aiohttp.ClientSession | None = None,
        user: User | None = None,
        ssl: SSLContext | None = None,
        local_address: str | None = None,
    ) -> None:
        self._set_up(
            "consumer",
            controllers,
            broker_name,
            session=session,
            user=user,
            ssl=ssl,
            client_id=client_id,
            record_to=record_to,
            local_address=local_address,
        )
        self.max_messages = max_messages
        self.request_timeout = request_timeout
        self.poll_timeout = poll_timeout
        self._offset = offset
        self.confirm_offset = -1
        self.route_refreshes = 0
        self.skipped_bytes = 0  # offsets jumped over because the broker had deleted them (retention)
        self.rewound_bytes = 0  # offsets read again because the log was cut back under them
        self._epoch: int | None = None  # the epoch of the last message delivered (sent with each read)

    @property
    def offset(self) -> int:
        """The offset the next poll reads from."""
        return self._offset

    def seek(self, offset: int) -> None:
        """Read from ``offset`` next (must be a message boundary)."""
        self._offset = offset
        self._epoch = None

    @property
    def route(self) -> Route | None:
        return self._route

    async def poll(self, max_messages: int | None = None, *, timeout: float | None = None) -> list[Message]:
        """The next messages at or after :attr:`offset` (possibly none), advancing the offset.

        Raises :class:`ReadError` when no master answered within ``timeout`` (default
        ``poll_timeout``) or the broker rejected the offset.
        """
        if self._session is None:
            await self.start()
        assert self._session is not None and self._resolver is not None
        deadline = time.monotonic() + (self.poll_timeout if timeout is None else timeout)
        limit = max_messages or self.max_messages
        pause = 0.0
        problem = "no attempt"
        while True:
            route = self._route
            if route is None:
                try:
                    route = self._route = await self._resolver.resolve(self.broker_name)
                    self.route_refreshes += 1
                except NoRouteError as exc:
                    problem = str(exc)
            if route is not None:
                query = f"/v1/messages?offset={self._offset}&maxMessages={limit}"
                if self._epoch is not None:
                    query += f"&epoch={self._epoch}"
                try:
                    async with self._session.get(
                        self._url(route.master_address, query),
                        headers=self._auth_headers(),
                        timeout=aiohttp.ClientTimeout(total=self.request_timeout),
                        ssl=self._ssl or True,
                    ) as response:
                        status = response.status
                        body = await response.json(content_type=None)
                except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                    status, body, problem = 0, None, f"{route.master_address}: {describe(exc)}"
                if status == 200 and isinstance(body, dict):
                    return self._deliver(route, body)
                if status == 400:
                    raise ReadError(f"offset {self._offset} refused: {json_field(body, 'remark')}")
                if status in {401, 403}:  # a retry elsewhere cannot fix missing or wrong credentials
                    raise ReadError(f"{route.master_address} refused the read: {json_field(body, 'remark')}")
                if status:
                    problem = f"{route.master_address}: HTTP {status} {json_field(body, 'remark') or ''}"
                self._route = None  # a fenced/dead/slow master: ask the controllers again
            if time.monotonic() >= deadline:
                raise ReadError(f"no master of {self.broker_name} served a read: {problem}")
            pause = min(max(pause * 2, _PAUSE_MIN), _PAUSE_MAX)
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))

    def _deliver(self, route: Route, body: dict[str, object]) -> list[Message]:
        confirm = body.get("confirmOffset")
        moved_to = body.get("nextOffset")
        if body.get("status") == OFFSET_TOO_SMALL and isinstance(moved_to, int) and moved_to > self._offset:
            # The broker's retention deleted what lay here (docs/architecture.md §4.2): go on from its log
            # start, as a RocketMQ consumer does on OFFSET_ILLEGAL; the skipped bytes are counted.
            log.warning(
                "%s: offset %d was deleted; continuing from %d", self.broker_name, self._offset, moved_to
            )
            self.skipped_bytes += moved_to - self._offset
            self._offset = moved_to
            return []
        if body.get("status") == OFFSET_DIVERGED and isinstance(moved_to, int) and moved_to < self._offset:
            # Read here before the log was cut back (a declared loss): what it holds from moved_to on
            # is new to this consumer (docs/architecture.md §4).
            log.warning(
                "%s: the log was cut back to %d under offset %d; reading again from there",
                self.broker_name,
                moved_to,
                self._offset,
            )
            self.rewound_bytes += self._offset - moved_to
            self._offset = moved_to
            return []
        if isinstance(confirm, int):
            self.confirm_offset = confirm
        out: list[Message] = []
        for item in body.get("messages") or []:  # type: ignore[union-attr]
            offset, size = int(item["offset"]), int(item["size"])
            if isinstance(confirm, int) and offset + size > confirm:
                break  # beyond what every SyncStateSet member holds: could still be truncated
            raw = item.get("body")
            data = (
                raw.encode("utf-8") if isinstance(raw, str) else base64.b64decode(item.get("bodyBase64", ""))
            )
            message = Message(
                broker_name=self.broker_name,
                offset=offset,
                size=size,
                msg_id=str(item.get("msgId")),
                topic=str(item.get("topic")),
                body=data,
                keys=item.get("keys") or "",
                properties=dict(item.get("properties") or {}),
                store_timestamp=item.get("storeTimestamp"),
                broker_id=route.master_broker_id,
                born_timestamp=item.get("bornTimestamp"),
            )
            out.append(message)
            if self._recorder is not None:
                self._recorder.read(message)
        if out:
            self._offset = out[-1].next_offset
            last_epoch = body.get("lastEpoch")
            self._epoch = last_epoch if isinstance(last_epoch, int) else None
        return out

    async def read_until(
        self, count: int, *, timeout: float = 10.0, idle_pause: float = 0.02
    ) -> list[Message]:
        """Poll until ``count`` messages were received or ``timeout`` passed; returns what arrived."""
        deadline = time.monotonic() + timeout
        out: list[Message] = []
        while len(out) < count and time.monotonic() < deadline:
            try:
                batch = await self.poll(
                    min(1024, count - len(out)), timeout=max(0.1, deadline - time.monotonic())
                )
            except ReadError:
                break
            out += batch
            if not batch:
                await asyncio.sleep(idle_pause)
        return out
