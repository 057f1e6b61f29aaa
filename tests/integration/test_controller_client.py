"""The leader-following shell (mqha/controller_client/caller.py) against stand-in controllers on real
sockets: redirects, refused and hung nodes, "who leads?", malformed replies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from mqha.clock import wall_ms
from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer, Silence, TransportFailure
from mqha.controller_client.policy import Policy, Why
from mqha.errors import RemoteProtocolError
from mqha.replicas_manager.client import signer_of
from mqha.security.credentials import InnerCredentials
from mqha.security.signing import RequestVerifier, check_body
from tests.helpers.processes import free_port

Handler = Callable[[web.Request], Any]


class Fake:
    """One stand-in controller: ``answer`` decides each reply; ``hits`` counts requests."""

    def __init__(self, answer: Callable[[web.Request], Any]) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.answer = answer
        self.hits: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(request.path)
        result = self.answer(request)
        if asyncio.iscoroutine(result):
            result = await result
        return result


def reply(body: Mapping[str, Any], status: int = 200) -> web.Response:
    return web.json_response(dict(body), status=status)


def not_leader(hint: str | None) -> Handler:
    def answer(request: web.Request) -> web.Response:
        if request.path == "/v1/controller/metadata":
            return reply({"code": 0, "isLeader": False, "leaderAddress": hint})
        return reply(
            {"code": 2007, "remark": "The controller is not in leader state", "leaderAddress": hint}, 421
        )

    return answer


def leader(address: Callable[[], str]) -> Handler:
    def answer(request: web.Request) -> web.Response:
        if request.path == "/v1/controller/metadata":
            return reply({"code": 0, "isLeader": True, "selfAddress": address()})
        return reply({"code": 0, "nextBrokerId": 7})

    return answer


@asynccontextmanager
async def serving(*fakes: Fake) -> AsyncIterator[None]:
    runners = []
    for fake in fakes:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", fake.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", fake.port).start()
        runners.append(runner)
    try:
        yield
    finally:
        for runner in runners:
            await runner.cleanup()


def run(coro: Callable[[], Any]) -> None:
    asyncio.run(asyncio.wait_for(coro(), 30))


DIRECT = Policy(rounds=1, discover=False)


def test_a_hint_is_followed_and_the_leader_remembered() -> None:
    async def body() -> None:
        lead = Fake(leader(lambda: lead.address))
        follower = Fake(not_leader(lead.address))
        dead = f"127.0.0.1:{free_port()}"
        async with serving(lead, follower):
            caller = LeaderCaller([dead, follower.address, lead.address], DIRECT)
            try:
                answer = await caller.call("GET", "/v1/brokers/next-id")
                assert answer.address == lead.address and answer.reply.payload["nextBrokerId"] == 7
                assert caller.leader == lead.address and follower.hits == ["/v1/brokers/next-id"]
                await caller.call("GET", "/v1/brokers/next-id")  # the cached leader first
                assert len(lead.hits) == 2 and len(follower.hits) == 1
            finally:
                await caller.close()

    run(body)


def test_who_leads_before_a_call_and_find_leader() -> None:
    async def body() -> None:
        lead = Fake(leader(lambda: lead.address))
        follower = Fake(not_leader(lead.address))
        async with serving(lead, follower):
            caller = LeaderCaller([follower.address, lead.address], Policy())
            try:
                assert await caller.find_leader() == lead.address
                caller.leader = None
                answer = await caller.call("POST", "/v1/brokers/apply-id", body={}, write=True)
                assert answer.reply.ok and follower.hits == ["/v1/controller/metadata"] * 2
            finally:
                await caller.close()

    run(body)


def test_no_leader_known_backs_off_then_gives_up() -> None:
    async def body() -> None:
        follower = Fake(not_leader(None))
        async with serving(follower):
            caller = LeaderCaller([follower.address], Policy(rounds=3, backoff_ms=10, discover=False))
            try:
                with pytest.raises(NoLeaderAnswer) as caught:
                    await caller.call("GET", "/v1/brokers/next-id")
                assert caught.value.why is Why.NO_LEADER and len(follower.hits) == 3
                assert caught.value.last_answer is not None
                assert caught.value.last_answer.reply.code == ResponseCode.CONTROLLER_NOT_LEADER
            finally:
                await caller.close()

    run(body)


def test_a_timed_out_write_is_not_resent_but_a_read_goes_on() -> None:
    async def body() -> None:
        async def hang(request: web.Request) -> web.Response:
            await asyncio.sleep(1)
            return reply({"code": 0})

        hung = Fake(hang)
        other = Fake(leader(lambda: other.address))
        async with serving(hung, other):
            caller = LeaderCaller([hung.address, other.address], DIRECT, call_timeout_s=0.3)
            try:
                with pytest.raises(NoLeaderAnswer) as caught:
                    await caller.call("POST", "/v1/brokers/apply-id", body={}, write=True)
                assert caught.value.why is Why.OUTCOME_UNKNOWN and other.hits == []
                failure = caught.value.last_failure
                assert failure is not None and failure.silence is Silence.TIMEOUT
                answer = await caller.call("GET", "/v1/brokers/next-id")
                assert answer.address == other.address
            finally:
                await caller.close()

    run(body)


def test_refused_and_malformed() -> None:
    async def body() -> None:
        dead = f"127.0.0.1:{free_port()}"
        garbage = Fake(lambda request: web.Response(text="<html>", status=502))
        async with serving(garbage):
            caller = LeaderCaller([dead], DIRECT)
            try:
                with pytest.raises(NoLeaderAnswer) as caught:
                    await caller.call("GET", "/v1/groups")
                assert caught.value.why is Why.NONE_REACHABLE
                with pytest.raises(TransportFailure, match="Connection refused") as refused:
                    await caller.ask(dead, "GET", "/v1/groups")
                assert refused.value.silence is Silence.CONNECT_FAILED and not refused.value.silence.sent
                with pytest.raises(RemoteProtocolError, match="HTTP 502 without a controller reply"):
                    await caller.ask(garbage.address, "GET", "/v1/groups")
            finally:
                await caller.close()

    run(body)


def test_every_request_is_signed_over_the_exact_bytes_and_target_sent() -> None:
    """A signature covers the node it is sent to, the path with its raw query and the body bytes the
    server receives, with a fresh nonce per request (retries and redirects included)."""
    credentials = InnerCredentials("inner", "inner-secret-0123")
    verdicts: list[object] = []
    verifiers: list[RequestVerifier] = []

    async def check(request: web.Request) -> web.Response:
        body = await request.read()
        header = request.headers.get("Authorization")
        verdict = verifiers[0].verify(request.method, request.raw_path, header, wall_ms())
        verdicts.append(verdict.denial or check_body(verdict.body_sha256, body))
        return reply({"code": 0})

    async def body() -> None:
        fake = Fake(check)
        verifiers.append(RequestVerifier({"inner": credentials}, fake.address))
        async with serving(fake):
            caller = LeaderCaller([fake.address], DIRECT, signer=signer_of(credentials))
            try:
                await caller.call("POST", "/v1/brokers/register", body={"brokerName": "b é/%"}, write=True)
                await caller.call("GET", "/v1/sync-state-data", params={"brokerName": "a b&c=d/é"})
                await caller.call("GET", "/v1/groups/x%20y/replica-info")
                headers = caller.headers_for("GET", fake.address, "/v1/brokers/session")
                url = f"http://{fake.address}/v1/brokers/session"
                with pytest.raises(aiohttp.WSServerHandshakeError):  # the fake does not upgrade
                    await caller.session.ws_connect(url, headers=headers)
            finally:
                await caller.close()

    run(body)
    assert verdicts == [None, None, None, None]
