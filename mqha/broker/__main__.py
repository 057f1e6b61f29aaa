"""``mqbroker -c broker.conf [-p]``: one broker replica (store, HTTP API, HA, ReplicasManager).

- ``-p`` prints the effective config (Java-properties text) and exits 0.
- A config problem prints ONE line naming the key on stderr and exits 1; so does a broker identity
  file (docs/reference-behaviour.md §9.3) that belongs to another cluster or broker name, a store that cannot
  be opened, or a port that cannot be bound.
- Logs go to stderr. SIGTERM / SIGINT only set an event. Start order: store → HA server (port bound,
  refusing slaves until master) → HTTP API → ReplicasManager (registers, then unfences and assigns a
  role through the hooks). Shutdown runs in reverse: stop deciding, close the API, close HA links and
  the client, persist the confirm offset and close the store (docs/architecture.md §11 rule 6).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from mqha.broker.config import load_broker_config
from mqha.config import render_properties
from mqha.errors import ConfigError, StorageError

log = logging.getLogger("mqbroker")
PROG = "mqbroker"
TEMP_SUFFIX = "-temp"
STOP_STEP_TIMEOUT_S = 3.0


class StartError(Exception):
    """A startup failure reported as one line (exit 1)."""


def check_identity_files(config: Mapping[str, Any]) -> str | None:
    """docs/reference-behaviour.md §9.3 step 2, before anything starts: an identity file written for another
    cluster or broker name means this store belongs to someone else. Returns the problem, or None."""
    path = config["storePathBrokerIdentity"]
    expected = (config["brokerClusterName"], config["brokerName"])
    for candidate, fields in ((path, 3), (path + TEMP_SUFFIX, 4)):
        try:
            with open(candidate, encoding="utf-8") as handle:
                parts = handle.read().strip().split("#")
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"cannot read broker identity file {candidate}: {exc.strerror or exc}"
        if len(parts) != fields or not all(parts):
            continue  # not "loaded" (docs/reference-behaviour.md §9.3): the registration flow rewrites it
        if (parts[0], parts[1]) != expected:
            return (
                f"broker identity file {candidate} belongs to cluster '{parts[0]}' broker '{parts[1]}' "
                f"(id {parts[2]}), but the config says brokerClusterName='{expected[0]}' "
                f"brokerName='{expected[1]}': fix the config or use another storePathRootDir"
            )
    return None


def _make_replicas_manager(config: Mapping[str, Any], hooks: Any) -> Any:
    try:
        from mqha.replicas_manager.runner import ReplicasManager
    except ImportError as exc:  # pragma: no cover - only while the package is incomplete
        raise StartError(f"replicas_manager.runner is not available: {exc}") from None
    return ReplicasManager(config, hooks)


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


def _replicas_status(manager: Any) -> dict[str, Any]:
    """Whatever status the ReplicasManager exposes, as JSON-friendly values."""
    status = getattr(manager, "status", None)
    if callable(status):
        status = status()
    if isinstance(status, Mapping):
        return dict(status)
    out: dict[str, Any] = {}
    for name in ("state", "register_state", "controller_leader_address", "master_epoch", "master_broker_id"):
        if hasattr(manager, name):
            value = getattr(manager, name)
            out[name] = getattr(value, "value", value) if not isinstance(value, int | str | None) else value
    return out


class Broker:
    """Everything one ``mqbroker`` runs, built from its config; ``start`` and ``stop`` in order."""

    def __init__(self, config: dict[str, Any]) -> None:
        from mqha.autoswitch_ha.service import AutoSwitchHAService, HAConfig
        from mqha.broker.hooks_impl import BrokerRuntime
        from mqha.broker.membership import BrokerSetMembers
        from mqha.broker.metrics import BrokerMetrics
        from mqha.broker.server import BrokerHttpServer
        from mqha.broker.store import BrokerStore
        from mqha.history.recorder import BrokerHistory, HistoryRecorder
        from mqha.testing.planted_bugs import maybe_plant

        self.config = config
        try:
            self.store = BrokerStore.open_config(config)
        except (StorageError, OSError) as exc:
            raise StartError(f"cannot open the store under {config['storePathRootDir']}: {exc}") from None
        self.ha = AutoSwitchHAService(
            self.store, HAConfig.from_broker_config({**config, "haListenHost": config["brokerIP1"]})
        )
        # The one test-only seam: a chaos run may plant a bug in the store's view of HA (mqha.testing).
        self.store.gate = maybe_plant(self.ha)
        self.runtime = BrokerRuntime(config, self.store, self.ha)
        # History (docs/architecture.md §5): epochs, roles and truncations, batched off the event loop.
        self.recorder = HistoryRecorder.in_store(config["storePathRootDir"])
        self.store.history = BrokerHistory(self.recorder, self.runtime.address, config["brokerName"])
        self.http = BrokerHttpServer(config, self.runtime, BrokerMetrics(self.runtime))
        self.members = BrokerSetMembers(config["controllerAddr"].split(";"), config["brokerName"])
        # SyncStateSet members are registered by definition; others are checked against the controller.
        members, ha = self.members, self.ha
        ha.is_known_broker = lambda broker_id: broker_id in ha.sync_state_set() or members.is_known(broker_id)
        self.manager: Any = None

    async def start(self) -> None:
        runtime = self.runtime
        try:
            await self.ha.start()
        except OSError as exc:
            raise StartError(
                f"cannot listen on HA port {runtime.ha_address}: {exc.strerror or exc}"
            ) from None
        try:
            await self.http.start()
        except OSError as exc:
            raise StartError(f"cannot listen on {runtime.address}: {exc.strerror or exc}") from None
        self.members.start()
        manager = self.manager = _make_replicas_manager(self.config, runtime)
        self.ha.reporter = manager
        self.http.replicas_status = lambda: _replicas_status(manager)
        try:
            await _maybe_await(manager.start())
        # e.g. an identity file of another cluster/broker (docs/reference-behaviour.md §9.3)
        except StorageError as exc:
            raise StartError(str(exc)) from None
        log.info(
            "broker %s/%s serving on %s (HA %s, store %s)",
            runtime.cluster_name,
            runtime.broker_name,
            runtime.address,
            runtime.ha_address,
            self.config["storePathRootDir"],
        )

    async def stop(self) -> None:
        """Reverse order: stop deciding, close the API, the HA links and client, then the store.
        Each step is bounded, so a peer that hangs (a controller going away at the same time) cannot
        keep the process from closing its store cleanly."""
        if self.manager is not None:
            await _bounded("stopping the ReplicasManager", _maybe_await(self.manager.stop()))
        await _bounded("closing the HTTP API", self.http.stop())
        await _bounded("stopping the membership refresh", self.members.stop())
        await _bounded("stopping HA replication", self.ha.stop())
        self.store.close()
        await asyncio.to_thread(self.recorder.close, STOP_STEP_TIMEOUT_S)
        log.info("broker %s stopped", self.runtime.address)


async def _bounded(what: str, step: Awaitable[Any], timeout_s: float = STOP_STEP_TIMEOUT_S) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            await step
    except TimeoutError:
        log.warning("%s took longer than %.0f s; going on with the shutdown", what, timeout_s)
    except Exception:
        log.exception("%s failed", what)


async def serve(config: dict[str, Any], stop: asyncio.Event | None = None) -> None:
    """Run one broker until ``stop`` is set (by default: until SIGTERM or SIGINT)."""
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    broker = Broker(config)
    try:
        await broker.start()
        await stop.wait()
        log.info("broker %s stopping", broker.runtime.address)
    finally:
        await broker.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description="mqha broker replica")
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="broker config file")
    parser.add_argument("-p", "--print", action="store_true", help="print the effective config and exit")
    parser.add_argument(
        "--log-level", default=os.environ.get("MQHA_LOG_LEVEL", "INFO"), help="DEBUG, INFO, ..."
    )
    args = parser.parse_args(argv)
    try:
        config = load_broker_config(args.config)
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        sys.exit(1)
    if args.print:
        sys.stdout.write(render_properties(config))
        return
    problem = check_identity_files(config)
    if problem is not None:
        print(f"{PROG}: {problem}", file=sys.stderr)
        sys.exit(1)
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
