"""``mqcontroller -c controller.conf [-p]``: one controller node (HTTP API + PySyncObj Raft member).

- ``-p`` prints the effective config (Java-properties text, secrets masked, ``# from <file>`` or
  ``# from default`` before each group of keys) and exits 0.
- The config is the ``-c`` file, then the keys ``updateControllerConfig`` saved in ``configStorePath``.
- A config problem prints ONE line naming the key on stderr and exits 1 (no traceback); so does a
  port that cannot be bound.
- Logs go to stderr. SIGTERM / SIGINT only set an event; shutdown then runs in order: stop deciding,
  close the HTTP site and broker sessions, stop the Raft member (docs/architecture.md §3; docs/architecture.md
  §11 rule 6).
- The API listens on this node's address in ``controllerDLegerPeers``; Raft on that port +
  ``controllerRaftPortOffset``; the journal and snapshots live in ``controllerStorePath``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from mqha import process
from mqha.config import render_with_sources
from mqha.controller.config import load_controller_layers
from mqha.controller.config_store import check_config
from mqha.controller.raft import RaftStartError
from mqha.controller.raft.identity import IdentityError
from mqha.controller.service import ControllerService
from mqha.errors import ConfigError
from mqha.process import StartError
from mqha.security.credentials import masked
from mqha.security.http_limits import LimitedSite, runner_args
from mqha.security.tls import server_context

log = logging.getLogger("mqcontroller")
PROG = "mqcontroller"
PID_FILE = "mqcontroller.pid"  # in controllerStorePath while the node runs


async def serve(config: dict[str, Any], stop: asyncio.Event | None = None) -> None:
    """Run one node until ``stop`` is set (by default: until SIGTERM or SIGINT).

    The API serves first, so that peers can ask this node about its store while it decides its role
    (docs/raft.md §10); until the Raft member runs, every route but the storage read answers 503.
    An observer that was added to the voter set stops here and asks :func:`main` to start it again.
    """
    from aiohttp import web

    from mqha.controller.http_api import build_app, build_metrics_app

    stop = process.stop_on_signals(stop)

    def restart() -> None:
        _restart_wanted.set()
        stop.set()

    try:
        service = ControllerService(config, on_restart_wanted=restart)
    except IdentityError as exc:
        raise StartError(f"config key 'controllerStorePath': {exc}") from None
    except OSError as exc:  # e.g. controllerStorePath cannot be created
        raise StartError(f"config key 'controllerStorePath': {exc}") from None
    from mqha.controller.apply import apply
    from mqha.controller.operations import handle_alter_sync_state_set
    from mqha.testing.planted_bugs import maybe_plant_controller

    # TEST ONLY, and only when the environment asks (mqha chaos --plant)
    maybe_plant_controller(service, handle_alter_sync_state_set, apply)
    runner = web.AppRunner(
        build_app(service), access_log=None, shutdown_timeout=2.0, **runner_args(config, linger_s=0)
    )
    await runner.setup()
    peer = service.self_peer
    try:
        await _api_site(runner, service, config).start()
    except OSError as exc:
        await runner.cleanup()
        raise StartError(f"cannot listen on {peer.api_address}: {exc.strerror or exc}") from None
    runners = [runner]
    if config["metricsExporterType"] == "PROM":
        # RocketMQ's Prometheus exporter port, mapped to the same /metrics text (docs/config.md)
        host = config["metricsPromExporterHost"] or peer.host
        try:
            prom = await process.start_metrics_listener(
                build_metrics_app(service), host, config["metricsPromExporterPort"]
            )
        except StartError:
            await runner.cleanup()
            raise
        runners.append(prom)
    try:
        if not await _start_unless_stopped(service, stop):
            return
        log.info(
            "controller %s serving the API on %s (raft %s as a %s, store %s)",
            service.node_id,
            peer.api_address,
            service.parts.log.self_id,
            service.parts.identity.role,
            config["controllerStorePath"],
        )
        await stop.wait()
        log.info("controller %s stopping", service.node_id)
    finally:
        service.begin_stop()
        for each in reversed(runners):
            await each.cleanup()
        await service.stop()
        log.info("controller %s stopped", service.node_id)


def _api_site(runner: Any, service: ControllerService, config: dict[str, Any]) -> LimitedSite:
    """The API's site: this node's address in ``controllerDLegerPeers``, with the HTTP limits (§12.10)."""
    peer = service.self_peer
    return LimitedSite(
        runner,
        peer.host,
        peer.port,
        max_connections=config["httpMaxConnections"],
        stats=service.connections,
        ssl_context=server_context(config),
    )


async def _start_unless_stopped(service: ControllerService, stop: asyncio.Event) -> bool:
    """Start the service; False when ``stop`` came first (a pending store may wait for its peers)."""
    starting = asyncio.ensure_future(service.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        return False
    try:
        starting.result()
    except RaftStartError as exc:
        raise StartError(str(exc)) from None
    except OSError as exc:
        raise StartError(f"config key 'controllerStorePath': {exc}") from None
    return True


_restart_wanted = threading.Event()


def main(argv: Sequence[str] | None = None) -> None:
    args = process.config_arguments(PROG, "mqha controller node", "controller").parse_args(argv)
    try:
        config, sources = load_controller_layers(args.config)
        check_config(config)
    except ConfigError as exc:
        process.exit_with(PROG, exc)
    if args.print:
        # secrets (SECRET_KEYS) as MASK; "# from <file>" before the keys each file set
        sys.stdout.write(render_with_sources(masked(config), sources))
        return
    pid_file = os.path.join(config["controllerStorePath"], PID_FILE)
    process.run(PROG, args.log_level, lambda: serve(config), pid_file=pid_file)
    if _restart_wanted.is_set():
        # Same pid, same arguments: the store now says "voter" (docs/raft.md §10).
        os.execv(
            sys.executable,
            [sys.executable, "-m", "mqha.controller", *(sys.argv[1:] if argv is None else argv)],
        )


if __name__ == "__main__":
    main()
