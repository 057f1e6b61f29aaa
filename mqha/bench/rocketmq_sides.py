"""The two clusters of ``mqha bench rocketmq`` behind one interface (shell): mqha (``LocalCluster``
with one mqproxy) and Apache RocketMQ (``interop/rocketmq/reference_cluster.py``, a fixture of the
repository checkout, loaded from there). Each answers where its master is through its own metadata
API (mqha: the controllers' ``replica-info``; RocketMQ: the controllers' GET_REPLICA_INFO), faults
that master, restores it, and lists its server processes for the resource figures.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import aiohttp

import mqha
from mqha.client import NoRouteError, RouteResolver
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import BROKER_DEFAULTS, CONTROLLER_DEFAULTS

REPO = Path(mqha.__file__).resolve().parents[1]
KILL, PAUSE = "kill", "pause"
# The timers both sides run with: mqha's local-cluster values under RocketMQ's own key names, so the
# failover figures compare the implementations, not two sets of timeouts (docs/performance.md).
SHARED_BROKER_KEYS = (
    "brokerHeartbeatInterval", "controllerHeartBeatTimeoutMills", "syncBrokerMetadataPeriod",
    "checkSyncStateSetPeriod", "syncControllerMetadataPeriod", "haSendHeartbeatInterval",
    "haHousekeepingInterval", "haMaxTimeSlaveNotCatchup",
)  # fmt: skip
SHARED_CONTROLLER_KEYS = ("scanNotActiveBrokerInterval", "scanInactiveMasterInterval")


def checkout_module(relative: str, name: str) -> ModuleType:
    """A Python file of the repository checkout (``interop/``, ``tests/helpers``), loaded by path:
    they are fixtures beside the ``mqha`` package, never part of it."""
    path = REPO / relative
    if not path.exists():
        raise SystemExit(
            f"mqha bench rocketmq runs from a repository checkout: {path} is missing "
            "(run it from a git clone, after scripts/interop.sh setup)"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Master:
    """A group's master as the side's controllers report it, and the pid serving it."""

    broker_id: int | None
    epoch: int
    in_sync: int
    pid: int | None

    @property
    def present(self) -> bool:
        return self.broker_id is not None and self.broker_id >= 0


class Side(Protocol):
    """What the benchmark asks of a cluster: its proxy, its master, a fault and its repair."""

    name: str
    endpoint: str

    def master(self) -> Master: ...
    def server_pids(self) -> list[int]: ...
    def fault(self, kind: str, master: Master) -> None: ...
    def restore(self, kind: str, master: Master) -> None: ...
    def ready(self) -> bool: ...
    def create_topic(self, topic: str) -> None: ...
    def stop(self) -> None: ...


class MqhaSide:
    """mqha: 3 controllers, one group of 3 replicas (allAckInSyncStateSet), one mqproxy."""

    name = "mqha"

    def __init__(self, base: Path) -> None:
        self.cluster = LocalCluster(base / "mqha", controllers=3, groups=1, replicas=3, proxies=1)
        self.cluster.start(timeout=300)
        self.group = self.cluster.groups[0]
        self.endpoint = self.cluster.proxy_addresses[0]
        self._faulted: str | None = None

    def master(self) -> Master:
        async def ask() -> Any:
            async with aiohttp.ClientSession() as session:
                try:
                    return await RouteResolver(self.cluster.controller_addresses, session).resolve(self.group)
                except NoRouteError:
                    return None

        route = asyncio.run(ask())
        if route is None:
            return Master(None, 0, 0, None)
        node = next(
            (n for n in self.cluster.group_brokers(self.group) if n.address == route.master_address), None
        )
        pid = self.cluster.pid(node) if node is not None else None
        return Master(route.master_broker_id, route.master_epoch, len(route.sync_state_set), pid)

    def server_pids(self) -> list[int]:
        return self.cluster.running_pids()

    def _node(self, master: Master) -> Any:
        return next(n for n in self.cluster.group_brokers(self.group) if self.cluster.pid(n) == master.pid)

    def fault(self, kind: str, master: Master) -> None:
        node = self._node(master)
        self._faulted = node.name
        if kind == KILL:
            self.cluster.kill(node)
        else:
            self.cluster.pause(node)

    def restore(self, kind: str, master: Master) -> None:
        assert self._faulted is not None
        if kind == KILL:
            self.cluster.start_node(self._faulted, timeout=120)
        else:
            self.cluster.resume(self._faulted)

    def ready(self) -> bool:
        return self.cluster.group_ready(self.group)

    def create_topic(self, topic: str) -> None:
        """Nothing to do: mqproxy creates a topic on its first route query (defaultTopicQueueNums)."""

    def stop(self) -> None:
        self.cluster.stop()


class RocketMQSide:
    """Apache RocketMQ: namesrv, 3 DLedger controllers, 3 controller-mode brokers, a cluster-mode proxy."""

    name = "rocketmq"

    def __init__(self, base: Path) -> None:
        self.ref = checkout_module("interop/rocketmq/reference_cluster.py", "mqha_interop_reference_cluster")
        brokers = {key: BROKER_DEFAULTS[key] for key in SHARED_BROKER_KEYS}
        controllers = {key: CONTROLLER_DEFAULTS[key] for key in SHARED_CONTROLLER_KEYS}
        self.layout = self.ref.up(base / "rocketmq", 600, brokers, controllers)
        self.endpoint = self.layout.proxy
        self._faulted: str | None = None

    def master(self) -> Master:
        info = self.ref.replica_info(self.layout, timeout=1.0)
        if info is None:
            return Master(None, 0, 0, None)
        pid = None
        if info.master_address and info.master_id is not None and info.master_id >= 0:
            pid = self.ref.broker_pid(self.layout, info.master_address)[1]
        return Master(info.master_id, info.master_epoch, len(info.sync_state_set), pid)

    def server_pids(self) -> list[int]:
        return [p.pid for p in self.layout.processes if self.ref._alive(p.pid)]

    def fault(self, kind: str, master: Master) -> None:
        assert master.pid is not None
        self._faulted = next(p.name for p in self.layout.processes if p.pid == master.pid)
        os.kill(master.pid, signal.SIGKILL if kind == KILL else signal.SIGSTOP)
        if kind == KILL:
            deadline = time.monotonic() + 10
            while self.ref._alive(master.pid) and time.monotonic() < deadline:
                time.sleep(0.02)  # reaped, so the restart finds it gone

    def restore(self, kind: str, master: Master) -> None:
        assert self._faulted is not None and master.pid is not None
        if kind == KILL:
            self.ref.restart(self.layout, self._faulted)
        else:
            os.kill(master.pid, signal.SIGCONT)

    def ready(self) -> bool:
        info = self.ref.replica_info(self.layout, timeout=1.0)
        alive = all(self.ref._alive(p.pid) for p in self.layout.processes)
        return bool(alive and info is not None and info.ready)

    def create_topic(self, topic: str) -> None:
        self.ref.create_topic(self.layout, topic)

    def stop(self) -> None:
        self.ref.down(self.layout)


def java_client() -> list[str]:
    """The command of the official Java client's driver (``interop/java-client``), built when stale."""
    helper = checkout_module("tests/helpers/rocketmq_client.py", "mqha_interop_rocketmq_client")
    command: list[str] = helper.java_client()
    return command
