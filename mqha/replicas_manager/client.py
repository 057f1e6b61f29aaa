"""The broker's controller client (shell, aiohttp): leader calls and broker sessions.

Leader calls (docs/architecture.md §3) go through the one leader-following policy
(``mqha.controller_client``): the leader this client believes in first, else the controllers asked
"who leads?" (``GET /v1/controller/metadata``, docs/reference-behaviour.md §5.8); a not-leader hint
is followed; a refused connection tries the next controller; three rounds with a doubling pause from
``backoff_s``. ``call`` returns the reply (success or a RocketMQ code), or ``None`` for "no usable
answer": no leader found, a timed-out write (it may still commit, so the planner's periodic tasks
decide what to do next rather than a blind repeat), a reply that is not the JSON envelope, or a
not-leader answer that leaves the write's outcome unknown.

Sessions (docs/architecture.md §3, ``mqha/controller/sessions.py``). One WebSocket ``GET /v1/brokers/session``
to EVERY controller, each kept by its own task: reconnect with a doubling pause (``reconnect_min_s`` ..
``reconnect_max_s``), send the latest heartbeat as soon as it opens (a fresh leader learns at once
that we are alive), deliver ``roleChanged`` pushes to ``on_push``, ignore other message types. The
state of each session (``sessions()``) is for status and metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer, TransportFailure
from mqha.controller_client.policy import Policy, parse_addresses
from mqha.errors import RemoteProtocolError
from mqha.wire.controller_api import Reply

log = logging.getLogger(__name__)

SESSION_PATH = "/v1/brokers/session"
HEARTBEAT_PATH = "/v1/brokers/heartbeat"
ROLE_CHANGED = "roleChanged"

CONNECTING = "connecting"
OPEN = "open"
DISCONNECTED = "disconnected"
CLOSED = "closed"

PushHandler = Callable[[str, Mapping[str, Any]], None]

__all__ = ["ControllerClient", "SessionLink", "parse_addresses"]


@dataclass
class SessionLink:
    """One broker session to one controller."""

    address: str
    state: str = CONNECTING
    connects: int = 0
    pushes: int = 0
    last_error: str | None = None
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


class ControllerClient:
    """The broker's link to the controllers: leader calls, heartbeats and the per-controller sessions."""

    def __init__(
        self,
        addresses: Sequence[str],
        *,
        on_push: PushHandler,
        request_timeout_s: float = 6.0,
        metadata_timeout_s: float = 1.0,
        heartbeat_timeout_s: float = 1.0,
        max_attempts: int = 3,
        backoff_s: float = 0.1,
        backoff_max_s: float = 1.0,
        reconnect_min_s: float = 0.1,
        reconnect_max_s: float = 2.0,
    ) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = list(addresses)
        self._on_push = on_push
        self.request_timeout_s = request_timeout_s  # > the controller's 5 s write timeout
        self.metadata_timeout_s = metadata_timeout_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.reconnect_min_s = reconnect_min_s
        self.reconnect_max_s = reconnect_max_s
        policy = Policy(
            rounds=max(1, max_attempts),
            backoff_ms=max(1, round(backoff_s * 1000)),
            backoff_max_ms=max(1, round(backoff_s * 1000), round(backoff_max_s * 1000)),
        )
        self._caller = LeaderCaller(
            self.addresses,
            policy,
            call_timeout_s=request_timeout_s,
            probe_timeout_s=metadata_timeout_s,
        )
        self._links = {address: SessionLink(address) for address in self.addresses}
        self._started = False
        self._last_heartbeat: str | None = None
        self._closing = False

    @property
    def leader(self) -> str | None:
        """The controller leader as last learned (None: ask who leads first)."""
        return self._caller.leader

    @leader.setter
    def leader(self, address: str | None) -> None:
        self._caller.leader = address

    # ------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self._started = True
        for link in self._links.values():
            link.task = asyncio.create_task(
                self._keep_session(link), name=f"controller-session-{link.address}"
            )

    async def close(self) -> None:
        """Close every session (the controllers see a clean close) and the HTTP client."""
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
        await self._caller.close()

    @property
    def http(self) -> aiohttp.ClientSession:
        if not self._started:
            raise RuntimeError("ControllerClient.start() was not called")
        return self._caller.session

    # -------------------------------------------------------------------------------- requests

    async def discover_leader(self) -> str | None:
        """Ask the controllers who leads (docs/reference-behaviour.md §5.8); remembers and returns it."""
        before = self.leader
        found = await self._caller.find_leader()
        if found != before:
            log.info("controller leader: %s", found)
        return found

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Reply | None:
        """A leader-only request (see the module docstring); None = no usable answer."""
        if self._closing:
            return None
        try:
            answer = await self._caller.call(method, path, body=body, params=params, write=method != "GET")
        except NoLeaderAnswer as exc:
            log.info("%s %s: %s", method, path, exc)
            return None
        except RemoteProtocolError as exc:
            log.warning("%s %s: %s", method, path, exc)
            return None
        if answer.reply.code == ResponseCode.CONTROLLER_NOT_LEADER:
            log.info("%s %s on %s: %s", method, path, answer.address, answer.reply.remark)
            return None
        return answer.reply

    # ------------------------------------------------------------------------------ heartbeats

    async def post_heartbeat_all(self, body: Mapping[str, Any]) -> int:
        """The heartbeat by HTTP to every controller, awaited; how many recorded it."""
        self._last_heartbeat = json.dumps(body, separators=(",", ":"))

        async def post(address: str) -> bool:
            try:
                answer = await self._caller.ask(
                    address, "POST", HEARTBEAT_PATH, body=body, timeout_s=self.heartbeat_timeout_s
                )
            except (TransportFailure, RemoteProtocolError) as exc:
                log.debug("heartbeat to %s: %s", address, exc)
                return False
            return answer.reply.ok

        results = await asyncio.gather(*(post(address) for address in self.addresses))
        return sum(results)

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
                    self.http.ws_connect(
                        f"http://{link.address}{SESSION_PATH}",
                        autoping=True,  # answer the controller's pings
                        heartbeat=None,  # liveness is the heartbeat messages' job
                        timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=2.0),
                    ),
                    max(1.0, self.metadata_timeout_s * 2),
                )
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                link.last_error = f"connect: {exc!r}"
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
        elif kind == "error":
            log.warning("controller %s rejected a session message: %s", link.address, obj.get("remark"))
        # Other message types are ignored (forward compatibility).
