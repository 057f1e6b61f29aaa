"""``mqadmin <command> [options]``: the admin CLI shell -- argparse, a small HTTP client, the loops.

What to ask and how to print it is ``mqha.admin_cli.commands`` (pure); this module only sends the calls
it builds and writes the text it returns. Output goes to stdout; a failure is one line on stderr
(``<command> command failed: [<code> <codeName>] <remark>``, a JSON object with ``--json``) and the
exit status says what kind: 0 success, 1 a node answered but not SUCCESS, 2 bad command line,
3 no listed node reachable. ``-i`` repeats until SIGINT/SIGTERM (exit 0); a failed round is reported
on stderr and the loop goes on, as a monitor should.

Leader discovery: every address of ``-a`` (a ``;`` list) is asked for its metadata in turn until one
names the serving leader; while nodes answer but none knows a leader (an election is running), the
round is repeated until ``--timeout``. A not-leader answer from the chosen node sends the call to the
node it names (reads always; writes only when the controller says nothing was appended).

The HTTP client is the standard library's (one blocking request at a time is all a CLI needs, and
it starts faster than aiohttp).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import (
    ACCESS_TIMEOUT,
    COMMANDS,
    CONNECT_FAILED,
    CONNECTION_LOST,
    EXIT_OK,
    EXIT_USAGE,
    Answer,
    CommandFailed,
    HttpCall,
    UsageError,
)
from mqha.codes import ResponseCode

DEFAULT_TIMEOUT = 10.0  # above the controller's 5 s write timeout, so its own answer arrives first
DISCOVERY_PAUSE = 0.2
DISCOVERY_TIMEOUT = 2.0  # per metadata request: a hung node must not hold up trying the next one


class _Stop(Exception):
    """SIGTERM during an interval run."""


# --------------------------------------------------------------------------------------------------
# HTTP


class Http:
    """JSON over HTTP with a bearer token for controllers; transport failures -> CommandFailed."""

    def __init__(self, timeout: float, token: str | None) -> None:
        self.timeout = timeout
        self.token = token

    def send(
        self, address: str, call: HttpCall, *, auth: bool = True, timeout: float | None = None
    ) -> Answer:
        data = None if call.body is None else json.dumps(call.body).encode()
        request = urllib.request.Request(core.base_url(address) + call.path, data=data, method=call.method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if auth and self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        except TimeoutError as exc:
            raise core.unreachable(
                ACCESS_TIMEOUT, f"no answer within {timeout or self.timeout:g} s", address
            ) from exc
        except urllib.error.URLError as err:
            if isinstance(err.reason, TimeoutError):
                raise core.unreachable(
                    ACCESS_TIMEOUT, f"no answer within {timeout or self.timeout:g} s", address
                ) from None
            raise core.unreachable(
                CONNECT_FAILED, f"cannot connect: {_reason(err.reason)}", address
            ) from None
        except OSError as exc:  # after the request went out (urllib wraps only connect/send errors)
            raise core.unreachable(
                CONNECTION_LOST, f"connection lost before the answer: {_reason(exc)}", address
            ) from None
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        return core.answer_from_http(address, status, body)


def _reason(reason: Any) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


class Controllers:
    """The controllers of ``-a``: leader discovery and calls to the leader or to each node."""

    def __init__(self, http: Http, addresses: Sequence[str]) -> None:
        self.http = http
        self.addresses = list(addresses)
        self._leader: str | None = None

    def first_answer(self, call: HttpCall) -> Answer:
        """The answer of the first listed node that can be reached (any node serves ``call``)."""
        last: CommandFailed | None = None
        for address in self.addresses:
            try:
                return self.http.send(address, call, timeout=min(DISCOVERY_TIMEOUT, self.http.timeout))
            except CommandFailed as exc:
                if exc.exit_code != core.EXIT_UNREACHABLE:
                    raise
                last = exc
        assert last is not None
        raise self._none_reachable(last)

    def _none_reachable(self, last: CommandFailed) -> CommandFailed:
        listed = ", ".join(self.addresses)
        remark = (
            f"no controller of [{listed}] can be reached; last: {last.failure.address}: {last.failure.remark}"
        )
        return core.unreachable(last.failure.code, remark)

    def find_leader(self, deadline: float, dead: set[str]) -> str:
        """The serving leader's address, asking the listed nodes in turn (``dead``: unreachable ones,
        neither asked nor accepted as the leader while other nodes are left)."""
        while True:
            last: CommandFailed | None = None
            answered = False
            for address in [a for a in self.addresses if a not in dead] or self.addresses:
                try:
                    answer = self.http.send(
                        address, core.metadata_call(), timeout=min(DISCOVERY_TIMEOUT, self.http.timeout)
                    )
                except CommandFailed as exc:
                    last = exc
                    continue
                answered = True
                leader = core.leader_of(answer) if answer.ok else None
                if leader and leader not in dead:
                    self._leader = leader
                    return leader
            if not answered and last is not None:
                raise self._none_reachable(last)  # nothing to wait for: every node is down
            if time.monotonic() + DISCOVERY_PAUSE >= deadline:
                raise core.failed(
                    ResponseCode.CONTROLLER_NOT_LEADER,
                    f"no controller of [{', '.join(self.addresses)}] knows a serving leader "
                    f"(election in progress or quorum lost) after {self.http.timeout:g} s",
                )
            time.sleep(DISCOVERY_PAUSE)

    def leader_call(self, call: HttpCall) -> Answer:
        """``call`` on the serving leader; the answer is returned whatever its code.

        A leader that cannot be reached (a follower may still name a stopped one) or that answers
        "not leader" sends the call elsewhere, until ``--timeout``: reads always, writes only when
        they surely were not applied (connection refused; not appended per the controller).
        """
        deadline = time.monotonic() + self.http.timeout
        dead: set[str] = set()
        leader = self._leader or self.find_leader(deadline, dead)
        while True:
            try:
                answer = self.http.send(leader, call)
            except CommandFailed as exc:
                unsent = exc.failure.code == CONNECT_FAILED
                if exc.exit_code != core.EXIT_UNREACHABLE or (call.write and not unsent):
                    raise
                if time.monotonic() >= deadline:
                    raise
                dead.add(leader)
                self._leader = None
                leader = self.find_leader(deadline, dead)
                continue
            if not core.may_resend(call, answer) or time.monotonic() >= deadline:
                return answer
            named = answer.payload.get("leaderAddress")
            self._leader = None
            if isinstance(named, str) and named and named != leader and named not in dead:
                leader = named
            else:
                time.sleep(DISCOVERY_PAUSE)
                leader = self.find_leader(deadline, dead)


# --------------------------------------------------------------------------------------------------
# Commands: each returns (text, json object) for one round.

Output = tuple[str, Any]


class Context:
    def __init__(self, args: argparse.Namespace, http: Http, err: TextIO) -> None:
        self.args = args
        self.http = http
        self.err = err

    def controllers(self) -> Controllers:
        return Controllers(self.http, core.split_addresses(self.args.controllerAddress))

    def note(self, text: str) -> None:
        """A remark that is not a failure (skipped replicas, restart-only keys)."""
        print(f"{self.args.command}: {text}", file=self.err)


def run_get_controller_metadata(ctx: Context) -> Output:
    answer = core.require_success(ctx.controllers().first_answer(core.metadata_call()))
    return core.format_controller_metadata(answer), core.controller_metadata_json(answer)


def _sync_state_table(ctx: Context, controllers: Controllers) -> dict[str, core.ReplicasInfo]:
    args = ctx.args
    if args.brokerName:
        names = [args.brokerName]
    elif args.clusterName:
        groups = core.require_success(controllers.leader_call(core.groups_call()))
        names = core.broker_names_of_cluster(groups, args.clusterName)
    else:
        raise UsageError("one of -b brokerName or -c clusterName is required")
    answer = core.require_success(controllers.leader_call(core.sync_state_data_call(names)))
    table = core.sync_state_table(answer)
    core.require_known_sets(table, names, answer.address)
    return {name: table[name] for name in names}


def run_get_sync_state_set(ctx: Context) -> Output:
    table = _sync_state_table(ctx, ctx.controllers())
    return core.format_sync_state_sets(table), core.sync_state_sets_json(table)


def run_get_broker_epoch(ctx: Context) -> Output:
    table = _sync_state_table(ctx, ctx.controllers())
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
                    ctx.http.send(target.address, core.broker_epochs_call(), auth=False)
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


def run_ha_status(ctx: Context) -> Output:
    args = ctx.args
    if args.brokerAddr:
        targets = [core.check_address(args.brokerAddr)]
    elif args.clusterName:
        if not args.controllerAddress:
            raise UsageError("-c needs -a controllerAddress to find the masters of the cluster")
        controllers = ctx.controllers()
        groups = core.require_success(controllers.leader_call(core.groups_call()))
        names = core.broker_names_of_cluster(groups, args.clusterName)
        answer = core.require_success(controllers.leader_call(core.sync_state_data_call(names)))
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
            answer = core.require_success(ctx.http.send(address, core.broker_ha_status_call(), auth=False))
        except CommandFailed as exc:
            errors.append(exc)
            continue
        texts.append(core.format_ha_status(address, answer.payload))
        infos.append(core.ha_status_json(address, answer.payload))
    _fail_if_any(ctx, errors, ("".join(texts), {"brokers": infos}) if infos else None)
    return "".join(texts), {"brokers": infos}


def run_elect_master(ctx: Context) -> Output:
    args = ctx.args
    call = core.elect_call(args.clusterName, args.brokerName, args.brokerId)
    answer = core.require_success(ctx.controllers().leader_call(call))
    payload = core.elect_payload(answer)
    return (
        core.format_elect_master(args.clusterName, args.brokerName, payload),
        core.elect_master_json(args.clusterName, args.brokerName, payload),
    )


def run_clean_broker_metadata(ctx: Context) -> Output:
    args = ctx.args
    core.check_clean_args(args.clusterName, args.cleanLivingBroker)
    call = core.clean_call(
        args.clusterName, args.brokerName, args.brokerControllerIdsToClean, args.cleanLivingBroker
    )
    core.require_success(ctx.controllers().leader_call(call))
    return core.format_clean(args.brokerName), {"brokerName": args.brokerName, "cleaned": True}


def run_get_controller_config(ctx: Context) -> Output:
    texts: list[str] = []
    configs: dict[str, Any] = {}
    errors: list[CommandFailed] = []
    for address in core.split_addresses(ctx.args.controllerAddress):
        try:
            answer = core.require_success(ctx.http.send(address, core.get_config_call()))
            config = core.controller_config_of(answer)
        except CommandFailed as exc:
            errors.append(exc)
            continue
        texts.append(core.format_controller_config(address, config))
        configs[address] = config
    _fail_if_any(ctx, errors, ("".join(texts), {"configs": configs}) if configs else None)
    return "".join(texts), {"configs": configs}


def run_update_controller_config(ctx: Context) -> Output:
    args = ctx.args
    addresses = core.split_addresses(args.controllerAddress)
    errors: list[CommandFailed] = []
    for address in addresses:
        try:
            answer = core.require_success(
                ctx.http.send(address, core.update_config_call(args.key, args.value))
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


RUNNERS: dict[str, Callable[[Context], Output]] = {
    "getControllerMetaData": run_get_controller_metadata,
    "getSyncStateSet": run_get_sync_state_set,
    "getBrokerEpoch": run_get_broker_epoch,
    "haStatus": run_ha_status,
    "electMaster": run_elect_master,
    "cleanBrokerMetadata": run_clean_broker_metadata,
    "getControllerConfig": run_get_controller_config,
    "updateControllerConfig": run_update_controller_config,
}


# --------------------------------------------------------------------------------------------------
# Command line


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def build_parser(command: core.Command) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{core.PROG} {command.name}",
        description=command.summary,
        epilog=command.epilog or None,
        allow_abbrev=False,
    )
    for option in command.options:
        if option.kind == "flag":
            parser.add_argument(*option.flags, dest=option.dest, action="store_true", help=option.help)
            continue
        kwargs: dict[str, Any] = {"dest": option.dest, "help": option.help, "metavar": option.metavar}
        if option.required:
            kwargs["required"] = True
        if option.kind == "int":
            kwargs["type"] = _int
        elif option.kind == "interval":
            kwargs.update(type=_positive_float, nargs="?", const=core.DEFAULT_INTERVAL)
        parser.add_argument(*option.flags, **kwargs)
    common = parser.add_argument_group("common options")
    common.add_argument("--json", action="store_true", help="machine output: one JSON document per line")
    common.add_argument(
        "--token",
        default=None,
        help=f"admin token sent as 'Authorization: Bearer' (default: ${core.TOKEN_ENV})",
    )
    common.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"per-request timeout, also the leader-discovery bound (default {DEFAULT_TIMEOUT:g})",
    )
    if any(option.kind == "interval" for option in command.options):
        common.add_argument(
            "--rounds", type=_positive_int, default=None, metavar="N", help="with -i: stop after N rounds"
        )
    return parser


def _usage_exit(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Stop


def _run_once(ctx: Context, runner: Callable[[Context], Output]) -> int:
    try:
        text, obj = runner(ctx)
    except CommandFailed as exc:
        report = core.failure_json if ctx.args.json else core.failure_text
        print(report(ctx.args.command, exc.failure), file=ctx.err)
        return exc.exit_code
    sys.stdout.write(core.dumps(obj) + "\n" if ctx.args.json else text)
    sys.stdout.flush()
    return EXIT_OK


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
    parser = build_parser(command)
    args = parser.parse_args(rest)  # exits 2 on a bad option, 0 on -h
    args.command = command.name
    token = args.token if args.token is not None else os.environ.get(core.TOKEN_ENV) or None
    ctx = Context(args, Http(args.timeout, token), sys.stderr)
    runner = RUNNERS[command.name]
    interval: float | None = getattr(args, "interval", None)
    try:
        if interval is None:
            return _run_once(ctx, runner)
        # Interval mode runs until interrupted; a failed round does not end it.
        signal.signal(signal.SIGTERM, _on_sigterm)
        rounds = 0
        while True:
            status = _run_once(ctx, runner)
            rounds += 1
            if args.rounds is not None and rounds >= args.rounds:
                return status
            time.sleep(interval)
    except UsageError as exc:
        _usage_exit(parser, str(exc))
    except (KeyboardInterrupt, _Stop):
        return EXIT_OK if interval is not None else core.EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
