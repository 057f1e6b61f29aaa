"""``mqproxy -c proxy.conf [-p] [--log-level L]``: the gRPC v2 proxy in front of mqha (§13 of
docs/architecture.md).

Start: config, the broker-group client, then the gRPC server (bound, or one line and exit 1).
SIGTERM / SIGINT stop it in reverse order: the server first (in-flight calls get a grace period), then
the last commit of the consumer offsets, then the producers.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mqha import process
from mqha.affinity import parse_cpu_list, pin_process
from mqha.config import render_with_sources
from mqha.errors import ConfigError, MissingExtraError
from mqha.proxy.config import load_proxy_layers
from mqha.security.credentials import masked

if TYPE_CHECKING:
    from aiohttp import web

PROG = "mqproxy"
STOP_GRACE_S = 2.0
OWN_FILES = 1024
"""Open files the proxy keeps for itself beyond its clients' connections (brokers, controllers, logs)."""
log = logging.getLogger("mqha.proxy")


async def serve(config: Mapping[str, Any], stop: asyncio.Event | None = None) -> None:
    import grpc

    from mqha.proxy.acl_source import AclSource
    from mqha.proxy.brokers import BrokerGroups
    from mqha.proxy.client_auth import GuardedService, client_access
    from mqha.proxy.handlers import add_servicer
    from mqha.proxy.metrics import MetricsInterceptor, ProxyMetrics, exporter_app
    from mqha.proxy.service import MessagingService

    stop = process.stop_on_signals(stop)
    address = f"{config['grpcBindAddress']}:{config['grpcServerPort']}"
    problem = _bind_problem(config["grpcBindAddress"], config["grpcServerPort"])
    if problem is not None:  # gRPC's own failure is a C-core log line plus a vague error
        raise process.StartError(f"cannot listen on {address}: {problem}")
    groups = BrokerGroups(config)
    await groups.start()
    options = _server_options(config)
    # The interceptor only with the exporter on: without it the send path pays nothing.
    metrics = ProxyMetrics() if config["metricsExporterType"] == "PROM" else None
    server = grpc.aio.server(options=options, interceptors=[MetricsInterceptor(metrics)] if metrics else None)
    service = MessagingService(config, groups)
    access = client_access(config, metrics.refused if metrics else None)
    acl_source = None if access is None else AclSource(config, access)
    exporter: web.AppRunner | None = None
    try:
        if metrics is not None:  # /metrics on metricsPromExporterPort (host: the key's, or grpcBindAddress)
            host = config["metricsPromExporterHost"] or config["grpcBindAddress"]
            exporter = await process.start_metrics_listener(
                exporter_app(metrics), host, config["metricsPromExporterPort"]
            )
        if acl_source is not None:  # users and policies from the controllers (§12.11)
            await acl_source.start()
        gate = _gate(config, options, metrics.limit_refused if metrics else None)
        if metrics is not None:
            metrics.watch_in_flight(lambda: gate.in_flight.total)
        guarded = service if access is None else GuardedService(service, access)
        add_servicer(guarded, server, gate)
        _listen(server, address, config)
        await server.start()
        # What exists now (modules, protobuf descriptors, gRPC, the groups' clients) lives as long as
        # the process: kept out of the collector's sight, a full collection under load takes ~8 ms of
        # CPU instead of ~60 ms (measured with gc.callbacks, 16 senders).
        gc.freeze()
        tls = " (TLS)" if config["tlsEnable"] else ""
        log.info("mqproxy serving apache.rocketmq.v2.MessagingService on %s%s", address, tls)
        await stop.wait()
    finally:
        await server.stop(STOP_GRACE_S)
        if acl_source is not None:
            await acl_source.close()
        if exporter is not None:
            await exporter.cleanup()
        await service.close()
        await groups.close()


def _server_options(config: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The gRPC server's options: its limits (``mqha.proxy.limits``, connections fitted to the
    open-files limit) and flow control."""
    from mqha.proxy.limits import HARD_CAP_FACTOR, grpc_options

    connections = _fit_open_files(HARD_CAP_FACTOR * config["grpcMaxConnections"]) // HARD_CAP_FACTOR
    return [
        ("grpc.so_reuseport", 0),
        # No BDP probing: it answers a client's stream of small requests with PINGs the client must
        # acknowledge, an extra write and wake-up on both sides (official Python client, 16 senders:
        # ~0.03 ms of CPU per send on each side). A read mqproxy asks for opens its stream's window
        # to the whole request anyway (mqha.proxy.limits).
        ("grpc.http2.bdp_probe", 0),
        *grpc_options({**config, "grpcMaxConnections": max(1, connections)}),
    ]


def _gate(config: Mapping[str, Any], options: list[tuple[str, int]], on_refused: Any) -> Any:
    """The limits' cores behind one :class:`~mqha.proxy.handlers.Gate` (connections as fitted)."""
    from mqha.proxy.handlers import Gate
    from mqha.proxy.limits import HARD_CAP_FACTOR, Arrivals, InFlightBytes, OpenCalls

    connections = dict(options)["grpc.max_allowed_incoming_connections"] // HARD_CAP_FACTOR
    calls = OpenCalls(connections, config["grpcMaxConcurrentCallsPerConnection"])
    per_connection, per_process = config["grpcMaxInflightBytesPerConnection"], config["grpcMaxInflightBytes"]
    arrivals = Arrivals(InFlightBytes(per_connection, per_process), config["grpcMaxInboundMessageSize"])
    return Gate(calls, arrivals, InFlightBytes(per_connection, per_process), on_refused)


def _listen(server: Any, address: str, config: Mapping[str, Any]) -> None:
    """Bind ``address`` (TLS with ``tlsEnable``), or stop with one line saying why not."""
    try:
        bound = _add_port(server, address, config)
    except RuntimeError as exc:
        raise process.StartError(f"cannot listen on {address}: {exc}") from None
    if not bound:
        raise process.StartError(f"cannot listen on {address}")


def _fit_open_files(connections: int) -> int:
    """Raise the soft open-files limit to fit ``connections`` clients and the proxy's own files and
    broker connections (often 1024 by default), as far as the hard limit allows; the connections
    that fit. Where they do not all fit, gRPC's limit is lowered to what does (with a warning), so
    one more is closed cleanly instead of failing to be accepted for want of a descriptor."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + OWN_FILES
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target >= wanted:
        return connections
    fitting = max(1, target - min(OWN_FILES, target // 4))
    log.warning(
        "open files are limited to %d, fewer than grpcMaxConnections=%d + %d: serving at most %d connections",
        hard,
        connections,
        OWN_FILES,
        fitting,
    )
    return fitting


def _add_port(server: Any, address: str, config: Mapping[str, Any]) -> int:
    """Listen on ``address``: TLS with ``tlsEnable`` (the files were checked at load), else plain."""
    import grpc

    if not config["tlsEnable"]:
        return int(server.add_insecure_port(address))
    with open(config["tls.server.keyPath"], "rb") as key, open(config["tls.server.certPath"], "rb") as cert:
        pair = (key.read(), cert.read())
    # No client certificates: identity is authenticationEnabled's job, as on the HTTP ports (§12.5).
    return int(server.add_secure_port(address, grpc.ssl_server_credentials([pair])))


def _bind_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound right now (as gRPC binds: SO_REUSEADDR), or None."""
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
            return None
    except OSError as exc:
        return exc.strerror or str(exc)
    return "no address"


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
    cpus = parse_cpu_list(config["proxyCpuAffinity"])
    if cpus:  # before gRPC starts its threads, so that they inherit it
        try:
            pin_process(cpus)
        except OSError as exc:
            process.exit_with(PROG, ConfigError("proxyCpuAffinity", exc.strerror or str(exc)))
    process.run(PROG, args.log_level, lambda: serve(config))


if __name__ == "__main__":
    main()
