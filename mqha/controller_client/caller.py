"""Controller calls that follow the Raft leader: the asyncio shell of ``mqha.controller_client.policy``.

:class:`LeaderCaller` sends what a :class:`~mqha.controller_client.policy.Follow` asks for over one
aiohttp session, feeds back what happened and returns the kernel's typed reply
(``mqha.wire.controller_api.Reply``) with the node and HTTP status that gave it. It keeps the last
known leader between calls (concurrent calls share it; a call only writes back what it learned).
Transport failures are sorted by whether the request surely was not sent (connection refused or not
made in time) -- the policy may resend a write only then.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import os
import ssl as _ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from mqha.controller_client import policy as rules
from mqha.controller_client.policy import Follow, Policy, Why
from mqha.errors import MqhaError, RemoteProtocolError
from mqha.wire.controller_api import Reply

log = logging.getLogger(__name__)

METADATA_PATH = "/v1/controller/metadata"


class Silence(enum.Enum):
    """How a request failed to get an answer."""

    CONNECT_FAILED = "cannot connect"
    CONNECT_TIMEOUT = "no connection in time"
    TIMEOUT = "no answer in time"
    LOST = "connection lost before the answer"

    @property
    def sent(self) -> bool:
        """Whether the request may have reached the node."""
        return self in (Silence.TIMEOUT, Silence.LOST)


class TransportFailure(MqhaError):
    """No answer from one node: which node, how (:class:`Silence`) and the system's reason."""

    def __init__(self, address: str, silence: Silence, detail: str, timeout_s: float) -> None:
        super().__init__(f"{address}: {silence.value}: {detail}")
        self.address = address
        self.silence = silence
        self.detail = detail
        self.timeout_s = timeout_s


class NoLeaderAnswer(MqhaError):
    """A leader call that ended without a usable answer; ``why`` says which way it ended."""

    def __init__(self, why: Why, last_failure: TransportFailure | None, last: ControllerAnswer | None):
        detail = f"; last: {last_failure}" if last_failure is not None else ""
        super().__init__(f"{why.value}{detail}")
        self.why = why
        self.last_failure = last_failure
        self.last_answer = last


@dataclass(frozen=True)
class ControllerAnswer:
    """One controller's reply to a call, with the node and the HTTP status."""

    address: str
    status: int
    reply: Reply


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno and not isinstance(exc, _ssl.SSLError):  # TLS: its own text
        return os.strerror(exc.errno)
    return str(exc) or type(exc).__name__


Signer = Callable[[str, str, str, bytes], Mapping[str, str]]
"""Headers that prove who sends a request: ``signer(method, node, path with its raw query, body bytes)``,
``node`` the ``host:port`` it is sent to (a signature names its target). Called once per request sent
(each gets a fresh nonce and timestamp)."""


def signed_headers(
    headers: Mapping[str, str] | None, signer: Signer | None, request: tuple[str, str, str, bytes]
) -> dict[str, str]:
    """``headers`` plus, with a ``signer``, the proof of this one ``request`` (method, node, target, body)."""
    sent = dict(headers or {})
    if signer is not None:
        sent.update(signer(*request))
    return sent


async def fetch(
    session: aiohttp.ClientSession,
    address: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    params: Mapping[str, str] | None = None,
    timeout_s: float,
    connect_timeout_s: float = 1.0,
    headers: Mapping[str, str] | None = None,
    signer: Signer | None = None,
    ssl: _ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    """One HTTP exchange with any node: (status, the JSON body, or the text when it is not JSON);
    https verified by ``ssl`` when given (docs/architecture.md §12.5). Raises :class:`TransportFailure`."""
    timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(connect_timeout_s, timeout_s))
    # The URL and body bytes are made here, so a signature covers exactly what goes on the wire.
    scheme = "http" if ssl is None else "https"
    node = address.removeprefix("http://")
    url = URL(f"{scheme}://{node}{path}").extend_query(params or {})
    data = None if body is None else json.dumps(body).encode()
    sent = signed_headers(headers, signer, (method, node, url.raw_path_qs, data or b""))
    if data is not None:
        sent["Content-Type"] = "application/json"
    try:
        async with session.request(
            method, url, data=data, timeout=timeout, headers=sent, ssl=True if ssl is None else ssl
        ) as response:
            status, raw = response.status, await response.read()
    except aiohttp.ConnectionTimeoutError as exc:
        raise TransportFailure(address, Silence.CONNECT_TIMEOUT, _reason(exc), timeout_s) from None
    except aiohttp.ClientConnectorError as exc:
        raise TransportFailure(address, Silence.CONNECT_FAILED, _reason(exc.os_error), timeout_s) from None
    except TimeoutError as exc:
        raise TransportFailure(address, Silence.TIMEOUT, _reason(exc), timeout_s) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise TransportFailure(address, Silence.LOST, _reason(exc), timeout_s) from None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


class LeaderCaller:
    """Performs calls on the controllers with the leader-following policy (one aiohttp session)."""

    def __init__(
        self,
        addresses: Sequence[str],
        policy: Policy,
        *,
        session: aiohttp.ClientSession | None = None,
        call_timeout_s: float = 6.0,
        probe_timeout_s: float = 1.0,
        connect_timeout_s: float = 1.0,
        headers: Mapping[str, str] | None = None,
        signer: Signer | None = None,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = list(addresses)
        self.ssl = ssl  # None: plain http; else https verified by it (also the sessions' wss)
        self.policy = policy
        self.leader: str | None = None
        self.call_timeout_s = call_timeout_s
        self.probe_timeout_s = probe_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.headers = dict(headers or {})
        self.signer = signer  # signs every request this caller sends (authenticationEnabled)
        self._session = session
        self._owned = session is None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The HTTP session: the one given, else our own, made on first use."""
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=self.call_timeout_s, sock_connect=self.connect_timeout_s)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    async def close(self) -> None:
        """Close the session if it is our own."""
        if self._owned and self._session is not None:
            await self._session.close()
            self._session = None

    def headers_for(self, method: str, node: str, target: str, body: bytes = b"") -> dict[str, str]:
        """The headers of one request to ``node`` sent outside ``ask`` (the session upgrade): ours, signed."""
        return signed_headers(self.headers, self.signer, (method, node, target, body))

    # ------------------------------------------------------------------------------ one exchange

    async def ask(
        self,
        address: str,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> ControllerAnswer:
        """One controller's typed reply. Raises :class:`TransportFailure` or ``RemoteProtocolError``."""
        status, obj = await fetch(
            self.session,
            address,
            method,
            path,
            body=body,
            params=params,
            timeout_s=timeout_s or self.call_timeout_s,
            connect_timeout_s=self.connect_timeout_s,
            headers=self.headers,
            signer=self.signer,
            ssl=self.ssl,
        )
        try:
            return ControllerAnswer(address, status, Reply.from_json(obj))
        except RemoteProtocolError as exc:
            shown = obj if isinstance(obj, str) else json.dumps(obj)
            raise RemoteProtocolError(
                f"{address}{path} answered HTTP {status} without a controller reply ({exc}): {shown[:200]}"
            ) from None

    # ------------------------------------------------------------------------------ leader calls

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        write: bool = False,
        any_node: bool = False,
        timeout_s: float | None = None,
    ) -> ControllerAnswer:
        """``method path`` on the serving leader (``any_node``: on the first node that answers).

        Returns the final answer, whatever its code. Raises :class:`NoLeaderAnswer` when the policy
        gives up, ``RemoteProtocolError`` when a node answers something that is not a reply.
        """
        follow = Follow(
            self.policy, self.addresses, self.leader, write=write, any_node=any_node, now_ms=self._now_ms()
        )
        answer = await self._walk(
            follow, method=method, path=path, body=body, params=params, timeout_s=timeout_s
        )
        assert answer is not None  # a call ends Done only after an answer
        return answer

    async def find_leader(self) -> str | None:
        """Ask the controllers who leads (the cached leader first); None when none knows."""
        follow = Follow(self.policy, self.addresses, self.leader, find_only=True, now_ms=self._now_ms())
        try:
            await self._walk(follow, method="GET", path=METADATA_PATH, body=None, params=None, timeout_s=None)
        except NoLeaderAnswer:
            self.leader = None
            return None
        return follow.leader

    async def _walk(
        self,
        follow: Follow,
        *,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, str] | None,
        timeout_s: float | None,
    ) -> ControllerAnswer | None:
        """Drive ``follow`` to its end: the last answer (None for a find-only walk)."""
        last: ControllerAnswer | None = None
        failure: TransportFailure | None = None
        known = follow.leader
        decision = follow.start()
        while True:
            event: rules.Event
            match decision:
                case rules.Done():
                    return last
                case rules.GiveUp(why=why):
                    raise NoLeaderAnswer(why, failure, last)
                case rules.BackOff(ms=ms):
                    await asyncio.sleep(ms / 1000)
                    event = rules.Waited()
                case rules.Ask(address=address, who_leads=True):
                    try:
                        event = await self._who_leads(address)
                    except TransportFailure as exc:
                        failure, event = exc, rules.TimedOut() if exc.silence.sent else rules.Refused()
                case rules.Ask(address=address) | rules.Redirect(address=address):
                    try:
                        last = await self.ask(
                            address, method, path, body=body, params=params, timeout_s=timeout_s
                        )
                    except TransportFailure as exc:
                        failure, event = exc, rules.TimedOut() if exc.silence.sent else rules.Refused()
                    else:
                        event = rules.Answered() if follow.any_node else rules.event_of(last.reply)
            decision = follow.on(event, self._now_ms())
            if follow.leader != known:  # write back only what this call learned
                known = self.leader = follow.leader
                log.debug("controller leader: %s", known)

    async def _who_leads(self, address: str) -> rules.LeaderIs:
        try:
            answer = await self.ask(address, "GET", METADATA_PATH, timeout_s=self.probe_timeout_s)
        except RemoteProtocolError as exc:
            log.debug("controller %s metadata: %s", address, exc)
            return rules.LeaderIs(None)
        reply = answer.reply
        return rules.LeaderIs(rules.leader_in_metadata(address, reply.payload) if reply.ok else None)

    @staticmethod
    def _now_ms() -> int:
        return int(asyncio.get_running_loop().time() * 1000)
