"""``mqcontroller -c controller.conf [-p]``: one controller node (HTTP API + PySyncObj Raft member).

- ``-p`` prints the effective config (Java-properties text) and exits 0.
- A config problem prints ONE line naming the key on stderr and exits 1 (no traceback); so does a
  port that cannot be bound.
- Logs go to stderr. SIGTERM / SIGINT only set an event; shutdown then runs in order: stop deciding,
  close the HTTP site and broker sessions, stop the Raft member (docs/architecture.md §3; docs/architecture.md
  §11 rule 6).
- The API listens on this node's address in ``controllerDLegerPeers``; Raft on that port +
  ``controllerRaftPortOffset``; the journal and snapshots live in ``controllerStorePath``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from mqha.config import render_properties
from mqha.controller.config import load_controller_config
from mqha.controller.config_store import check_config
from mqha.controller.raft import RaftStartError
from mqha.controller.service import ControllerService
from mqha.errors import ConfigError

log = logging.getLogger("mqcontroller")
PROG = "mqcontroller"


class StartError(Exception):
    """A startup failure reported as one line (exit 1)."""


async def serve(config: dict[str, Any], stop: asyncio.Event | None = None) -> None:
    """Run one node until ``stop`` is set (by default: until SIGTERM or SIGINT)."""
    from aiohttp import web

    from mqha.controller.http_api import build_app

    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    service = ControllerService(config)
    try:
        await service.start()
    except RaftStartError as exc:
        raise StartError(str(exc)) from None
    except OSError as exc:  # e.g. controllerStorePath cannot be created
        raise StartError(f"config key 'controllerStorePath': {exc}") from None
    runner = web.AppRunner(build_app(service), access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    peer = service.self_peer
    try:
        await web.TCPSite(runner, peer.host, peer.port).start()
    except OSError as exc:
        await runner.cleanup()
        await service.stop()
        raise StartError(f"cannot listen on {peer.api_address}: {exc.strerror or exc}") from None
    log.info(
        "controller %s serving the API on %s (raft %s, store %s)",
        service.node_id,
        peer.api_address,
        peer.raft_address(config["controllerRaftPortOffset"]),
        config["controllerStorePath"],
    )
    try:
        await stop.wait()
        log.info("controller %s stopping", service.node_id)
    finally:
        service.begin_stop()
        await runner.cleanup()
        await service.stop()
        log.info("controller %s stopped", service.node_id)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description="mqha controller node")
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="controller config file")
    parser.add_argument("-p", "--print", action="store_true", help="print the effective config and exit")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    args = parser.parse_args(argv)
    try:
        config = load_controller_config(args.config)
        check_config(config)
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        sys.exit(1)
    if args.print:
        sys.stdout.write(render_properties(config))
        return
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve(config))
    except StartError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
