"""What one client may hold of mqproxy, so that it cannot starve the rest (docs/architecture.md §13).

gRPC enforces three limits itself, from :func:`grpc_options`:

- connections per process (``grpcMaxConnections``): one more is closed as soon as it is accepted
  (its client sees UNAVAILABLE: a refused connection has no stream to carry a status);
- streams per connection (``grpcMaxConcurrentCallsPerConnection``, HTTP/2's MAX_CONCURRENT_STREAMS,
  as RocketMQ's proxy sets it): a gRPC client queues its further calls until one ends, so it slows
  only itself; a peer that ignores the setting gets its stream refused;
- request size (``grpcMaxInboundMessageSize``): RESOURCE_EXHAUSTED before the body is read.

Connections that never finish their handshake are closed after ``HANDSHAKE_TIMEOUT_MS``, and those
with no call for ``IDLE_CONNECTION_MS`` get a GOAWAY, so idle sockets do not hold the connection
limit for ever (the official clients always hold a Telemetry call, so they are never idle).

The fourth is :class:`InFlightBytes` (core): the bytes of the requests the proxy holds, from the
moment one is received whole until it is answered (a send waits for its broker group, up to its
deadline through a failover), per connection and per process. A request that would pass either
budget is refused with RESOURCE_EXHAUSTED at once, and nothing of it is kept.
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


def grpc_options(config: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The gRPC server options of the limits gRPC enforces itself."""
    size = config["grpcMaxInboundMessageSize"]
    return [
        ("grpc.max_allowed_incoming_connections", config["grpcMaxConnections"]),
        ("grpc.max_concurrent_streams", config["grpcMaxConcurrentCallsPerConnection"]),
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
