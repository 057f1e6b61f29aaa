"""``mqproxy -c proxy.conf [-p] [--log-level L]``: the gRPC v2 proxy in front of mqha (§13 of
docs/architecture.md).

Start: config, the broker-group client, then the gRPC server (bound, or one line and exit 1).
SIGTERM / SIGINT stop it in reverse order: the server first (in-flight calls get a grace period), then
the producers.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from mqha import process
from mqha.config import render_with_sources
from mqha.errors import ConfigError, MissingExtraError
from mqha.proxy.config import load_proxy_layers
from mqha.security.credentials import masked

PROG = "mqproxy"
STOP_GRACE_S = 2.0
log = logging.getLogger("mqha.proxy")


async def serve(config: Mapping[str, Any], stop: asyncio.Event | None = None) -> None:
    import grpc

    from mqha.proxy.brokers import BrokerGroups
    from mqha.proxy.service import MessagingService
    from mqha.proxy.v2 import service_grpc

    stop = process.stop_on_signals(stop)
    groups = BrokerGroups(config)
    await groups.start()
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    try:
        service_grpc.add_MessagingServiceServicer_to_server(MessagingService(config, groups), server)
        address = f"{config['grpcBindAddress']}:{config['grpcServerPort']}"
        try:
            bound = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise process.StartError(f"cannot listen on {address}: {exc}") from None
        if not bound:
            raise process.StartError(f"cannot listen on {address}")
        await server.start()
        log.info("mqproxy serving apache.rocketmq.v2.MessagingService on %s", address)
        await stop.wait()
    finally:
        await server.stop(STOP_GRACE_S)
        await groups.close()


def main(argv: Sequence[str] | None = None) -> None:
    args = process.config_arguments(PROG, "mqha gRPC proxy for RocketMQ 5 clients", "proxy").parse_args(argv)
    try:
        config, sources = load_proxy_layers(args.config)
    except ConfigError as exc:
        process.exit_with(PROG, exc)
    if args.print:
        sys.stdout.write(render_with_sources(masked(config), sources))
        return
    try:
        import mqha.proxy.v2  # noqa: F401  (the extra's one-line error, before logging starts)
    except MissingExtraError as exc:
        process.exit_with(PROG, exc)
    process.run(PROG, args.log_level, lambda: serve(config))


if __name__ == "__main__":
    main()
