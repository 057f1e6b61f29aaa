"""``mqadmin <command> [options]``: the admin CLI shell -- argparse, a small HTTP client, the loops.

The parsers, what to ask and how to print it are ``mqha.admin_cli.commands`` (pure); this module only
sends the calls it builds (``context``: the HTTP client and the leader-following caller; one module
per command family runs them) and writes the text it returns. Output goes to stdout; a failure is one line
on stderr (``<command> command failed: [<code> <codeName>] <remark>``, a JSON object with ``--json``) and the
exit status says what kind: 0 success, 1 a node answered but not SUCCESS, 2 bad command line,
3 no listed node reachable. ``-i`` repeats until SIGINT/SIGTERM (exit 0); a failed round is reported
on stderr and the loop goes on, as a monitor should.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn

from mqha.admin_cli import acl, brokers, controllers, topics, voters
from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import (
    COMMANDS,
    DEFAULT_TIMEOUT,
    EXIT_OK,
    EXIT_USAGE,
    CommandFailed,
    UsageError,
)
from mqha.admin_cli.context import Context, Http, Output
from mqha.errors import ConfigError
from mqha.security.tls import trust_context

RUNNERS: dict[str, Callable[[Context], Awaitable[Output]]] = {
    "getControllerMetaData": controllers.run_get_controller_metadata,
    "getSyncStateSet": controllers.run_get_sync_state_set,
    "getBrokerEpoch": controllers.run_get_broker_epoch,
    "haStatus": controllers.run_ha_status,
    "electMaster": controllers.run_elect_master,
    "cleanBrokerMetadata": controllers.run_clean_broker_metadata,
    "getControllerConfig": controllers.run_get_controller_config,
    "updateControllerConfig": controllers.run_update_controller_config,
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
