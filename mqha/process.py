"""Process mains: the start-up and shutdown contract ``mqbroker`` and ``mqcontroller`` share (kernel).

``-c FILE [-p] [--log-level]`` arguments; a problem printed as ONE line on stderr with exit 1 (no
traceback); logs on stderr; SIGTERM / SIGINT only set an event, so each process runs its own ordered
shutdown (docs/architecture.md §1, §11 rule 6). Each main keeps what is its own: its config loader,
its checks and its ``serve``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn


class StartError(Exception):
    """A startup failure reported as one line (exit 1)."""


def config_arguments(prog: str, description: str, what: str) -> argparse.ArgumentParser:
    """The arguments every process main takes: ``-c FILE``, ``-p`` and ``--log-level``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help=f"{what} config file")
    parser.add_argument("-p", "--print", action="store_true", help="print the effective config and exit")
    parser.add_argument(
        "--log-level", default=os.environ.get("MQHA_LOG_LEVEL", "INFO"), help="DEBUG, INFO, WARNING, ERROR"
    )
    return parser


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (a value may carry them)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def exit_with(prog: str, problem: object) -> NoReturn:
    """Print ``problem`` as one line on stderr and exit 1."""
    print(f"{prog}: {one_line(str(problem))}", file=sys.stderr)
    sys.exit(1)


def stop_on_signals(stop: asyncio.Event | None) -> asyncio.Event:
    """``stop``, or a new event that SIGTERM and SIGINT set (call on the running loop)."""
    if stop is not None:
        return stop
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def run(prog: str, log_level: str, serving: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Log to stderr at ``log_level`` and run ``serving()`` to its end; a ``StartError`` exits 1."""
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serving())
    except StartError as exc:
        exit_with(prog, exc)
