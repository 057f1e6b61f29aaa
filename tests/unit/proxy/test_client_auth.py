"""mqproxy's client access checks without a server: authentication (and its cache), what each request
needs of a policy, and the guarded servicer's answers (the method's response, UNAUTHORIZED or
FORBIDDEN)."""

from __future__ import annotations

import asyncio
from typing import Any

from mqha.proxy.client_auth import ClientAccess, GuardedService, client_access, peer_ip, requirements
from mqha.proxy.v2 import definition as d
from mqha.proxy.v2 import service as s
from mqha.security.acl import (
    AccessBook,
    AclUser,
    Action,
    Decision,
    ResourceType,
    UserType,
    make_entries,
    parse_actions,
    parse_resources,
)
from mqha.security.client_signature import authorization_header, format_date_time

NOW = 1_767_225_600.0
USERS = {
    "root": AclUser("root", UserType.SUPER, "root-secret"),
    "app": AclUser("app", UserType.NORMAL, "app-secret1"),
}
POLICIES = {"app": make_entries(parse_resources("Topic:A"), parse_actions("Pub"), Decision.ALLOW, ())}


def signed(user: str, secret: str, at: float = NOW) -> list[tuple[str, str]]:
    stamp = format_date_time(at)
    return [("x-mq-date-time", stamp), ("authorization", authorization_header(user, secret, stamp))]


def access(clock: list[float], refusals: list[tuple[str, str]] | None = None) -> ClientAccess:
    return ClientAccess(
        AccessBook(USERS, POLICIES),
        authorization=True,
        max_skew_s=900,
        on_refusal=(lambda method, reason: refusals.append((method, reason)))
        if refusals is not None
        else None,
        clock=lambda: clock[0],
    )


def test_authentication_and_its_cache_follow_time_and_the_book() -> None:
    clock = [NOW]
    checks = access(clock)
    assert checks.authenticate(signed("app", "app-secret1")) == ("app", "")
    assert checks.authenticate(signed("app", "app-secret1")) == ("app", "")  # cached
    clock[0] = NOW + 901  # the cached header got too old
    name, why = checks.authenticate(signed("app", "app-secret1"))
    assert name is None and why.startswith("clock_skew")
    clock[0] = NOW
    assert checks.authenticate(signed("app", "app-secret1"))[0] == "app"
    # A new book (the user's password changed) forgets what was verified with the old one.
    checks.use_book(AccessBook({"app": AclUser("app", UserType.NORMAL, "new-secret")}, {}))
    name, why = checks.authenticate(signed("app", "app-secret1"))
    assert name is None and why.startswith("wrong_signature")
    # The same header with another date-time header is checked again (and is wrong).
    header = signed("app", "new-secret")
    assert checks.authenticate(header)[0] == "app"
    name, why = checks.authenticate([header[1], ("x-mq-date-time", format_date_time(NOW + 1))])
    assert name is None and why.startswith("wrong_signature")
    assert checks.authenticate([])[1].startswith("missing")


def test_requirements_per_rpc() -> None:
    message = d.Message(topic=d.Resource(name="A"))
    other = d.Message(topic=d.Resource(name="B"))
    send = s.SendMessageRequest(messages=[message, other, message])
    topic, group = ResourceType.TOPIC, ResourceType.GROUP
    assert requirements("SendMessage", send) == [(topic, "A", Action.PUB), (topic, "B", Action.PUB)]
    receive = s.ReceiveMessageRequest(
        group=d.Resource(name="G"), message_queue=d.MessageQueue(topic=d.Resource(name="A"))
    )
    sub = [(topic, "A", Action.SUB), (group, "G", Action.SUB)]
    assert requirements("ReceiveMessage", receive) == sub
    for method, request_type in (
        ("AckMessage", s.AckMessageRequest),
        ("ChangeInvisibleDuration", s.ChangeInvisibleDurationRequest),
        ("QueryAssignment", s.QueryAssignmentRequest),
    ):
        request = request_type(group=d.Resource(name="G"), topic=d.Resource(name="A"))
        assert requirements(method, request) == sub
    assert requirements("Heartbeat", s.HeartbeatRequest(group=d.Resource(name="G"))) == [
        (group, "G", Action.SUB)
    ]
    assert requirements("Heartbeat", s.HeartbeatRequest()) == []
    assert requirements("NotifyClientTermination", s.NotifyClientTerminationRequest()) == []


def test_peer_ip() -> None:
    assert peer_ip("ipv4:10.1.2.3:5000") == "10.1.2.3"
    assert peer_ip("ipv6:[::1]:5000") == "::1"
    assert peer_ip("unix:/tmp/x") is None and peer_ip(None) is None


class FakeContext:
    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> Any:
        return tuple(self._metadata)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:4000"


class Served:
    async def SendMessage(self, request: Any, context: Any) -> Any:
        return s.SendMessageResponse(status=d.Status(code=d.Code.OK, message="stored"))

    async def ReceiveMessage(self, request: Any, context: Any) -> Any:
        yield s.ReceiveMessageResponse(status=d.Status(code=d.Code.OK))

    async def Telemetry(self, requests: Any, context: Any) -> Any:
        async for _ in requests:
            yield s.TelemetryCommand(status=d.Status(code=d.Code.OK))

    def __getattr__(self, name: str) -> Any:
        async def other(request: Any, context: Any) -> Any:
            return None

        return other


def test_the_guarded_servicer_answers_refusals_with_the_methods_response() -> None:
    refusals: list[tuple[str, str]] = []
    guarded = GuardedService(Served(), access([NOW], refusals))

    def send(metadata: list[tuple[str, str]], topic: str) -> Any:
        request = s.SendMessageRequest(messages=[d.Message(topic=d.Resource(name=topic))])
        return asyncio.run(guarded.SendMessage(request, FakeContext(metadata))).status

    assert send(signed("app", "app-secret1"), "A").code == d.Code.OK
    denied = send(signed("app", "app-secret1"), "B")
    assert denied.code == d.Code.FORBIDDEN and "User:app has no permission to Pub Topic:B" in denied.message
    assert send(signed("root", "root-secret"), "B").code == d.Code.OK  # Super
    assert send(signed("app", "wrong-secret"), "A").code == d.Code.UNAUTHORIZED
    assert send([], "A").code == d.Code.UNAUTHORIZED

    async def receive(metadata: list[tuple[str, str]]) -> list[Any]:
        request = s.ReceiveMessageRequest(
            group=d.Resource(name="G"), message_queue=d.MessageQueue(topic=d.Resource(name="A"))
        )
        return [r async for r in guarded.ReceiveMessage(request, FakeContext(metadata))]

    refused = asyncio.run(receive(signed("app", "app-secret1")))
    assert [r.status.code for r in refused] == [d.Code.FORBIDDEN]

    async def telemetry(metadata: list[tuple[str, str]]) -> list[Any]:
        async def commands() -> Any:
            yield s.TelemetryCommand()
            yield s.TelemetryCommand()

        return [r async for r in guarded.Telemetry(commands(), FakeContext(metadata))]

    assert [r.status.code for r in asyncio.run(telemetry([]))] == [d.Code.UNAUTHORIZED] * 2
    assert [r.status.code for r in asyncio.run(telemetry(signed("app", "app-secret1")))] == [d.Code.OK] * 2
    assert refusals == [
        ("SendMessage", "forbidden"),
        ("SendMessage", "wrong_signature"),
        ("SendMessage", "missing"),
        ("ReceiveMessage", "forbidden"),
        ("Telemetry", "missing"),
    ]


def test_off_means_no_guard() -> None:
    base = {
        "authenticationEnabled": False,
        "authorizationEnabled": False,
        "authenticationClockSkewSeconds": 900,
    }
    assert client_access(base, None) is None
    user = '{"username": "root", "password": "root-secret"}'
    on = client_access({**base, "authenticationEnabled": True, "initAuthenticationUser": user}, None)
    assert on is not None and on.book.users["root"].user_type is UserType.SUPER and not on.authorization


def test_the_controllers_book_opens_with_the_inner_secret_and_keeps_the_initial_user() -> None:
    from mqha.proxy.acl_source import book_from
    from mqha.security.sealed import seal
    from mqha.wire.acl_api import AclBookPayload, AclInfo, SealedUser
    from mqha.wire.records import AclEntry

    payload = AclBookPayload(
        applied_index=7,
        users=(
            SealedUser("app", "Normal", seal("inner-1", "app", "app-secret1")),
            SealedUser("old", "Normal", seal("inner-0", "old", "old-secret1")),  # sealed under another key
        ),
        acls=(AclInfo("User:app", (AclEntry("Topic:A", ("Pub",), "Allow"),)),),
    )
    book = book_from(payload, "inner-1", {"root": USERS["root"]})
    assert set(book.users) == {"app", "root"} and book.secret_of("app") == "app-secret1"
    assert book.check("app", ResourceType.TOPIC, "A", Action.PUB, None).allowed
    assert not book.check("app", ResourceType.TOPIC, "B", Action.PUB, None).allowed
