"""mqadmin's argparse parser of one command, built from its row of ``COMMANDS``. No I/O.

Building the parser from the command table keeps ``-h`` and docs/reference-behaviour.md §19 in step
with what is accepted; the shell (``mqha.admin_cli.__main__``) only runs ``parse_args``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from mqha.admin_cli.commands.failures import DEFAULT_INTERVAL, PROG, TLS_CA_ENV, TOKEN_ENV
from mqha.admin_cli.commands.table import Command

DEFAULT_TIMEOUT = 10.0  # above the controller's 5 s write timeout, so its own answer arrives first


def _typed(convert: Callable[[str], Any], expected: str, *, positive: bool = False) -> Callable[[str], Any]:
    """An argparse ``type``: ``convert`` with RocketMQ-like messages (and a > 0 check)."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if positive and value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    return parse


_positive_float = _typed(float, "a number of seconds", positive=True)
_positive_int = _typed(int, "an integer", positive=True)
_int = _typed(int, "an integer")


def build_parser(command: Command) -> argparse.ArgumentParser:
    """The parser of ``command``: its own options, then the common ones (``--json``, ``--token``, ...)."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} {command.name}",
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
            kwargs.update(type=_positive_float, nargs="?", const=DEFAULT_INTERVAL)
        parser.add_argument(*option.flags, **kwargs)
    common = parser.add_argument_group("common options")
    common.add_argument("--json", action="store_true", help="machine output: one JSON document per line")
    common.add_argument(
        "--token",
        default=None,
        help=f"admin token sent as 'Authorization: Bearer' (default: ${TOKEN_ENV})",
    )
    common.add_argument(
        "--tls-ca",
        default=None,
        metavar="PATH",
        help=f"PEM CA bundle: use https and trust only it (tlsEnable=true clusters; default: ${TLS_CA_ENV})",
    )
    if command.timeout is None:
        timeout_help = f"per-request timeout, also the leader-discovery bound (default {DEFAULT_TIMEOUT:g})"
    else:
        timeout_help = f"bound of the whole command, retries included (default {command.timeout:g})"
    common.add_argument(
        "--timeout",
        type=_positive_float,
        default=command.timeout or DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=timeout_help,
    )
    if any(option.kind == "interval" for option in command.options):
        common.add_argument(
            "--rounds", type=_positive_int, default=None, metavar="N", help="with -i: stop after N rounds"
        )
    return parser
