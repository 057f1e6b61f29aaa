"""``mqbroker -c broker.conf [-p]``: one broker replica (store, HTTP API, HA, ReplicasManager).

- ``-p`` prints the effective config (Java-properties text, secrets masked) and exits 0.
- A config problem prints ONE line naming the key on stderr and exits 1; so does a broker identity
  file (docs/reference-behaviour.md §9.3) that belongs to another cluster or broker name, a store that cannot
  be opened, or a port that cannot be bound.
- Logs go to stderr. SIGTERM / SIGINT only set an event. Start order: store → HA server (port bound,
  refusing slaves until master) → HTTP API → ReplicasManager (registers, then unfences and assigns a
  role through the hooks). Shutdown runs in reverse: stop deciding, close the API, close HA links and
  the client, persist the confirm offset and close the store (docs/architecture.md §11 rule 6).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import sys
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from mqha import process
from mqha.broker.config import load_broker_layers
from mqha.config import render_with_sources
from mqha.errors import ConfigError, StorageError
from mqha.process import StartError
from mqha.replicas_manager import identity as identity_files
from mqha.replicas_manager.actions import GiveUpBrokerId
from mqha.security.credentials import masked

log = logging.getLogger("mqbroker")
PROG = "mqbroker"
PID_FILE = "mqbroker.pid"  # in storePathRootDir while the broker runs
STOP_STEP_TIMEOUT_S = 3.0


def check_identity_files(config: Mapping[str, Any]) -> str | None:
    """docs/reference-behaviour.md §9.3 step 2 and docs/architecture.md §9.4, before anything starts: an
    identity file written for another cluster or broker name means this store belongs to someone else;
    a damaged one, or one written for another store, must not be read as an id. Returns the problem,
    or None."""
    path = config["storePathBrokerIdentity"]
    expected = (config["brokerClusterName"], config["brokerName"])
    try:
        store_id = identity_files.load_store_id(identity_files.store_id_path(config["storePathRootDir"]))
        records = identity_files.read_records(path)
        if records[0] is not None:
            identity_files.check_store(path, records[0], store_id)
    except StorageError as exc:
        return str(exc)
    for candidate, record in zip((path, identity_files.temp_path(path)), records, strict=True):
        if record is not None and (record.cluster_name, record.broker_name) != expected:
            return (
                f"broker identity file {candidate} belongs to cluster '{record.cluster_name}' broker "
                f"'{record.broker_name}' (id {record.broker_id}), but the config says "
                f"brokerClusterName='{expected[0]}' brokerName='{expected[1]}': fix the config or use "
                "another storePathRootDir"
            )
    return None


class Broker:
    """Everything one ``mqbroker`` runs, built from its config; ``start`` and ``stop`` in order."""

    refusal: str | None = None
    """Why the broker stops on its own (one line), if it does."""

    def __init__(
        self, config: dict[str, Any], config_path: str | None = None, stop: asyncio.Event | None = None
    ) -> None:
        """``stop``: set when the broker must stop on its own (another live process holds its id)."""
        from mqha.autoswitch_ha.config import HAConfig
        from mqha.autoswitch_ha.service import AutoSwitchHAService
        from mqha.broker.access import BrokerAccess
        from mqha.broker.disk_guard import DiskGuard
        from mqha.broker.hooks_impl import BrokerRuntime
        from mqha.broker.membership import BrokerSetMembers
        from mqha.broker.metrics import ack_mode
        from mqha.broker.retention_task import RetentionTask
        from mqha.broker.start_report import new_incarnation
        from mqha.broker.store import BrokerStore
        from mqha.history.recorder import BrokerHistory, HistoryRecorder
        from mqha.replicas_manager.client import request_signer
        from mqha.replicas_manager.hooks import BrokerStart
        from mqha.replicas_manager.runner import ReplicasManager
        from mqha.role import BrokerRole
        from mqha.security.tls import client_context
        from mqha.testing.planted_bugs import (
            maybe_plant,
            maybe_plant_access,
            maybe_plant_retention,
            maybe_plant_store,
        )

        self.config = config
        self.config_path = config_path
        self._stop = stop
        self.incarnation = new_incarnation()  # this process's (docs/architecture.md §8.5)
        address = f"{config['brokerIP1']}:{config['listenPort']}"
        ha_address = f"{config['brokerIP1']}:{config['haListenPort']}"
        recorder = None
        try:
            # History (docs/architecture.md §5): epochs, roles and truncations, batched off the event loop.
            recorder = HistoryRecorder.in_store(config["storePathRootDir"])
            # One incarnation per process: the HA client announces it, register and heartbeats report
            # it (the start report), and the controller compares the two (docs/architecture.md §3.2).
            self.store = BrokerStore.open_config(
                config, BrokerHistory(recorder, address, config["brokerName"]), self.incarnation
            )
        except (StorageError, OSError, sqlite3.Error) as exc:
            if recorder is not None:
                recorder.close(STOP_STEP_TIMEOUT_S)
            raise StartError(f"cannot open the store under {config['storePathRootDir']}: {exc}") from None
        self.recorder = recorder
        maybe_plant_store(self.store)  # TEST ONLY, and only when the environment asks (mqha chaos --plant)
        self.role = BrokerRole()  # the one owner of the role facts; the runtime (hooks) writes it
        self.members = BrokerSetMembers(
            config["controllerAddr"].split(";"),
            config["brokerName"],
            signer=request_signer(config),
            ssl=client_context(config),
        )
        self.ha = AutoSwitchHAService(
            self.store,
            self.role,
            HAConfig.from_broker_config({**config, "haListenHost": config["brokerIP1"]}),
            # The ReplicasManager needs the hooks, which need the HA layer: it is reached through
            # this broker (``report_sync_state_set``), built two lines below.
            reporter=self,
            is_known_broker=self.members.is_known,
            incarnation=self.incarnation,
        )
        self.runtime = BrokerRuntime(self.role, self.store, self.ha, address, ha_address)
        report = self.store.start_report
        self.manager = ReplicasManager(
            config,
            self.runtime,
            start=BrokerStart(
                report.incarnation, report.clean_shutdown, report.lossy, report.confirm_offset_before_recovery
            ),
            on_give_up=self._give_up,
        )
        self.ha.client.on_link_closed = self.manager.report_now
        # The test-only seams: a chaos run may plant a bug in the put path or its view of HA (mqha.testing).
        # Full disk and retention (docs/architecture.md §4.2): one DiskGuard holds the disk state (puts
        # refused while FULL, status, metrics); the retention task measures each pass and feeds it.
        self.disk = DiskGuard.from_config(config)
        put_acks = ack_mode(self.ha.gate.policy) if config["historyRecordPutAcks"] else None
        self.access = maybe_plant_access(
            BrokerAccess(self.store, self.role, maybe_plant(self.ha.gate), self.disk, ack_mode=put_acks)
        )
        self.retention = RetentionTask(
            self.store,
            config,
            self.disk,
            readers=self.ha.links.lowest_transfer_offset,
            on_deleted=self.ha.gate.log_changed,
        )
        maybe_plant_retention(self.retention)  # TEST ONLY, and only when the environment asks
        self._build_api(config, config_path)

    def _build_api(self, config: dict[str, Any], config_path: str | None) -> None:
        """The integrity task, the metrics and the HTTP API over the parts ``__init__`` built."""
        from mqha.broker.config_store import BrokerConfigStore
        from mqha.broker.integrity import IntegrityCollector, IntegrityTask
        from mqha.broker.metrics import BrokerMetrics
        from mqha.broker.server import BrokerHttpServer
        from mqha.testing.planted_bugs import maybe_plant_integrity, maybe_plant_master

        # updateBrokerConfig: runtime keys applied here and saved into the -c file (docs/config.md)
        self.config_store = BrokerConfigStore(config, config_path, self.apply_config)
        # The scrub and repair of damaged records (docs/architecture.md §4.7).
        self.integrity = IntegrityTask(
            self.store, config, peers=self.members.repair_sources, on_change=self._damage_changed
        )
        maybe_plant_integrity(self.integrity)  # TEST ONLY, and only when the environment asks
        metrics = BrokerMetrics(config, self.runtime, sessions=self.manager.status.sessions, disk=self.disk)
        metrics.registry.register(IntegrityCollector(config["brokerName"], self.integrity))
        metrics.watch_retention_clock(lambda: self.retention.clock_lag_ms)
        self.http = BrokerHttpServer(
            config,
            self.runtime,
            self.access,
            metrics,
            replicas_status=self.manager.status.document,
            config_store=self.config_store,
            integrity=self.integrity,
        )
        # TEST ONLY, and only when the environment asks (mqha chaos --plant master-needs-controller)
        maybe_plant_master(self.access, self.manager.client, config["controllerHeartBeatTimeoutMills"])

    def _give_up(self, action: GiveUpBrokerId) -> None:
        """Another live process holds this broker's id (docs/architecture.md §3.2): stop, and say what
        to do in the one line the process exits with."""
        conf = self.config_path or "broker.conf"
        self.refusal = (
            f"refused: {action.remark}. If this store ({self.config['storePathRootDir']}) is a copy of "
            f"another replica's, make it a new replica with `mqha store reset-identity -c {conf}`; "
            "otherwise stop the other process first"
        )
        if self._stop is not None:
            self._stop.set()

    def apply_config(self, changes: Mapping[str, Any]) -> None:
        """The runtime keys (``Key.runtime``) a ``PUT /v1/config`` changed, taken at once."""
        if "haMaxTimeSlaveNotCatchup" in changes:
            self.ha.keeper.set_max_time_slave_not_catchup(changes["haMaxTimeSlaveNotCatchup"])
        if "scrubCommitLogBytesPerSecond" in changes:
            self.integrity.set_rate(changes["scrubCommitLogBytesPerSecond"])

    def _damage_changed(self, reason: str | None) -> None:
        """A damaged record is known (``reason``) or none is left: a slave replicates nothing meanwhile,
        and every role heartbeats at once (docs/architecture.md §4.7)."""
        self.ha.client.hold(reason)
        self.manager.report_damage()

    def report_sync_state_set(self, proposed: frozenset[int]) -> None:
        """The HA layer's SyncStateSet proposals go to the ReplicasManager."""
        self.manager.report_sync_state_set(proposed)

    def release_eligible_replicas(self, master_epoch: int) -> None:
        """The HA layer's ELR releases go to the ReplicasManager."""
        self.manager.release_eligible_replicas(master_epoch)

    async def start(self) -> None:
        runtime = self.runtime
        self.retention.start()
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
        self.integrity.start()
        try:
            await self.manager.start()
        # e.g. an identity file of another cluster/broker (docs/reference-behaviour.md §9.3)
        except StorageError as exc:
            raise StartError(str(exc)) from None
        log.info(
            "broker %s/%s serving on %s (HA %s, store %s)",
            self.config["brokerClusterName"],
            self.config["brokerName"],
            runtime.address,
            runtime.ha_address,
            self.config["storePathRootDir"],
        )

    async def stop(self) -> None:
        """Reverse order: stop deciding, close the API, the HA links and client, then the store.
        Each step is bounded, so a peer that hangs (a controller going away at the same time) cannot
        keep the process from closing its store cleanly."""
        await _bounded("stopping the ReplicasManager", self.manager.stop())
        await _bounded("closing the HTTP API", self.http.stop())
        await _bounded("stopping the membership refresh", self.members.stop())
        await _bounded("stopping HA replication", self.ha.stop())
        await _bounded("stopping retention", self.retention.stop())
        await _bounded("stopping the scrub", self.integrity.stop())
        self.store.close(self.ha.gate.confirm_offset())
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


async def serve(
    config: dict[str, Any], stop: asyncio.Event | None = None, config_path: str | None = None
) -> None:
    """Run one broker until ``stop`` is set (by default: until SIGTERM or SIGINT); runtime config
    changes are saved into ``config_path`` (the ``-c`` file)."""
    stop = process.stop_on_signals(stop)
    broker = Broker(config, config_path, stop)
    try:
        await broker.start()
        await stop.wait()
        log.info("broker %s stopping", broker.runtime.address)
    finally:
        await broker.stop()
    if broker.refusal is not None:
        raise StartError(broker.refusal)  # the one line, exit 1


def main(argv: Sequence[str] | None = None) -> None:
    args = process.config_arguments(PROG, "mqha broker replica", "broker").parse_args(argv)
    try:
        config, sources = load_broker_layers(args.config)
    except ConfigError as exc:
        process.exit_with(PROG, exc)
    if args.print:
        # secrets (SECRET_KEYS) as MASK; "# from <file>" / "# from default" before each group
        sys.stdout.write(render_with_sources(masked(config), sources))
        return
    problem = check_identity_files(config)
    if problem is not None:
        process.exit_with(PROG, problem)
    process.run(
        PROG,
        args.log_level,
        lambda: serve(config, config_path=args.config),
        pid_file=os.path.join(config["storePathRootDir"], PID_FILE),
    )


if __name__ == "__main__":
    main()
