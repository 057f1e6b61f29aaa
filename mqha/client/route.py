"""Route discovery: a broker group's master from the controllers' replica-info (shell, aiohttp).

Only the serving controller leader answers ``GET /v1/groups/{brokerName}/replica-info``; the
controllers are asked with the one leader-following policy (``mqha.controller_client``): the leader
that answered last first, then each listed controller once, a not-leader hint followed at once, no
pause (the producer and consumer retry within their own deadlines). There is no periodic route poll:
the producer and consumer call :meth:`RouteResolver.resolve` when a send or read tells them the route
is stale (slave redirect, connection error, SERVICE_NOT_AVAILABLE).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from ssl import SSLContext
from typing import Any, Self
from urllib.parse import quote

import aiohttp

from mqha.client.recording import ClientRecorder, RecordTarget
from mqha.client.results import NoRouteError, Route
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer
from mqha.controller_client.policy import Policy, parse_addresses
from mqha.errors import RemoteProtocolError
from mqha.security.basic import basic_header
from mqha.security.credentials import User
from mqha.security.tls import scheme_of
from mqha.wire.controller_api import ReplicaInfoPayload


def parse_controllers(controllers: str | Sequence[str]) -> list[str]:
    """``"h:p;h:p"`` (RocketMQ's ``controllerAddr``) or a list of ``host:port`` → a list, order kept."""
    out = parse_addresses(controllers)
    if not out:
        raise ValueError("no controller address given")
    return out


class RouteResolver:
    """Asks the controllers where a group's master is; remembers which controller leads."""

    def __init__(
        self,
        controllers: str | Sequence[str],
        session: aiohttp.ClientSession,
        *,
        timeout: float = 1.0,
        ssl: SSLContext | None = None,
    ) -> None:
        self.controllers = parse_controllers(controllers)
        self.session = session
        self.timeout = timeout  # per request; the producer shortens it to its send deadline
        self.lookups = 0
        policy = Policy(rounds=1, discover=False, max_redirects=max(2, len(self.controllers)))
        self.caller = LeaderCaller(  # its ``leader``: the controller that answered last
            self.controllers, policy, session=session, ssl=ssl
        )

    async def resolve(self, broker_name: str) -> Route:
        """The group's current master. Raises :class:`NoRouteError` when no controller leader answers
        or the group has no master right now (e.g. in the middle of an election)."""
        self.lookups += 1
        path = f"/v1/groups/{quote(broker_name, safe='')}/replica-info"
        try:
            answer = await self.caller.call("GET", path, timeout_s=self.timeout)
            reply = answer.reply
            info = ReplicaInfoPayload.from_json(reply.payload) if reply.ok else None
        except (NoLeaderAnswer, RemoteProtocolError) as exc:
            raise NoRouteError(f"no controller leader answered for {broker_name}: {exc}") from None
        if info is None:
            raise NoRouteError(
                f"no route for {broker_name}: {answer.address} answered HTTP {answer.status} "
                f"{reply.code.name} {reply.remark}".rstrip()
            )
        if not info.master_address or info.master_broker_id is None or info.master_broker_id < 0:
            raise NoRouteError(f"{broker_name} has no master right now (asked {answer.address})")
        return Route(
            broker_name=broker_name,
            master_broker_id=info.master_broker_id,
            master_address=info.master_address,
            master_epoch=info.master_epoch,
            sync_state_set=tuple(sorted(info.sync_state_set)),
            sync_state_set_epoch=info.sync_state_set_epoch,
        )


class RoutedClient:
    """Opens and closes what the producer and the consumer share (HTTP session, route resolver, recorder).

    ``start`` opens the HTTP session (unless one was given) and the route resolver; ``close`` closes the
    session (if ours) and the recorder.
    """

    _controllers: str | Sequence[str]
    _session: aiohttp.ClientSession | None
    _given_session: aiohttp.ClientSession | None
    _resolver: RouteResolver | None
    _recorder: ClientRecorder | None
    _route_timeout: float = 1.0
    _ssl: SSLContext | None = None  # https to controllers and brokers, verified by it (§12.5)
    _local_address: str | None = None  # connect from this local address (a client's ``clientIP``)
    _auth: dict[str, str]

    def _set_up(
        self,
        kind: str,
        controllers: str | Sequence[str],
        broker_name: str,
        *,
        session: aiohttp.ClientSession | None,
        user: User | None,
        ssl: SSLContext | None,
        client_id: str | None,
        record_to: RecordTarget | None,
        local_address: str | None = None,
    ) -> None:
        """The state the producer and the consumer share, set by their constructors."""
        self.broker_name = broker_name
        self._local_address = local_address
        self.client_id = client_id or f"{kind}-{os.getpid()}-{os.urandom(3).hex()}"
        self._controllers = controllers
        self._given_session = session
        self._session = session
        self._resolver = None
        self._route: Route | None = None
        self._recorder = ClientRecorder(record_to, self.client_id) if record_to is not None else None
        self._ssl = ssl
        # Built once: every put and read sends it.
        self._auth = {"Authorization": basic_header(user)} if user is not None else {}

    def _auth_headers(self) -> dict[str, str]:
        """The ``Authorization: Basic`` header of the broker API user, if one was given (puts, reads)."""
        return self._auth

    def _connector(self, **options: Any) -> aiohttp.TCPConnector:
        """A connector whose connections come from ``local_address`` when one was given."""
        if self._local_address is not None:
            options["local_addr"] = (self._local_address, 0)
        return aiohttp.TCPConnector(**options)

    def _new_session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=self._connector())

    async def start(self) -> Self:
        if self._session is None:
            self._session = self._new_session()
        self._resolver = RouteResolver(
            self._controllers, self._session, timeout=self._route_timeout, ssl=self._ssl
        )
        return self

    async def close(self) -> None:
        """Close the session (if owned) and flush the recorder."""
        if self._session is not None and self._given_session is None:
            await self._session.close()
        self._session = None
        if self._recorder is not None:
            self._recorder.close()

    def _url(self, address: str, path: str) -> str:
        """A broker URL: https when the client has a TLS context (docs/architecture.md §12.5)."""
        return f"{scheme_of(self._ssl)}://{address}{path}"

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
