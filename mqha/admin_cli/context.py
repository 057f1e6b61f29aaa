"""What every mqadmin command run shares: the HTTP client (a bearer token for controllers, failures
turned into ``CommandFailed``), the leader-following caller for ``-a``'s controllers, and the
:class:`Context` handed to each command's runner (``mqha.admin_cli.__main__`` builds it).

Leader calls use the one leader-following policy (``mqha.controller_client``): every address of
``-a`` (a ``;`` list) is asked for its metadata in turn until one names the serving leader; while
nodes answer but none knows a leader (an election is running), the round is repeated until
``--timeout``; when no node answers at all, the command fails at once (exit 3). A not-leader answer
sends the call to the node it names (reads always; writes only when the controller says nothing was
appended).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from ssl import SSLContext
from typing import Any, TextIO

import aiohttp

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import (
    ACCESS_TIMEOUT,
    CONNECT_FAILED,
    CONNECTION_LOST,
    DEFAULT_TIMEOUT,
    Answer,
    CommandFailed,
    HttpCall,
)
from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer, Silence, TransportFailure, fetch
from mqha.controller_client.policy import Policy, Why
from mqha.errors import RemoteProtocolError
from mqha.security.signing import bearer_header

Output = tuple[str, Any]  # a command round's (text, json object)

DISCOVERY_PAUSE_MS = 200
DISCOVERY_TIMEOUT = 2.0  # per metadata request: a hung node must not hold up trying the next one
# Rounds until --timeout (the budget, set per run); nothing to wait for when no node answers at all.
POLICY = Policy(
    rounds=None,
    budget_ms=round(DEFAULT_TIMEOUT * 1000),
    backoff_ms=DISCOVERY_PAUSE_MS,
    backoff_max_ms=DISCOVERY_PAUSE_MS,
    give_up_when_none_answer=True,
)


# --------------------------------------------------------------------------------------------------
# HTTP

_SILENCE_CODES = {
    Silence.CONNECT_FAILED: CONNECT_FAILED,
    Silence.CONNECT_TIMEOUT: ACCESS_TIMEOUT,
    Silence.TIMEOUT: ACCESS_TIMEOUT,
    Silence.LOST: CONNECTION_LOST,
}


def _unreachable(failure: TransportFailure) -> CommandFailed:
    if failure.silence is Silence.CONNECT_FAILED:
        remark = f"cannot connect: {failure.detail}"
    elif failure.silence is Silence.LOST:
        remark = f"connection lost before the answer: {failure.detail}"
    else:
        remark = f"no answer within {failure.timeout_s:g} s"
    return core.unreachable(_SILENCE_CODES[failure.silence], remark, failure.address)


class Http:
    """The CLI's HTTP: one aiohttp session, a bearer token for controllers; failures -> CommandFailed."""

    def __init__(self, timeout: float, token: str | None, ssl: SSLContext | None = None) -> None:
        self.timeout = timeout
        self.ssl = ssl  # https verified by it (--tls-ca)
        self.headers = {"Accept": "application/json"}
        self.plain = dict(self.headers)  # broker reads: no token (only updateBrokerConfig sends it)
        if token:
            self.headers["Authorization"] = bearer_header(token)
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(
        self, address: str, call: HttpCall, *, auth: bool = True, timeout: float | None = None
    ) -> Answer:
        try:
            status, body = await fetch(
                self.session,
                address,
                call.method,
                call.path,
                body=call.body,
                timeout_s=timeout or self.timeout,
                headers=self.headers if auth else self.plain,
                ssl=self.ssl,
            )
        except TransportFailure as exc:
            raise _unreachable(exc) from None
        return core.answer_from_http(address, status, body)


class Controllers:
    """Sends a command's calls to the controllers of ``-a`` and turns a failed search into a remark.

    A call goes to the serving leader (the one leader-following policy of ``mqha.controller_client``,
    bounded by ``--timeout``) or to the first node that answers.
    """

    def __init__(self, http: Http, addresses: Sequence[str]) -> None:
        self.addresses = list(addresses)
        self.caller = LeaderCaller(
            self.addresses,
            replace(POLICY, budget_ms=round(http.timeout * 1000), max_redirects=len(self.addresses) + 1),
            session=http.session,
            call_timeout_s=http.timeout,
            probe_timeout_s=min(DISCOVERY_TIMEOUT, http.timeout),
            headers=http.headers,
            ssl=http.ssl,
        )

    async def first_answer(self, call: HttpCall) -> Answer:
        """The answer of the first listed node that can be reached (any node serves ``call``)."""
        return await self._call(call, any_node=True, timeout_s=self.caller.probe_timeout_s)

    async def leader_call(self, call: HttpCall) -> Answer:
        """``call`` on the serving leader; the answer is returned whatever its code. Reads go on to
        other nodes until ``--timeout``; writes only when they surely were not applied (connection
        refused; not appended per the controller)."""
        return await self._call(call, write=call.write)

    async def _call(self, call: HttpCall, **how: Any) -> Answer:
        try:
            answer = await self.caller.call(call.method, call.path, body=call.body, **how)
        except NoLeaderAnswer as exc:
            raise self._failure(exc) from None
        except RemoteProtocolError as exc:
            raise core.failed(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        return core.answer_from_http(answer.address, answer.status, answer.reply.to_json())

    def _failure(self, exc: NoLeaderAnswer) -> CommandFailed:
        listed = ", ".join(self.addresses)
        last = exc.last_failure
        if exc.why is Why.NO_LEADER or last is None:
            return core.failed(
                ResponseCode.CONTROLLER_NOT_LEADER,
                f"no controller of [{listed}] knows a serving leader "
                f"(election in progress or quorum lost) after {self.caller.call_timeout_s:g} s",
            )
        failure = _unreachable(last)
        if exc.why is Why.OUTCOME_UNKNOWN:
            return failure
        remark = f"no controller of [{listed}] can be reached; last: {last.address}: {failure.failure.remark}"
        return core.unreachable(failure.failure.code, remark)


class Context:
    """Holds what one command run shares: its parsed arguments, the HTTP client and the stderr stream."""

    def __init__(self, args: argparse.Namespace, http: Http, err: TextIO) -> None:
        self.args = args
        self.http = http
        self.err = err

    def controllers(self) -> Controllers:
        return Controllers(self.http, core.split_addresses(self.args.controllerAddress))

    def note(self, text: str) -> None:
        """A remark that is not a failure (skipped replicas, restart-only keys)."""
        print(f"{self.args.command}: {text}", file=self.err)


def fail_if_any(ctx: Context, errors: list[CommandFailed], partial: Output | None) -> None:
    """With failures: print what did work (``partial``), report every failure but the last on
    stderr, and fail with the last."""
    if not errors:
        return
    if partial is not None:
        text, obj = partial
        sys.stdout.write(core.dumps(obj) + "\n" if ctx.args.json else text)
    report = core.failure_json if ctx.args.json else core.failure_text
    for exc in errors[:-1]:
        print(report(ctx.args.command, exc.failure), file=ctx.err)
    raise errors[-1]
