"""Producer: sends messages to a broker group's master and survives failovers (shell, aiohttp).

Usage::

    async with Producer("127.0.0.1:9878;127.0.0.1:9888", "broker-a") as producer:
        result = await producer.send("orders", b"hello", keys="order-1")
        if result.ok: ...

How a send proceeds (within ``send_timeout``, default 10 s):

1. the route (master address) comes from the controllers' replica-info (``RouteResolver``), cached;
2. the message gets a msgId that is unique for this send and stays the same across retries, so a
   retried message stored twice is recognisable as one (``duplicate`` in the history checks);
3. POST ``/v1/messages`` to the master:

   * ``PUT_OK`` / ``FLUSH_*_TIMEOUT`` → done: the broker stored it; the status says how safely
     (after ``FLUSH_SLAVE_TIMEOUT`` the next send asks the controllers for the route again: a
     master that cannot reach its slaves may have been replaced);
   * refused before anything was stored -- a slave's or fenced broker's 503 SERVICE_NOT_AVAILABLE,
     IN_SYNC_REPLICAS_NOT_ENOUGH, a refused connection -- → the route is refreshed at once and the
     send retried (a short doubling pause only while the route stays the same);
   * the request was written and no answer came (timeout, connection reset, a 5xx without a status)
     → the outcome is *unknown*; it is retried (``retry_unknown``, same msgId) and, if no later
     attempt is acknowledged before the deadline, reported as ``UNKNOWN`` -- never as failed;
   * an invalid message (400) or missing/wrong credentials (401/403) → ``FAILED`` at once.

There is no periodic route poll: stale routes are discovered by the failure that they cause.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any

import aiohttp

from mqha.client.recording import RecordTarget
from mqha.client.results import NoRouteError, Route, SendResult, SendStatus, describe, json_field
from mqha.client.route import RoutedClient
from mqha.security.credentials import User
from mqha.wire.broker_api import PUT_PATH

_STORED = {s.value: s for s in SendStatus if s.stored}
_RETRY_PAUSE_MIN = 0.005
_RETRY_PAUSE_MAX = 0.1

Body = bytes | str


def _message_json(
    topic: str,
    body: Body,
    msg_id: str,
    keys: str | None,
    properties: Mapping[str, str] | None,
    *,
    born_timestamp: int | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"topic": topic, "msgId": msg_id}
    if born_timestamp is not None:
        out["bornTimestamp"] = born_timestamp
    if isinstance(body, str):
        out["body"] = body
    else:
        try:
            out["body"] = body.decode("utf-8")  # readable on the wire and in the log when it can be
        except UnicodeDecodeError:
            import base64

            out["bodyBase64"] = base64.b64encode(body).decode("ascii")
    if keys:
        out["keys"] = keys
    if properties:
        out["properties"] = dict(properties)
    return out


async def _headers_sent(
    session: aiohttp.ClientSession, ctx: types.SimpleNamespace, params: aiohttp.TraceRequestHeadersSentParams
) -> None:
    # Once the headers are on the wire the broker may act on the request: from here on a lost answer
    # means "unknown", not "not stored".
    request_ctx = ctx.trace_request_ctx
    if request_ctx is not None:
        request_ctx.written = True


@dataclass(frozen=True)
class OutgoingMessage:
    """One message of :meth:`Producer.send_each`; ``msg_id`` None: the producer assigns one."""

    topic: str
    body: Body
    keys: str | None = None
    properties: Mapping[str, str] | None = None
    msg_id: str | None = None
    born_timestamp: int | None = None


@dataclass
class _Attempt:
    """What one request taught us."""

    kind: str  # "done" | "refused" (nothing stored) | "unknown" (written, no answer) | "invalid"
    body: Any = None
    error: str | None = None


# Refusals after which the broker stored nothing (docs/reference-behaviour.md §15 step 1): a slave or fenced
# broker, or too few in-sync replicas. Safe to retry anywhere.
REFUSED_STATUSES = frozenset({"SERVICE_NOT_AVAILABLE", "IN_SYNC_REPLICAS_NOT_ENOUGH"})


def classify_reply(http_status: int, body: Any) -> _Attempt:
    """What a broker's answer to POST ``/v1/messages`` means for the send (pure).

    ``done``: stored (any stored status, single or batch shape); ``invalid``: the request itself is
    wrong (400/413) or not authenticated (401/403), never retried; ``refused``: nothing stored, retry;
    ``unknown``: anything else -- a 5xx without a refusal status may come from a put path that had
    already appended.
    """
    put_status = json_field(body, "status")
    if http_status == 200 and (put_status in _STORED or json_field(body, "results")):
        return _Attempt("done", body)
    remark = json_field(body, "remark") or ""
    if http_status in {400, 413}:
        return _Attempt("invalid", body, f"MESSAGE_ILLEGAL: {remark}")
    if http_status in {401, 403}:  # refused before anything was read; a retry cannot succeed
        return _Attempt("invalid", body, f"NO_PERMISSION: {remark}")
    if http_status == 503 and put_status in REFUSED_STATUSES:
        return _Attempt("refused", body, f"{put_status}: {remark}")
    return _Attempt("unknown", body, f"HTTP {http_status} {put_status or ''} {remark}".strip())


@dataclass
class _Tracking:
    """What is known about one send across its attempts."""

    ids: list[str]
    started: float
    batch: bool
    attempts: int = 0
    first_error_at: float | None = None
    unknown: bool = False  # some attempt was written and not answered: it may have been stored
    last_error: str | None = None

    def failed(self, attempt: _Attempt) -> None:
        if self.first_error_at is None:
            self.first_error_at = time.monotonic()
        self.unknown = self.unknown or attempt.kind == "unknown"
        self.last_error = attempt.error

    def final(self, broker_name: str) -> list[SendResult]:
        """Results of a send that got no stored answer: UNKNOWN if any attempt may have stored it."""
        status = SendStatus.UNKNOWN if self.unknown else SendStatus.FAILED
        now = time.monotonic()
        return [
            SendResult(
                msg_id=i,
                status=status,
                broker_name=broker_name,
                attempts=self.attempts,
                started_at=self.started,
                first_error_at=self.first_error_at,
                completed_at=now,
                error=self.last_error,
            )
            for i in self.ids
        ]


class Producer(RoutedClient):
    """Sends to one broker group (``broker_name``); see the module docstring.

    Args:
        controllers: controller API addresses, ``"h:p;h:p"`` or a list.
        broker_name: the broker group (``brokerName``) to send to.
        send_timeout: default deadline of one ``send`` including retries (seconds).
        request_timeout: bound of one HTTP request once connected; keep it above the broker's
            ``slaveTimeout`` so a replication timeout comes back as ``FLUSH_SLAVE_TIMEOUT``.
        connect_timeout: bound of one TCP connect (a dead master refuses at once; a hung host does not).
        retry_unknown: retry a send whose request was written but not answered (same msgId: at least
            once, duplicates recognisable); False reports ``UNKNOWN`` after the first such attempt.
        record_to: record every result as an ``acks`` row (a directory, a ``.db`` file or a recorder).
        client_id: the ``client`` column of recorded rows (default ``producer-<pid>-<random>``).
        ack_mode: the ``ackMode`` column; default: asked from the broker's ``/v1/status`` once per master.
        session: an aiohttp session to share (not closed by the producer); default: its own.
        ssl: a TLS context trusting the cluster's CA (``mqha.security.tls.trust_context``) for a cluster
            with ``tlsEnable=true``: every call goes over https.
        user: the broker API user (``initAuthenticationUser``) sent as HTTP Basic credentials with
            every put; needed when the brokers run with ``authenticationEnabled=true``.
        local_address: the local IP address its connections come from (RocketMQ's ``clientIP``; e.g.
            one loopback address per client, so a packet filter can tell clients apart).
    """

    def __init__(
        self,
        controllers: str | Sequence[str],
        broker_name: str,
        *,
        send_timeout: float = 10.0,
        request_timeout: float = 3.0,
        connect_timeout: float = 0.5,
        route_timeout: float = 1.0,
        retry_unknown: bool = True,
        record_to: RecordTarget | None = None,
        client_id: str | None = None,
        ack_mode: str | None = None,
        session: aiohttp.ClientSession | None = None,
        user: User | None = None,
        ssl: SSLContext | None = None,
        local_address: str | None = None,
    ) -> None:
        self._set_up(
            "producer",
            controllers,
            broker_name,
            session=session,
            user=user,
            ssl=ssl,
            client_id=client_id,
            record_to=record_to,
            local_address=local_address,
        )
        self.send_timeout = send_timeout
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.retry_unknown = retry_unknown
        self._route_timeout = route_timeout
        self._route_lock = asyncio.Lock()
        self._ack_modes: dict[str, str | None] = {}
        self._fixed_ack_mode = ack_mode
        # 32 hex digits like RocketMQ's client msgIds: a random per-producer prefix and a counter.
        self._id_prefix = os.urandom(8).hex().upper()
        self._counter = itertools.count()
        self.route_refreshes = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def _new_session(self) -> aiohttp.ClientSession:
        trace = aiohttp.TraceConfig()
        trace.on_request_headers_sent.append(_headers_sent)
        return aiohttp.ClientSession(
            connector=self._connector(limit=64, force_close=False), trace_configs=[trace]
        )

    @property
    def route(self) -> Route | None:
        """The route in use (None until the first send or after a failure)."""
        return self._route

    def new_msg_id(self) -> str:
        return f"{self._id_prefix}{next(self._counter):016X}"

    # -- sending -----------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        body: Body,
        keys: str | None = None,
        properties: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        msg_id: str | None = None,
        born_timestamp: int | None = None,
    ) -> SendResult:
        """Send one message; never raises for network or broker outcomes (see :class:`SendStatus`).

        ``msg_id``: the caller's id for the message (mqproxy passes the v2 client's), kept across
        retries like a generated one; ``born_timestamp`` (ms): when the message was made (default: the
        store timestamp)."""
        msg_id = msg_id or self.new_msg_id()
        payload = _message_json(topic, body, msg_id, keys, properties, born_timestamp=born_timestamp)
        return (await self._send(payload, [msg_id], timeout))[0]

    async def send_batch(
        self,
        topic: str,
        bodies: Sequence[Body],
        keys: Sequence[str | None] | None = None,
        *,
        timeout: float | None = None,
    ) -> list[SendResult]:
        """Send messages as one batch (one request, stored contiguously, one status for all); returns
        one result per message, in order."""
        if not bodies:
            return []
        ids = [self.new_msg_id() for _ in bodies]
        key_list = list(keys) if keys is not None else [None] * len(bodies)
        if len(key_list) != len(bodies):
            raise ValueError("keys must have one entry per body")
        payload = {
            "messages": [
                _message_json(topic, b, i, k, None) for b, i, k in zip(bodies, ids, key_list, strict=True)
            ]
        }
        return await self._send(payload, ids, timeout)

    async def send_each(
        self, messages: Sequence[OutgoingMessage], *, timeout: float | None = None
    ) -> list[SendResult]:
        """Send prepared messages, each with its own topic, keys, properties, msgId and born timestamp,
        as one batch (one request, all or nothing, one status for all; mqproxy coalesces concurrent
        sends this way); one result per message, in order."""
        if not messages:
            return []
        ids = [m.msg_id or self.new_msg_id() for m in messages]
        payload = {
            "messages": [
                _message_json(m.topic, m.body, i, m.keys, m.properties, born_timestamp=m.born_timestamp)
                for m, i in zip(messages, ids, strict=True)
            ]
        }
        return await self._send(payload, ids, timeout)

    async def _send(self, payload: dict[str, Any], ids: list[str], timeout: float | None) -> list[SendResult]:
        if self._session is None:
            await self.start()
        track = _Tracking(ids, time.monotonic(), batch="messages" in payload)
        deadline = track.started + (self.send_timeout if timeout is None else timeout)
        failed_address: str | None = None
        pause = 0.0
        while True:
            route = await self._current_route(deadline)
            if route is not None:
                if route.master_address == failed_address and pause:
                    # The controllers still name the master that just failed: give them a moment.
                    await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                track.attempts += 1
                attempt = await self._post(route, payload, deadline)
                if attempt.kind == "done":
                    results = self._results(route, attempt.body, track)
                    if any(r.status is SendStatus.FLUSH_SLAVE_TIMEOUT for r in results):
                        # Stored but not replicated: this master may be cut off or deposed already.
                        # Ask the controllers again before the next send.
                        self._invalidate(route)
                    await self._record(results, route)
                    return results
                track.failed(attempt)
                if attempt.kind == "invalid":
                    break
                pause = (
                    _RETRY_PAUSE_MIN
                    if route.master_address != failed_address
                    else min(max(pause * 2, _RETRY_PAUSE_MIN), _RETRY_PAUSE_MAX)
                )
                failed_address = route.master_address
                # Too few in-sync replicas: the master is the right one, keep its route; else ask again.
                if json_field(attempt.body, "status") != "IN_SYNC_REPLICAS_NOT_ENOUGH":
                    self._invalidate(route)
                if attempt.kind == "unknown" and not self.retry_unknown:
                    break
            else:
                track.failed(_Attempt("refused", error=self._route_error))
                pause = min(max(pause * 2, _RETRY_PAUSE_MIN), _RETRY_PAUSE_MAX)
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            if time.monotonic() >= deadline:
                break
        results = track.final(self.broker_name)
        await self._record(results, None)
        return results

    _route_error: str | None = None

    async def _current_route(self, deadline: float) -> Route | None:
        """The cached route, or a fresh one from the controllers; None (with ``_route_error``) when
        none is available right now."""
        route = self._route
        if route is not None:
            return route
        async with self._route_lock:  # concurrent sends share one lookup
            if self._route is not None:
                return self._route
            assert self._resolver is not None
            self._resolver.timeout = max(0.05, min(self._route_timeout, deadline - time.monotonic()))
            try:
                self._route = await self._resolver.resolve(self.broker_name)
            except NoRouteError as exc:
                self._route_error = str(exc)
                return None
            self.route_refreshes += 1
            return self._route

    def _invalidate(self, route: Route) -> None:
        if self._route is route:
            self._route = None

    async def _post(self, route: Route, payload: dict[str, Any], deadline: float) -> _Attempt:
        assert self._session is not None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _Attempt("refused", error="send deadline passed")
        ctx = types.SimpleNamespace(written=False)
        timeout = aiohttp.ClientTimeout(
            total=min(self.request_timeout, remaining), sock_connect=min(self.connect_timeout, remaining)
        )
        try:
            async with self._session.post(
                self._url(route.master_address, PUT_PATH),
                ssl=self._ssl or True,
                json=payload,
                headers=self._auth_headers(),
                timeout=timeout,
                trace_request_ctx=ctx,
            ) as response:
                status = response.status
                try:
                    body = await response.json(content_type=None)
                except ValueError:
                    body = None
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            return _Attempt("refused", error=describe(exc))  # no connection: nothing was sent
        except (TimeoutError, aiohttp.ClientError) as exc:
            return _Attempt("unknown" if ctx.written else "refused", error=describe(exc))
        return classify_reply(status, body)

    def _results(self, route: Route, body: Any, track: _Tracking) -> list[SendResult]:
        now = time.monotonic()
        items = body.get("results") if track.batch else [body]
        out = [
            SendResult(
                msg_id=item.get("msgId") or msg_id,
                status=_STORED.get(item.get("status"), SendStatus.UNKNOWN),
                broker_name=self.broker_name,
                offset=item.get("offset"),
                size=item.get("size"),
                epoch=item.get("epoch"),
                broker_id=route.master_broker_id,
                address=route.master_address,
                attempts=track.attempts,
                started_at=track.started,
                first_error_at=track.first_error_at,
                completed_at=now,
            )
            for msg_id, item in zip(track.ids, items or [], strict=False)
        ]
        if len(out) != len(track.ids):  # a malformed reply: whatever is missing is not known
            known = {r.msg_id for r in out}
            track.unknown, track.last_error = True, "missing from the broker's reply"
            out += [r for r in track.final(self.broker_name) if r.msg_id not in known]
        return out

    # -- recording ---------------------------------------------------------------------------------

    async def _record(self, results: list[SendResult], route: Route | None) -> None:
        if self._recorder is None:
            return
        mode = self._fixed_ack_mode
        if mode is None and route is not None:
            mode = await self._ack_mode(route.master_address)
        for result in results:
            self._recorder.ack(result, mode)

    async def _ack_mode(self, address: str) -> str | None:
        """The master's ack mode (``/v1/status`` ``ackMode``), asked once per address."""
        if address in self._ack_modes:
            return self._ack_modes[address]
        assert self._session is not None
        mode = None
        try:
            async with self._session.get(
                self._url(address, "/v1/status"),
                timeout=aiohttp.ClientTimeout(total=1.0),
                ssl=self._ssl or True,
            ) as response:
                mode = json_field(await response.json(content_type=None), "ackMode")
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return None  # not cached: asked again next time
        self._ack_modes[address] = mode
        return mode
