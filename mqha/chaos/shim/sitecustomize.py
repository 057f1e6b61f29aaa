"""TEST ONLY: per-process faults a chaos run or a test injects into a Python process at start-up.

A run puts this directory first on ``PYTHONPATH`` of a node or client process and sets one or both
variables; Python's ``site`` imports this module at start-up; without them it does nothing.

* ``MQHA_CHAOS_SOURCE_ADDRESS`` (e.g. ``127.0.0.7``): every IPv4 socket that connects to a loopback
  address and was not bound first is bound to that address. Listening sockets stay as configured
  (127.0.0.1), so nothing else changes -- but packets now say which process sent them, and the kernel's
  packet filter can drop exactly the traffic of one link, in one direction (``mqha.chaos.netfilter``).
* ``MQHA_CHAOS_WALL_CLOCK_FILE`` (a path): this process's wall clock runs that file's integer number of
  milliseconds ahead (negative: behind) of the machine's. The file is read again at most every
  ``WALL_CLOCK_REREAD_S``, so writing a new number into it steps the clock of a running process (a
  *jump*); a number there at start-up is a *skew*. Only the wall clock moves: ``time.time``,
  ``time.time_ns`` and ``time.localtime``/``gmtime``/``ctime``/``strftime`` without an explicit time.
  The monotonic clock, sleeps and timeouts, file modification times (the kernel's) and
  ``datetime.now`` (which reads the system clock itself) stay real. libfaketime would move them all,
  and breaks Python's sleeps.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

SOURCE_ENV = "MQHA_CHAOS_SOURCE_ADDRESS"
WALL_CLOCK_ENV = "MQHA_CHAOS_WALL_CLOCK_FILE"
WALL_CLOCK_REREAD_S = 0.05


def _install_source_address(source: str) -> None:
    plain_connect = socket.socket.connect
    plain_connect_ex = socket.socket.connect_ex

    def bind_first(sock: socket.socket, address: object) -> None:
        if sock.family != socket.AF_INET or not isinstance(address, tuple) or not address:
            return
        if not str(address[0]).startswith("127."):
            return
        try:
            if sock.getsockname()[1] == 0:
                sock.bind((source, 0))
        except OSError:
            pass  # already bound, or the address is gone: connect as the process asked

    def connect(self: socket.socket, address: object) -> None:
        bind_first(self, address)
        plain_connect(self, address)  # type: ignore[arg-type]

    def connect_ex(self: socket.socket, address: object) -> int:
        bind_first(self, address)
        return plain_connect_ex(self, address)  # type: ignore[arg-type]

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]


class _WallClockOffset:
    """The offset in ns, read from ``path`` again once ``WALL_CLOCK_REREAD_S`` has passed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset_ns = 0
        self.next_read = 0.0
        self.read()

    def read(self) -> None:
        try:
            with open(self.path, encoding="ascii") as handle:
                self.offset_ns = int(handle.read().strip() or "0") * 1_000_000
        except (OSError, ValueError):
            pass  # absent or half written: keep the last offset
        self.next_read = time.monotonic() + WALL_CLOCK_REREAD_S

    def __call__(self) -> int:
        if time.monotonic() >= self.next_read:
            self.read()
        return self.offset_ns


class _Shifted:
    """Calls ``function`` with the shifted time as the default of its time argument (at ``position``).

    A plain callable object, not a function: ``logging.Formatter.converter = time.localtime`` must not
    turn it into a bound method."""

    def __init__(self, function: Callable[..., Any], default: Callable[[], Any], position: int = 0) -> None:
        self.function, self.default, self.position = function, default, position

    def __call__(self, *args: Any) -> Any:
        if len(args) <= self.position or args[self.position] is None:
            args = (*args[: self.position], self.default())
        return self.function(*args)


class _Now:
    """Reads the shifted wall clock: ``time.time`` (``ns=False``) or ``time.time_ns``."""

    def __init__(self, real_ns: Callable[[], int], offset: _WallClockOffset, *, ns: bool) -> None:
        self.real_ns, self.offset, self.ns = real_ns, offset, ns

    def __call__(self) -> float | int:
        now = self.real_ns() + self.offset()
        return now if self.ns else now / 1e9


def _install_wall_clock(path: str) -> None:
    offset = _WallClockOffset(path)
    now_s = _Now(time.time_ns, offset, ns=False)
    real_localtime = time.localtime
    time.strftime = _Shifted(time.strftime, lambda: real_localtime(now_s()), position=1)  # type: ignore[assignment]
    time.localtime = _Shifted(real_localtime, now_s)  # type: ignore[assignment]
    time.gmtime = _Shifted(time.gmtime, now_s)  # type: ignore[assignment]
    time.ctime = _Shifted(time.ctime, now_s)  # type: ignore[assignment]
    time.time_ns = _Now(time.time_ns, offset, ns=True)  # type: ignore[assignment]
    time.time = now_s  # type: ignore[assignment]


_source = os.environ.get(SOURCE_ENV)
if _source:
    _install_source_address(_source)
_wall_clock_file = os.environ.get(WALL_CLOCK_ENV)
if _wall_clock_file:
    _install_wall_clock(_wall_clock_file)
