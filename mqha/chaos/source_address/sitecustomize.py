"""TEST ONLY: make this process's loopback connections come from its own address (chaos harness).

A chaos run puts this directory first on ``PYTHONPATH`` of every node and client process and sets
``MQHA_CHAOS_SOURCE_ADDRESS`` (e.g. ``127.0.0.7``): every IPv4 socket that connects to a loopback
address and was not bound first is bound to that address. Listening sockets stay as configured
(127.0.0.1), so nothing else changes -- but packets now say which process sent them, and the kernel's
packet filter can drop exactly the traffic of one link, in one direction (``mqha.chaos.netfilter``).
Python's ``site`` imports this module at start-up; without the variable it does nothing.
"""

from __future__ import annotations

import os
import socket

SOURCE_ENV = "MQHA_CHAOS_SOURCE_ADDRESS"


def _install(source: str) -> None:
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


_source = os.environ.get(SOURCE_ENV)
if _source:
    _install(_source)
