"""Broker sessions: one WebSocket per broker process and controller node (docs/architecture.md §3; shell).

Protocol on ``GET /v1/brokers/session`` (upgraded to a WebSocket; text frames, one JSON object each):

broker -> controller
    a heartbeat: the fields of ``POST /v1/brokers/heartbeat`` (docs/reference-behaviour.md §5.9), optionally
    with
    ``"type": "heartbeat"``. No reply on success (heartbeats are one-way, as in RocketMQ); an invalid
    message gets ``{"type": "error", "code", "codeName", "remark"}`` and the session stays open.

controller -> broker
    ``{"type": "roleChanged", "clusterName", "brokerName", "masterBrokerId", "masterAddress",
    "masterHaAddress", "masterEpoch", "syncStateSetEpoch", "syncStateSet": [ids]}`` after an election
    this node decided (docs/reference-behaviour.md §7.4), to every member of the set alive here with a session
    here.

Liveness. Every heartbeat is recorded with this session's token. A session is bound to the broker id
and incarnation of its first accepted heartbeat (``broker_claims.handle_session_heartbeat``): a
heartbeat for another id or incarnation on it is refused, and the owner refuses one for an id another
live process holds (``broker_claims.handle_claim``). When the session ends (close frame, TCP reset,
error) the owner drops the entries whose latest heartbeat came on this session -- a newer process of
the same broker that already heartbeats on a new session keeps its entry, and so does the same
process while another of its sessions is open here (the entry moves to that one: a replayed or
duplicated session's close is not a crash) -- and, on the serving leader, elects a new master at once
if one of them was the master (crash detection in ms).
The controller sends WebSocket pings every ``brokerSessionPingMills`` to keep the connection
exercised, but a missing pong does NOT end the session: hangs and partitions are the heartbeat
timeout's job (docs/architecture.md §3), so a long GC pause is not a crash.

Authentication. With ``authenticationEnabled`` the upgrade request itself must be signed by
``innerClientAuthenticationCredentials`` (or carry the admin token): ``http_api``'s check refuses
it with 401/403 before this handler runs. Messages on an open session need no further proof: the
connection is the authenticated peer's.

Pushes. At most one push per (session, broker set) is pending: a newer one cancels an older one
still waiting on a slow socket; each send is bounded by 3 s (docs/reference-behaviour.md §7.4).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import WSMsgType, web

from mqha.codes import ResponseCode
from mqha.controller.broker_claims import SessionBinding, handle_session_heartbeat
from mqha.controller.liveness import LiveKey
from mqha.errors import RequestError
from mqha.wire.controller_api import BrokerHeartbeatRequest, Reply

log = logging.getLogger(__name__)

ROLE_CHANGED = "roleChanged"
HEARTBEAT = "heartbeat"
ERROR = "error"
PUSH_TIMEOUT = 3.0


class SessionOwner(Protocol):
    """What the registry needs from the controller service."""

    def record_heartbeat(self, request: BrokerHeartbeatRequest, session: int | None) -> Reply: ...

    def on_session_closed(self, session: int, moved: Mapping[LiveKey, int] | None = None) -> None: ...

    def max_message_bytes(self) -> int: ...

    def session_ping_seconds(self) -> float: ...


@dataclass(eq=False)
class BrokerSession:
    """One open broker session: its WebSocket, the broker process it is bound to and its pending pushes."""

    token: int
    ws: web.WebSocketResponse
    remote: str | None
    bound: SessionBinding | None = None  # the id and incarnation of its first accepted heartbeat
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pushes: dict[str, tuple[int, asyncio.Task[None]]] = field(default_factory=dict)

    async def send_json(self, message: Mapping[str, Any]) -> None:
        async with self.send_lock:  # one frame at a time on this socket
            await self.ws.send_str(json.dumps(message, separators=(",", ":")))


def _error_message(code: ResponseCode, remark: str) -> dict[str, Any]:
    return {"type": ERROR, "code": int(code), "codeName": code.name, "remark": remark}


class SessionRegistry:
    """Open broker sessions of this node, by token and by the broker keys they carried."""

    def __init__(self, owner: SessionOwner) -> None:
        self._owner = owner
        self._tokens = itertools.count(1)
        self._sessions: dict[int, BrokerSession] = {}
        self._by_key: dict[LiveKey, BrokerSession] = {}
        self._closing = False

    def __len__(self) -> int:
        return len(self._sessions)

    def session_for(self, key: LiveKey) -> BrokerSession | None:
        return self._by_key.get(key)

    # -- the aiohttp handler

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(
            autoping=True,  # answer the broker's pings
            heartbeat=None,  # never close on a missing pong (see module docstring)
            max_msg_size=self._owner.max_message_bytes(),
        )
        await ws.prepare(request)
        if self._closing:
            await ws.close(code=1001, message=b"controller shutting down")
            return ws
        session = BrokerSession(next(self._tokens), ws, request.remote)
        self._sessions[session.token] = session
        log.debug("broker session %d opened from %s", session.token, session.remote)
        pinger = asyncio.create_task(self._ping(session))
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    await self._on_text(session, message.data)
                elif message.type == WSMsgType.BINARY:
                    await self._reply_error(session, "binary frames are not supported; send JSON text")
                elif message.type == WSMsgType.ERROR:
                    log.debug("broker session %d failed: %s", session.token, ws.exception())
                    break
        finally:
            pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pinger
            self._forget(session)
        return ws

    async def _on_text(self, session: BrokerSession, text: str) -> None:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            await self._reply_error(session, f"malformed JSON: {exc}")
            return
        if isinstance(obj, dict) and "type" in obj:
            kind = obj.get("type")
            if kind != HEARTBEAT:
                await self._reply_error(session, f"unknown message type {kind!r}; expected 'heartbeat'")
                return
            obj = {key: value for key, value in obj.items() if key != "type"}
        try:
            heartbeat = BrokerHeartbeatRequest.from_json(obj)
        except RequestError as exc:
            await self._reply_error(session, exc.remark)
            return
        assert heartbeat.broker_id is not None  # the request refuses a heartbeat without one
        heard = SessionBinding((heartbeat.broker_name, heartbeat.broker_id), heartbeat.incarnation)
        reply = handle_session_heartbeat(session.bound, heard)
        if reply is None:
            reply = self._owner.record_heartbeat(heartbeat, session.token)
        if not reply.ok:
            await self._reply_error(session, reply.remark, reply.code)
            return
        session.bound = heard
        self._by_key[heard.key] = session

    async def _reply_error(
        self,
        session: BrokerSession,
        remark: str,
        code: ResponseCode = ResponseCode.CONTROLLER_INVALID_REQUEST,
    ) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await session.send_json(_error_message(code, remark))

    async def _ping(self, session: BrokerSession) -> None:
        while not session.ws.closed:
            interval = self._owner.session_ping_seconds()
            if interval <= 0:
                return
            await asyncio.sleep(interval)
            try:
                await session.ws.ping()
            except (ConnectionError, RuntimeError):
                return  # the reader loop sees the close

    def _forget(self, session: BrokerSession) -> None:
        self._sessions.pop(session.token, None)
        moved: dict[LiveKey, int] = {}
        if session.bound is not None:
            key = session.bound.key
            # Another open session of the same process carries on for it.
            heir = next((s for s in self._sessions.values() if s.bound == session.bound), None)
            if heir is not None:
                moved[key] = heir.token
            if self._by_key.get(key) is session:
                if heir is None:
                    del self._by_key[key]
                else:
                    self._by_key[key] = heir
        for _, task in session.pushes.values():
            task.cancel()
        log.debug("broker session %d closed (%s)", session.token, session.bound)
        try:
            self._owner.on_session_closed(session.token, moved)
        except Exception:
            log.exception("handling the close of broker session %d failed", session.token)

    # -- pushes

    def push(self, key: LiveKey, message: Mapping[str, Any], master_epoch: int) -> bool:
        """Schedule ``message`` to the session of broker ``key``; False when it has none here."""
        session = self._by_key.get(key)
        if session is None or session.ws.closed:
            return False
        broker_name = key[0]
        pending = session.pushes.get(broker_name)
        if pending is not None:
            epoch, task = pending
            if epoch > master_epoch and not task.done():
                return False  # a newer notification is already on its way
            task.cancel()
        task = asyncio.create_task(self._send_push(session, message))
        session.pushes[broker_name] = (master_epoch, task)
        return True

    async def _send_push(self, session: BrokerSession, message: Mapping[str, Any]) -> None:
        try:
            await asyncio.wait_for(session.send_json(message), PUSH_TIMEOUT)
        except (TimeoutError, ConnectionError, RuntimeError) as exc:
            log.info("role-change push on session %d failed: %r", session.token, exc)

    # -- shutdown

    async def close_session(self, token: int, reason: str) -> None:
        session = self._sessions.get(token)
        if session is not None:
            with contextlib.suppress(Exception):
                await session.ws.close(code=1000, message=reason.encode()[:120])

    async def close_all(self) -> None:
        self._closing = True
        for session in list(self._sessions.values()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.ws.close(code=1001, message=b"controller shutting down"), 1.0)
