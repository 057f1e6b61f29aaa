"""Heartbeats and the per-controller broker sessions (shell, aiohttp).

Sessions (docs/architecture.md §3, ``mqha/controller/sessions.py``). One WebSocket ``GET /v1/brokers/session``
to EVERY controller, each kept by its own task: reconnect with a doubling pause (``reconnect_min_s`` ..
``reconnect_max_s``; every upgrade signed afresh by the caller's signer, if any), send the latest
heartbeat as soon as it opens (a fresh leader learns at once that we are alive), deliver
``roleChanged`` pushes to ``on_push``, ignore other message types. A controller's refusal of a heartbeat
because another live process holds this broker's id (``CONTROLLER_BROKER_ID_INVALID``, by HTTP or on a
session; docs/architecture.md §3.2) goes to ``on_refused``. The state of each session
(``sessions()``) is for status and metrics. Heartbeats go one-way over the open sessions, or by HTTP
to every controller when the planner wants them confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, TransportFailure
from mqha.errors import RemoteProtocolError
from mqha.security.signing import REFUSED_HEADER
from mqha.security.tls import scheme_of

log = logging.getLogger(__name__)

SESSION_PATH = "/v1/brokers/session"
HEARTBEAT_PATH = "/v1/brokers/heartbeat"
ROLE_CHANGED = "roleChanged"

CONNECTING = "connecting"
OPEN = "open"
DISCONNECTED = "disconnected"
CLOSED = "closed"

PushHandler = Callable[[str, Mapping[str, Any]], None]
RefusalHandler = Callable[[str, str], None]  # (controller address, remark)

__all__ = ["HeartbeatSessions", "PushHandler", "RefusalHandler", "SessionLink"]


@dataclass
class SessionLink:
    """One broker session to one controller."""

    address: str
    state: str = CONNECTING
    connects: int = 0
    pushes: int = 0
    last_error: str | None = None
    refusals: Counter[str] = field(default_factory=Counter)  # refused upgrades, by the controller's reason
    opened_at: float | None = None  # wall-clock seconds, for status only
    ws: aiohttp.ClientWebSocketResponse | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None

    def info(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "connects": self.connects,
            "pushes": self.pushes,
            "lastError": self.last_error,
            "refusals": dict(self.refusals),
            "openedAt": self.opened_at,
        }

    async def send_text(self, text: str, timeout: float) -> bool:
        ws = self.ws
        if ws is None or ws.closed:
            return False
        try:
            async with self.lock:  # one frame at a time on this socket
                await asyncio.wait_for(ws.send_str(text), timeout)
        except (TimeoutError, ConnectionError, RuntimeError, aiohttp.ClientError) as exc:
            self.last_error = f"send failed: {exc!r}"
            return False
        return True


class HeartbeatSessions:
    """Keeps a broker session to every controller and sends the broker's heartbeats to all of them."""

    def __init__(
        self,
        addresses: Sequence[str],
        caller: LeaderCaller,
        *,
        on_push: PushHandler,
        heartbeat_timeout_s: float = 1.0,
        connect_timeout_s: float = 2.0,
        reconnect_min_s: float = 0.1,
        reconnect_max_s: float = 2.0,
    ) -> None:
        self.addresses = list(addresses)
        self._caller = caller  # shares its HTTP client and its one-controller ``ask``
        self._on_push = on_push
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.reconnect_min_s = reconnect_min_s
        self.reconnect_max_s = reconnect_max_s
        self._links = {address: SessionLink(address) for address in self.addresses}
        self._last_heartbeat: str | None = None
        self._closing = False
        self.on_refused: RefusalHandler | None = None

    def _refused(self, address: str, code: object, remark: object) -> bool:
        """Hand a refusal for a held id to ``on_refused``; True when it was one."""
        if code != ResponseCode.CONTROLLER_BROKER_ID_INVALID or self.on_refused is None:
            return False
        try:
            self.on_refused(address, str(remark))
        except Exception:
            log.exception("handling a refused heartbeat from %s failed", address)
        return True

    def start(self) -> None:
        """One task per controller keeps its session open."""
        for link in self._links.values():
            link.task = asyncio.create_task(
                self._keep_session(link), name=f"controller-session-{link.address}"
            )

    async def close(self) -> None:
        """Close every session (the controllers see a clean close) and stop their tasks."""
        self._closing = True
        for link in self._links.values():
            ws = link.ws
            if ws is not None and not ws.closed:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.close(), 1.0)
        for link in self._links.values():
            if link.task is not None:
                link.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await link.task
            link.state = CLOSED

    # ------------------------------------------------------------------------------ heartbeats

    async def post_heartbeat_all(self, body: Mapping[str, Any]) -> int:
        """The heartbeat by HTTP to every controller, awaited; how many recorded it.

        It also goes over the sessions already open: a controller binds a session to a broker only
        when a heartbeat arrives on it, and until then a roleChanged push cannot reach this broker
        (a broker elected right after it registered would otherwise wait for its next poll).
        """
        text = self._last_heartbeat = json.dumps(body, separators=(",", ":"))

        async def post(address: str) -> bool:
            try:
                answer = await self._caller.ask(
                    address, "POST", HEARTBEAT_PATH, body=body, timeout_s=self.heartbeat_timeout_s
                )
            except (TransportFailure, RemoteProtocolError) as exc:
                log.debug("heartbeat to %s: %s", address, exc)
                return False
            self._refused(address, answer.reply.code, answer.reply.remark)
            return answer.reply.ok

        results = await asyncio.gather(
            *(post(address) for address in self.addresses),
            *(link.send_text(text, self.heartbeat_timeout_s) for link in self._links.values()),
        )
        return sum(results[: len(self.addresses)])

    async def send_heartbeat(self, body: Mapping[str, Any]) -> int:
        """The heartbeat over every open session (one-way); how many sessions took it."""
        text = self._last_heartbeat = json.dumps(body, separators=(",", ":"))
        results = await asyncio.gather(
            *(link.send_text(text, self.heartbeat_timeout_s) for link in self._links.values())
        )
        return sum(results)

    # -------------------------------------------------------------------------------- sessions

    def sessions(self) -> dict[str, dict[str, Any]]:
        return {address: link.info() for address, link in self._links.items()}

    async def _keep_session(self, link: SessionLink) -> None:
        delay = self.reconnect_min_s
        while not self._closing:
            link.state = CONNECTING
            try:
                ws = await asyncio.wait_for(
                    self._caller.session.ws_connect(
                        f"{scheme_of(self._caller.ssl)}://{link.address}{SESSION_PATH}",
                        ssl=self._caller.ssl or True,  # docs/architecture.md §12.5
                        headers=self._caller.headers_for(
                            "GET", link.address, SESSION_PATH
                        ),  # signed per attempt
                        autoping=True,  # answer the controller's pings
                        heartbeat=None,  # liveness is the heartbeat messages' job
                        timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=2.0),
                    ),
                    self.connect_timeout_s,
                )
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                link.last_error = f"connect: {exc!r}"
                if isinstance(exc, aiohttp.WSServerHandshakeError) and exc.status in (401, 403):
                    # skew: this broker's clock and the controller's differ by more than the window
                    link.refusals[(exc.headers or {}).get(REFUSED_HEADER) or "credentials"] += 1
            else:
                await self._serve_session(link, ws)
                if link.opened_at is not None and time.time() - link.opened_at > self.reconnect_max_s:
                    delay = self.reconnect_min_s  # it was up for a while: reconnect quickly
            if self._closing:
                break
            link.state = DISCONNECTED
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.reconnect_max_s)

    async def _serve_session(self, link: SessionLink, ws: aiohttp.ClientWebSocketResponse) -> None:
        link.ws = ws
        link.state = OPEN
        link.connects += 1
        link.opened_at = time.time()
        log.debug("session to controller %s open", link.address)
        try:
            if self._last_heartbeat is not None:
                await link.send_text(self._last_heartbeat, self.heartbeat_timeout_s)
            async for message in ws:
                if message.type == aiohttp.WSMsgType.TEXT:
                    self._on_text(link, message.data)
                elif message.type == aiohttp.WSMsgType.ERROR:
                    link.last_error = f"session error: {ws.exception()!r}"
                    break
        except (aiohttp.ClientError, OSError, RuntimeError) as exc:
            link.last_error = f"session: {exc!r}"
        finally:
            link.ws = None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 1.0)
            log.debug("session to controller %s closed (%s)", link.address, ws.close_code)

    def _on_text(self, link: SessionLink, text: str) -> None:
        try:
            obj = json.loads(text)
        except ValueError:
            log.warning("controller %s sent malformed JSON on the session", link.address)
            return
        if not isinstance(obj, dict):
            return
        kind = obj.get("type")
        if kind == ROLE_CHANGED:
            link.pushes += 1
            try:
                self._on_push(link.address, obj)
            except Exception:
                log.exception("handling a roleChanged push from %s failed", link.address)
        elif kind == "error" and not self._refused(link.address, obj.get("code"), obj.get("remark")):
            log.warning("controller %s rejected a session message: %s", link.address, obj.get("remark"))
        # Other message types are ignored (forward compatibility).
