"""Who is calling mqproxy, and may they (shell over ``mqha.security``; docs/architecture.md §12.12).

With ``authenticationEnabled=true`` every call must carry the official clients' signature
(``mqha.security.client_signature``) by a user the proxy knows: ``initAuthenticationUser`` (a Super
user, as RocketMQ creates it) and the ACL users replicated in the controllers
(``mqha.proxy.acl_source``). A call without valid credentials is answered as RocketMQ's proxy answers
it: the method's own response with the v2 status UNAUTHORIZED (40100), gRPC status OK, so each client
raises its authentication error. With ``authorizationEnabled=true`` the call must also be allowed by
the user's policy (:func:`requirements`): otherwise FORBIDDEN (40300), the v2 code for a user without
the permission. Every refusal is counted by method and reason.

The guard wraps the servicer's methods (decoded requests, one more coroutine frame); with
authentication off nothing is wrapped and the path is as before.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import grpc

from mqha.proxy.routes import status
from mqha.proxy.v2 import definition as d
from mqha.proxy.v2 import service as s
from mqha.security.acl import AccessBook, AclUser, Action, ResourceType, UserType, Verdict
from mqha.security.client_signature import (
    AUTHORIZATION,
    DATE_TIME,
    REFUSAL_TEXT,
    Claim,
    ClaimError,
    check_claim,
    parse_claim,
)
from mqha.security.credentials import parse_user

Requirement = tuple[ResourceType, str, Action]
OnRefusal = Callable[[str, str], None]
"""``(method, reason)`` of each refused call: the metrics' counter."""
FORBIDDEN_REASON = "forbidden"
_CACHE_LIMIT = 4096
_TOPIC, _GROUP = ResourceType.TOPIC, ResourceType.GROUP


def requirements(method: str, request: Any) -> list[Requirement]:
    """What ``request`` needs of its user's policy (pure). RocketMQ's rules for the RPCs mqproxy
    serves: a send needs Pub on its topics; a receive, an ack, an invisibility change and an
    assignment query need Sub on the topic and on the consumer group; a consumer's heartbeat Sub on its
    group. (A route query needs Pub or Sub on the topic: either, so :meth:`ClientAccess.authorize`
    asks it itself.)"""
    if method == "SendMessage":
        topics = dict.fromkeys(message.topic.name for message in request.messages)
        return [(_TOPIC, topic, Action.PUB) for topic in topics]
    if method == "ReceiveMessage":
        return _sub(request.message_queue.topic.name, request.group.name)
    if method in ("AckMessage", "ChangeInvisibleDuration", "QueryAssignment"):
        return _sub(request.topic.name, request.group.name)
    if method == "Heartbeat" and request.group.name:
        return [(_GROUP, request.group.name, Action.SUB)]
    return []


def _sub(topic: str, group: str) -> list[Requirement]:
    return [(_TOPIC, topic, Action.SUB), (_GROUP, group, Action.SUB)]


def peer_ip(peer: str | None) -> str | None:
    """``ipv4:10.0.0.1:5000`` / ``ipv6:[::1]:5000`` (gRPC's peer string) -> the address."""
    if not peer:
        return None
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return None


def initial_users(config: Any) -> dict[str, AclUser]:
    """``initAuthenticationUser`` as a Super user (RocketMQ creates it so at first start)."""
    text = config.get("initAuthenticationUser") or ""
    if not text:
        return {}
    user = parse_user(text)
    return {user.username: AclUser(user.username, UserType.SUPER, user.password)}


def client_access(config: Any, on_refusal: OnRefusal | None) -> ClientAccess | None:
    """The proxy's access checks, or None with ``authenticationEnabled=false`` (every call passes)."""
    if not config["authenticationEnabled"]:
        return None
    return ClientAccess(
        AccessBook(initial_users(config), {}),
        authorization=config["authorizationEnabled"],
        max_skew_s=config["authenticationClockSkewSeconds"],
        on_refusal=on_refusal,
    )


class ClientAccess:
    """The users and policies the proxy decides with, and the decisions."""

    def __init__(
        self,
        book: AccessBook,
        *,
        authorization: bool,
        max_skew_s: float,
        on_refusal: OnRefusal | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._book = book
        self.authorization = authorization
        self._max_skew_s = max_skew_s
        self._on_refusal = on_refusal
        self._clock = clock
        self._verified: dict[str, Claim] = {}  # authorization header -> its checked claim

    @property
    def book(self) -> AccessBook:
        return self._book

    def use_book(self, book: AccessBook) -> None:
        """New users and policies (from the controllers); decisions use them from the next call."""
        self._book = book
        self._verified = {}

    def authenticate(self, metadata: Iterable[tuple[str, Any]]) -> tuple[str | None, str]:
        """(the user's name, "") or (None, why not) for one call's metadata."""
        authorization = date_time = None
        for key, value in metadata:
            if key == AUTHORIZATION:
                authorization = value
            elif key == DATE_TIME:
                date_time = value
        now = self._clock()
        claim = self._verified.get(authorization) if isinstance(authorization, str) else None
        if claim is not None and claim.date_time == date_time:
            # This header was verified before: only its age may have changed since.
            if abs(now - claim.signed_at_s) <= self._max_skew_s:
                return claim.access_key, ""
            del self._verified[claim.header]
        try:
            claim = parse_claim(authorization, date_time)
        except ClaimError as exc:
            return None, f"{exc.refusal.value}: {exc}"
        refusal = check_claim(claim, self._book.secret_of(claim.access_key), now, self._max_skew_s)
        if refusal is not None:
            return None, f"{refusal.value}: User:{claim.access_key}: {REFUSAL_TEXT[refusal]}"
        if len(self._verified) >= _CACHE_LIMIT:
            self._verified = {}
        self._verified[claim.header] = claim
        return claim.access_key, ""

    def authorize(self, username: str, method: str, request: Any, peer: str | None) -> Verdict | None:
        """None when the policy allows ``request``, else the refusing verdict."""
        if not self.authorization:
            return None
        book, source = self._book, peer_ip(peer)
        if method == "QueryRoute":
            topic = request.topic.name
            verdict = book.check(username, _TOPIC, topic, Action.PUB, source)
            if not verdict.allowed:
                verdict = book.check(username, _TOPIC, topic, Action.SUB, source)
            return None if verdict.allowed else verdict
        for kind, name, action in requirements(method, request):
            verdict = book.check(username, kind, name, action, source)
            if not verdict.allowed:
                return verdict
        return None

    def refused(self, method: str, reason: str) -> None:
        if self._on_refusal is not None:
            self._on_refusal(method, reason)


def _refusal(response_type: Any, code: int, text: str) -> Any:
    return response_type(status=status(code, text))


class GuardedService:
    """``servicer``'s methods behind :class:`ClientAccess`; registered in its place."""

    def __init__(self, servicer: Any, access: ClientAccess) -> None:
        for method in s.DESCRIPTOR.services_by_name["MessagingService"].methods:
            response_type = getattr(s, method.output_type.name)
            behaviour = getattr(servicer, method.name)
            if method.client_streaming:
                wrapped = _guard_stream(method.name, behaviour, response_type, access)
            elif inspect.isasyncgenfunction(behaviour):
                wrapped = _guard_unary_stream(method.name, behaviour, response_type, access)
            else:
                wrapped = _guard_unary(method.name, behaviour, response_type, access)
            setattr(self, method.name, wrapped)


def _check(access: ClientAccess, method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
    """None when the call may go on, else the (code, text) that refuses it."""
    username, why = access.authenticate(context.invocation_metadata() or ())
    if username is None:
        access.refused(method, why.split(":", 1)[0])
        return d.Code.UNAUTHORIZED, why
    verdict = access.authorize(username, method, request, context.peer())
    if verdict is not None:
        access.refused(method, FORBIDDEN_REASON)
        return d.Code.FORBIDDEN, verdict.reason
    return None


def _guard_unary(method: str, behaviour: Any, response_type: Any, access: ClientAccess) -> Any:
    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
        refusal = _check(access, method, request, context)
        if refusal is not None:
            return _refusal(response_type, *refusal)
        return await behaviour(request, context)

    guarded.__name__ = method
    return guarded


def _guard_unary_stream(method: str, behaviour: Any, response_type: Any, access: ClientAccess) -> Any:
    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        refusal = _check(access, method, request, context)
        if refusal is not None:
            yield _refusal(response_type, *refusal)
            return
        async for response in behaviour(request, context):
            yield response

    guarded.__name__ = method
    return guarded


def _guard_stream(method: str, behaviour: Any, response_type: Any, access: ClientAccess) -> Any:
    """Telemetry: a refused stream answers each command with the refusal, as RocketMQ's proxy does."""

    async def guarded(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        refusal = _check(access, method, None, context)
        if refusal is None:
            async for response in behaviour(requests, context):
                yield response
            return
        async for _ in requests:
            yield _refusal(response_type, *refusal)

    guarded.__name__ = method
    return guarded
