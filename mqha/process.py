"""Process mains: the start-up and shutdown contract the mains share (kernel).

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
from typing import TYPE_CHECKING, Any, NoReturn

from mqha.errors import MqhaError

if TYPE_CHECKING:
    from aiohttp import web


PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
"""The Content-Type of every ``/metrics`` answer: the format ``prometheus_client.generate_latest``
writes (prometheus_client names it only in versions newer than pyproject.toml's floor)."""


class StartError(MqhaError):
    """A startup failure reported as one line (exit 1)."""


def metrics_response(body: bytes) -> web.Response:
    """A ``/metrics`` answer: ``body``, a registry's Prometheus text."""
    from aiohttp import web

    return web.Response(body=body, headers={"Content-Type": PROMETHEUS_TEXT})


async def start_metrics_listener(app: web.Application, host: str, port: int) -> web.AppRunner:
    """RocketMQ's Prometheus exporter port (``metricsExporterType=PROM``): ``app`` served on
    ``host:port``; a port it cannot bind is a ``StartError`` naming ``metricsPromExporterPort``."""
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise StartError(
            f"config key 'metricsPromExporterPort': cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    return runner


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


PRIVATE_UMASK = 0o077  # data and secret files 0600, their directories 0700


def run(
    prog: str,
    log_level: str,
    serving: Callable[[], Coroutine[Any, Any, None]],
    pid_file: str | None = None,
) -> None:
    """Log to stderr at ``log_level`` and run ``serving()`` to its end; a ``StartError`` exits 1.

    The process's umask becomes 077 first: everything it creates (stores, segments, checkpoints,
    identity files, SQLite and Raft files written by their libraries, configs, pid files) is owner-only,
    0600 files and 0700 directories (docs/architecture.md §12.9).

    ``pid_file``: this process's pid is written there while it runs (``mqha cluster status`` finds a
    node restarted by hand through it) and removed at the end when it still names this process."""
    os.umask(PRIVATE_UMASK)
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if pid_file is not None:
        _write_pid_file(pid_file)
    try:
        asyncio.run(serving())
    except StartError as exc:
        _remove_pid_file(pid_file)
        exit_with(prog, exc)
    _remove_pid_file(pid_file)


def _write_pid_file(path: str) -> None:
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="ascii") as handle:
            handle.write(f"{os.getpid()}\n")
    except OSError as exc:  # a store that cannot be written fails on its own, with its own line
        logging.getLogger(__name__).debug("cannot write pid file %s: %s", path, exc)


def _remove_pid_file(path: str | None) -> None:
    if path is None:
        return
    try:
        with open(path, encoding="ascii") as handle:
            if handle.read().strip() != str(os.getpid()):
                return  # another process of the same store wrote it since
        os.unlink(path)
    except OSError:
        pass
