"""``mqadmin <command> [options]``: the admin CLI shell -- argparse, a small HTTP client, the loops.

The parsers, what to ask and how to print it are ``mqha.admin_cli.commands`` (pure); this module only
sends the calls it builds and writes the text it returns. Output goes to stdout; a failure is one line
on stderr (``<command> command failed: [<code> <codeName>] <remark>``, a JSON object with ``--json``) and the
exit status says what kind: 0 success, 1 a node answered but not SUCCESS, 2 bad command line,
3 no listed node reachable. ``-i`` repeats until SIGINT/SIGTERM (exit 0); a failed round is reported
on stderr and the loop goes on, as a monitor should.

Leader calls use the one leader-following policy (``mqha.controller_client``): every address of
``-a`` (a ``;`` list) is asked for its metadata in turn until one names the serving leader; while
nodes answer but none knows a leader (an election is running), the round is repeated until
``--timeout``; when no node answers at all, the command fails at once (exit 3). A not-leader answer
sends the call to the node it names (reads always; writes only when the controller says nothing was
appended).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from ssl import SSLContext
from typing import Any, NoReturn, TextIO

import aiohttp

from mqha.admin_cli import acl, brokers, topics, voters
from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import (
    ACCESS_TIMEOUT,
    COMMANDS,
    CONNECT_FAILED,
    CONNECTION_LOST,
    DEFAULT_TIMEOUT,
    EXIT_OK,
    EXIT_USAGE,
    Answer,
    CommandFailed,
    HttpCall,
    UsageError,
)
from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer, Silence, TransportFailure, fetch
from mqha.controller_client.policy import Policy, Why
from mqha.errors import ConfigError, RemoteProtocolError
from mqha.security.signing import bearer_header
from mqha.security.tls import trust_context

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


# --------------------------------------------------------------------------------------------------
# Commands: each returns (text, json object) for one round.

Output = tuple[str, Any]


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


async def run_get_controller_metadata(ctx: Context) -> Output:
    answer = core.require_success(await ctx.controllers().first_answer(core.metadata_call()))
    return core.format_controller_metadata(answer), core.controller_metadata_json(answer)


async def _sync_state_table(ctx: Context, controllers: Controllers) -> dict[str, core.ReplicasInfo]:
    args = ctx.args
    if args.brokerName:
        names = [args.brokerName]
    elif args.clusterName:
        groups = core.require_success(await controllers.leader_call(core.groups_call()))
        names = core.broker_names_of_cluster(groups, args.clusterName)
    else:
        raise UsageError("one of -b brokerName or -c clusterName is required")
    answer = core.require_success(await controllers.leader_call(core.sync_state_data_call(names)))
    table = core.sync_state_table(answer)
    core.require_known_sets(table, names, answer.address)
    return {name: table[name] for name in names}


async def run_get_sync_state_set(ctx: Context) -> Output:
    table = await _sync_state_table(ctx, ctx.controllers())
    return core.format_sync_state_sets(table), core.sync_state_sets_json(table)


async def run_get_broker_epoch(ctx: Context) -> Output:
    table = await _sync_state_table(ctx, ctx.controllers())
    texts: list[str] = []
    caches: list[dict[str, Any]] = []
    errors: list[CommandFailed] = []
    for name in sorted(table):
        for target in core.replica_targets(name, table[name]):
            if not target.alive:
                ctx.note(f"skipped {target.address} ({name} broker id {target.broker_id}): not alive")
                continue
            try:
                answer = core.require_success(
                    await ctx.http.send(target.address, core.broker_epochs_call(), auth=False)
                )
            except CommandFailed as exc:
                errors.append(exc)
                continue
            texts.append(core.format_broker_epoch(target.address, answer.payload))
            caches.append(core.broker_epoch_json(target.address, answer.payload))
    _fail_if_any(ctx, errors, ("".join(texts), {"brokers": caches}) if caches else None)
    if not caches:
        raise core.failed(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, "no replica of the broker set is alive")
    return "".join(texts), {"brokers": caches}


def _fail_if_any(ctx: Context, errors: list[CommandFailed], partial: Output | None) -> None:
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


async def run_ha_status(ctx: Context) -> Output:
    args = ctx.args
    if args.brokerAddr:
        targets = [core.check_address(args.brokerAddr)]
    elif args.clusterName:
        if not args.controllerAddress:
            raise UsageError("-c needs -a controllerAddress to find the masters of the cluster")
        controllers = ctx.controllers()
        groups = core.require_success(await controllers.leader_call(core.groups_call()))
        names = core.broker_names_of_cluster(groups, args.clusterName)
        answer = core.require_success(await controllers.leader_call(core.sync_state_data_call(names)))
        table = core.sync_state_table(answer)
        targets = []
        for name in sorted(table):
            master = core.master_target(name, table[name])
            if master is None:
                ctx.note(f"skipped broker set {name}: no master")
            else:
                targets.append(master.address)
        if not targets:
            raise core.failed(
                ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                f"no broker set of cluster '{args.clusterName}' has a master",
                answer.address,
            )
    else:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    texts: list[str] = []
    infos: list[dict[str, Any]] = []
    errors: list[CommandFailed] = []
    for address in targets:
        try:
            answer = core.require_success(
                await ctx.http.send(address, core.broker_ha_status_call(), auth=False)
            )
        except CommandFailed as exc:
            errors.append(exc)
            continue
        texts.append(core.format_ha_status(address, answer.payload))
        infos.append(core.ha_status_json(address, answer.payload))
    _fail_if_any(ctx, errors, ("".join(texts), {"brokers": infos}) if infos else None)
    return "".join(texts), {"brokers": infos}


async def run_elect_master(ctx: Context) -> Output:
    args = ctx.args
    call = core.elect_call(args.clusterName, args.brokerName, args.brokerId)
    answer = core.require_success(await ctx.controllers().leader_call(call))
    payload = core.elect_payload(answer)
    return (
        core.format_elect_master(args.clusterName, args.brokerName, payload),
        core.elect_master_json(args.clusterName, args.brokerName, payload),
    )


async def run_clean_broker_metadata(ctx: Context) -> Output:
    args = ctx.args
    core.check_clean_args(args.clusterName, args.cleanLivingBroker)
    call = core.clean_call(
        args.clusterName, args.brokerName, args.brokerControllerIdsToClean, args.cleanLivingBroker
    )
    core.require_success(await ctx.controllers().leader_call(call))
    return core.format_clean(args.brokerName), {"brokerName": args.brokerName, "cleaned": True}


async def run_get_controller_config(ctx: Context) -> Output:
    texts: list[str] = []
    configs: dict[str, Any] = {}
    errors: list[CommandFailed] = []
    for address in core.split_addresses(ctx.args.controllerAddress):
        try:
            answer = core.require_success(await ctx.http.send(address, core.get_config_call()))
            config = core.controller_config_of(answer)
        except CommandFailed as exc:
            errors.append(exc)
            continue
        texts.append(core.format_controller_config(address, config))
        configs[address] = config
    _fail_if_any(ctx, errors, ("".join(texts), {"configs": configs}) if configs else None)
    return "".join(texts), {"configs": configs}


async def run_update_controller_config(ctx: Context) -> Output:
    args = ctx.args
    addresses = core.split_addresses(args.controllerAddress)
    errors: list[CommandFailed] = []
    for address in addresses:
        try:
            answer = core.require_success(
                await ctx.http.send(address, core.update_config_call(args.key, args.value))
            )
        except CommandFailed as exc:
            errors.append(exc)
            continue
        if answer.remark:
            ctx.note(f"{address}: {answer.remark}")
    _fail_if_any(ctx, errors, None)
    return (
        core.format_update_config(addresses, args.key, args.value),
        {"addresses": addresses, "key": args.key, "value": args.value},
    )


RUNNERS: dict[str, Callable[[Context], Awaitable[Output]]] = {
    "getControllerMetaData": run_get_controller_metadata,
    "getSyncStateSet": run_get_sync_state_set,
    "getBrokerEpoch": run_get_broker_epoch,
    "haStatus": run_ha_status,
    "electMaster": run_elect_master,
    "cleanBrokerMetadata": run_clean_broker_metadata,
    "getControllerConfig": run_get_controller_config,
    "updateControllerConfig": run_update_controller_config,
    "clusterList": brokers.run_cluster_list,
    "brokerStatus": brokers.run_broker_status,
    "getBrokerConfig": brokers.run_get_broker_config,
    "updateBrokerConfig": brokers.run_update_broker_config,
    "getControllerQuorum": voters.run_get_controller_quorum,
    "addControllerPeer": voters.run_add_controller_peer,
    "removeControllerPeer": voters.run_remove_controller_peer,
    "updateTopic": topics.run_update_topic,
    "deleteTopic": topics.run_delete_topic,
    "topicList": topics.run_topic_list,
    "topicRoute": topics.run_topic_route,
    "consumerProgress": topics.run_consumer_progress,
    **acl.RUNNERS,
}


# --------------------------------------------------------------------------------------------------
# Command line


def _usage_exit(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


async def _run_once(ctx: Context, runner: Callable[[Context], Awaitable[Output]]) -> int:
    try:
        text, obj = await runner(ctx)
    except CommandFailed as exc:
        report = core.failure_json if ctx.args.json else core.failure_text
        print(report(ctx.args.command, exc.failure), file=ctx.err)
        return exc.exit_code
    sys.stdout.write(core.dumps(obj) + "\n" if ctx.args.json else text)
    sys.stdout.flush()
    return EXIT_OK


async def _serve(ctx: Context, runner: Callable[[Context], Awaitable[Output]]) -> int:
    """One round, or (``-i``) rounds until SIGTERM or ``--rounds``; a failed round does not end those."""
    interval: float | None = getattr(ctx.args, "interval", None)
    try:
        if interval is None:
            return await _run_once(ctx, runner)
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        rounds = 0
        while True:
            status = await _run_once(ctx, runner)
            rounds += 1
            if ctx.args.rounds is not None and rounds >= ctx.args.rounds:
                return status
            try:
                await asyncio.sleep(interval)
            except asyncio.CancelledError:
                return EXIT_OK  # SIGTERM (or SIGINT): the monitor was asked to stop
    finally:
        await ctx.http.close()


def run(argv: Sequence[str]) -> int:
    if not argv:
        sys.stderr.write(core.command_list_text())
        return EXIT_USAGE
    if argv[0] in ("-h", "--help", "help") and len(argv) == 1:
        sys.stdout.write(core.command_list_text())
        return EXIT_OK
    name, rest = argv[0], list(argv[1:])
    if name == "help":
        name, rest = rest[0], ["-h"]
    command = COMMANDS.get(name)
    if command is None:
        sys.stderr.write(core.unknown_command_text(name))
        return EXIT_USAGE
    parser = core.build_parser(command)
    args = parser.parse_args(rest)  # exits 2 on a bad option, 0 on -h
    args.command = command.name
    token = args.token if args.token is not None else os.environ.get(core.TOKEN_ENV) or None
    ca = args.tls_ca if args.tls_ca is not None else os.environ.get(core.TLS_CA_ENV) or None
    try:
        ssl = trust_context(ca) if ca else None
    except ConfigError as exc:
        _usage_exit(parser, f"--tls-ca: {str(exc).partition(': ')[2]}")
    # A command whose --timeout bounds it all (retries included) keeps the usual bound per request.
    per_request = args.timeout if command.timeout is None else min(args.timeout, DEFAULT_TIMEOUT)
    ctx = Context(args, Http(per_request, token, ssl), sys.stderr)
    interval: float | None = getattr(args, "interval", None)
    try:
        return asyncio.run(_serve(ctx, RUNNERS[command.name]))
    except UsageError as exc:
        _usage_exit(parser, str(exc))
    except KeyboardInterrupt:
        return EXIT_OK if interval is not None else core.EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
