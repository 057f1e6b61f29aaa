"""What one client may hold of mqproxy, so that it cannot starve the rest (docs/architecture.md §13).

Every limit a client can reach answers its call RESOURCE_EXHAUSTED with a message naming the key, at
once (as the size limit does), instead of closing its connection or making it wait:

- connections (``grpcMaxConnections``) and streams per connection
  (``grpcMaxConcurrentCallsPerConnection``) are counted by :class:`OpenCalls` (core) as calls open;
  a connection counts while it has a call open (the official clients always hold a Telemetry call).
  gRPC's own limits, the transport's hard caps, are set at twice these (:func:`grpc_options`), so a
  call past the counted limit reaches mqproxy and can be answered; only past a hard cap does gRPC
  close the connection (UNAVAILABLE) or refuse the stream;
- request size (``grpcMaxInboundMessageSize``): gRPC, before the body is read;
- bytes (``grpcMaxInflightBytesPerConnection``, ``grpcMaxInflightBytes``): :class:`InFlightBytes`
  (core) counts the requests held, from the moment one is received whole until it is answered (a send
  waits for its broker group, up to its deadline through a failover); a request that would pass
  either budget is refused, and nothing of it is kept;
- bytes still arriving: gRPC opens a stream's flow-control window to the whole message once its read
  is asked for, so a peer that announces a large request and stalls holds up to one largest request
  per stream. mqproxy asks for a request's body only once :class:`Arrivals` (core) has counted it at
  the largest size, against budgets of the same sizes as the held bytes', kept apart; before that a
  stream may hold ``ARRIVAL_WINDOW`` (the HTTP/2 initial window). When a budget is short, a request
  that has been arriving for ``ARRIVAL_GRACE_S`` makes room (it is refused); a newer one waits for
  that, at most the grace.

Connections that never finish their handshake are closed after ``HANDSHAKE_TIMEOUT_MS``, and those
with no call for ``IDLE_CONNECTION_MS`` get a GOAWAY, so idle sockets do not hold the hard cap for
ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

HANDSHAKE_TIMEOUT_MS = 20_000
"""A connection must finish TLS and HTTP/2's preface within this (gRPC's default: 120 s)."""
IDLE_CONNECTION_MS = 120_000
"""A connection without a call for this long gets a GOAWAY (RocketMQ proxy's client idle time)."""
PER_CONNECTION = "grpcMaxInflightBytesPerConnection"
PER_PROCESS = "grpcMaxInflightBytes"
CONNECTIONS = "grpcMaxConnections"
STREAMS = "grpcMaxConcurrentCallsPerConnection"
ARRIVAL_WINDOW = 64 * 1024
"""Bytes a stream may send before mqproxy asks for its request (HTTP/2's default initial window)."""
ARRIVAL_GRACE_S = 1.0
"""A request arriving for longer than this gives way to a newer one when a budget is short."""
HARD_CAP_FACTOR = 2
"""gRPC's own connection and stream caps, as multiples of the counted limits."""


def grpc_options(config: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The gRPC server options of the limits gRPC enforces itself."""
    size = config["grpcMaxInboundMessageSize"]
    return [
        ("grpc.max_allowed_incoming_connections", HARD_CAP_FACTOR * config[CONNECTIONS]),
        ("grpc.max_concurrent_streams", HARD_CAP_FACTOR * config[STREAMS]),
        ("grpc.http2.lookahead_bytes", ARRIVAL_WINDOW),
        ("grpc.max_receive_message_length", size),
        ("grpc.max_send_message_length", size),
        ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_MS),
        ("grpc.max_connection_idle_ms", IDLE_CONNECTION_MS),
    ]


@dataclass(frozen=True)
class Refused:
    """Why a request was not admitted: the key of the budget it would pass, and the client's message."""

    limit: str
    message: str


@dataclass
class InFlightBytes:
    """Counts the bytes of requests held, per connection and in all (core: no IO).

    A connection is gRPC's peer string (one per TCP connection). ``per_connection`` is at least the
    largest request, so a connection that holds nothing is refused only when the process is full."""

    per_connection: int
    per_process: int
    total: int = 0
    by_connection: dict[str, int] = field(default_factory=dict)

    def admit(self, connection: str, size: int) -> Refused | None:
        """Count ``size`` bytes as held for ``connection``; or, when that would pass a budget, change
        nothing and say which."""
        held = self.by_connection.get(connection, 0)
        if held + size > self.per_connection:
            return Refused(
                PER_CONNECTION,
                f"this connection holds {held} bytes of requests not yet answered; {size} more would "
                f"pass {PER_CONNECTION}={self.per_connection}: wait for answers and retry",
            )
        if self.total + size > self.per_process:
            return Refused(
                PER_PROCESS,
                f"mqproxy holds {self.total} bytes of requests not yet answered; {size} more would "
                f"pass {PER_PROCESS}={self.per_process}: retry later",
            )
        if size:  # an empty request (a Heartbeat may be) holds nothing
            self.by_connection[connection] = held + size
            self.total += size
        return None

    def release(self, connection: str, size: int) -> None:
        """A request admitted for ``connection`` was answered (or failed)."""
        left = self.by_connection.get(connection, 0) - size
        if left > 0:
            self.by_connection[connection] = left
        else:
            self.by_connection.pop(connection, None)
        self.total -= size


@dataclass
class OpenCalls:
    """The calls open per connection; a connection counts while it has one (core: no IO)."""

    max_connections: int
    per_connection: int
    by_connection: dict[str, int] = field(default_factory=dict)

    def open(self, connection: str) -> Refused | None:
        """Count a new call of ``connection``; or, past a limit, change nothing and say which."""
        calls = self.by_connection.get(connection, 0)
        if calls >= self.per_connection:
            return Refused(
                STREAMS,
                f"this connection has {calls} calls open, {STREAMS}={self.per_connection}: "
                "wait for one to end, or open another connection",
            )
        if not calls and len(self.by_connection) >= self.max_connections:
            return Refused(
                CONNECTIONS,
                f"mqproxy serves {len(self.by_connection)} connections with calls open, "
                f"{CONNECTIONS}={self.max_connections}: retry later or use another proxy",
            )
        self.by_connection[connection] = calls + 1
        return None

    def close(self, connection: str) -> None:
        """A call counted by :meth:`open` ended."""
        left = self.by_connection.get(connection, 0) - 1
        if left > 0:
            self.by_connection[connection] = left
        else:
            self.by_connection.pop(connection, None)


@dataclass(frozen=True)
class Expected:
    """What :meth:`Arrivals.expect` decided.

    ``refused`` (None: counted), the calls it evicted to make room with the budget each made room in
    (their callers refuse them), and, when refused but room will come, how long to wait."""

    refused: Refused | None
    evicted: list[tuple[int, str]]
    retry_in: float | None = None


@dataclass
class Arrivals:
    """Requests whose body is still arriving, each counted at ``largest`` bytes (core: no IO).

    ``budget`` is kept apart from the held bytes' budget; its sizes are theirs. A call evicted here
    is no longer counted: its caller must refuse it and must not call :meth:`arrived` for it."""

    budget: InFlightBytes
    largest: int
    grace: float = ARRIVAL_GRACE_S
    arriving: dict[int, tuple[str, float]] = field(default_factory=dict)  # call -> connection, since

    def expect(self, call: int, connection: str, now: float) -> Expected:
        """Count ``call`` of ``connection`` as arriving from ``now``, evicting requests that have been
        arriving longer than the grace (oldest first) when a budget is short."""
        evicted: list[tuple[int, str]] = []
        while (refused := self.budget.admit(connection, self.largest)) is not None:
            within = connection if refused.limit == PER_CONNECTION else None
            victim = self._oldest(within)
            if victim is None or self.arriving[victim][1] > now - self.grace:
                wait = None if victim is None else self.arriving[victim][1] + self.grace - now
                return Expected(refused, evicted, wait)
            self._forget(victim)
            evicted.append((victim, refused.limit))
        self.arriving[call] = (connection, now)
        return Expected(None, evicted)

    def arrived(self, call: int) -> None:
        """``call``'s body is here (or it ended): it is no longer counted as arriving."""
        if call in self.arriving:
            self._forget(call)

    def _oldest(self, connection: str | None) -> int | None:
        for call, (owner, _) in self.arriving.items():  # in the order they began
            if connection is None or owner == connection:
                return call
        return None

    def _forget(self, call: int) -> None:
        connection, _ = self.arriving.pop(call)
        self.budget.release(connection, self.largest)
