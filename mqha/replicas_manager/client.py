"""The broker's controller client (shell, aiohttp): leader calls; it owns the heartbeats and sessions.

Leader calls (docs/architecture.md §3) go through the one leader-following policy
(``mqha.controller_client``): the leader this client believes in first, else the controllers asked
"who leads?" (``GET /v1/controller/metadata``, docs/reference-behaviour.md §5.8); a not-leader hint
is followed; a refused connection tries the next controller; three rounds with a doubling pause from
``backoff_s``. ``call`` returns the reply (success or a RocketMQ code), or ``None`` for "no usable
answer": no leader found, a timed-out write (it may still commit, so the planner's periodic tasks
decide what to do next rather than a blind repeat), a reply that is not the JSON envelope, or a
not-leader answer that leaves the write's outcome unknown.

Heartbeats and the per-controller sessions are :class:`HeartbeatSessions`' job
(``heartbeat_sessions.py``); the client owns one as ``heartbeats``.

With ``authenticationEnabled`` every request and every session upgrade is signed with
``innerClientAuthenticationCredentials`` (``request_signer``; ``mqha.security.signing``): a fresh
nonce and the wall-clock time each, so the controller can refuse replays (docs/architecture.md §3.3).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from ssl import SSLContext
from typing import Any

from mqha.clock import wall_ms
from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer, Signer
from mqha.controller_client.policy import Policy, parse_addresses
from mqha.errors import RemoteProtocolError
from mqha.replicas_manager.heartbeat_sessions import HeartbeatSessions, PushHandler
from mqha.security.credentials import InnerCredentials, parse_inner_credentials
from mqha.security.signing import sign
from mqha.wire.controller_api import Reply

log = logging.getLogger(__name__)

__all__ = ["ControllerClient", "parse_addresses", "request_signer", "signer_of"]

NONCE_BYTES = 16


def signer_of(credentials: InnerCredentials) -> Signer:
    """Signs each request with ``credentials``, its target node, a fresh random nonce and the wall-clock
    time."""

    def signer(method: str, node: str, target: str, body: bytes) -> dict[str, str]:
        nonce = secrets.token_hex(NONCE_BYTES)
        # Wall clock: the controller compares the timestamp with its own wall clock.
        proof = sign(credentials, method, node, target, body, timestamp_ms=wall_ms(), nonce=nonce)
        return {"Authorization": proof}

    return signer


def request_signer(config: Mapping[str, Any]) -> Signer | None:
    """The signer of a broker's controller calls: None without ``authenticationEnabled``."""
    if not config.get("authenticationEnabled"):
        return None
    return signer_of(parse_inner_credentials(config["innerClientAuthenticationCredentials"]))


class ControllerClient:
    """Makes the broker's leader-only calls to the controllers (its ``heartbeats`` keep the sessions)."""

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
        signer: Signer | None = None,
        ssl: SSLContext | None = None,
    ) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = list(addresses)
        self.request_timeout_s = request_timeout_s  # > the controller's 5 s write timeout
        self.metadata_timeout_s = metadata_timeout_s
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
            signer=signer,
            ssl=ssl,
        )
        self.heartbeats = HeartbeatSessions(
            self.addresses,
            self._caller,
            on_push=on_push,
            heartbeat_timeout_s=heartbeat_timeout_s,
            connect_timeout_s=max(1.0, metadata_timeout_s * 2),
            reconnect_min_s=reconnect_min_s,
            reconnect_max_s=reconnect_max_s,
        )
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
        """Open the sessions to every controller."""
        self.heartbeats.start()

    async def close(self) -> None:
        """Close every session (the controllers see a clean close) and the HTTP client."""
        self._closing = True
        await self.heartbeats.close()
        await self._caller.close()

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
