"""In-process broker nodes for HA and broker API tests: real files, real loopback TCP, no controller.

A :class:`Node` is everything ``mqbroker`` builds except the ReplicasManager: the store, the HA
service (server + client), the hooks implementation and optionally the HTTP API. Tests play the
ReplicasManager by calling the hooks themselves (``become_master`` / ``follow``), and
:class:`FakeController` confirms SyncStateSet proposals the way the controller would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqha.autoswitch_ha.config import HAConfig
from mqha.autoswitch_ha.service import AutoSwitchHAService
from mqha.broker.access import BrokerAccess
from mqha.broker.commitlog import MessageDraft
from mqha.broker.commitlog.segment import SPARE_NAME
from mqha.broker.config import BROKER_CONFIG
from mqha.broker.hooks_impl import BrokerRuntime
from mqha.broker.metrics import BrokerMetrics
from mqha.broker.protocol import PutOutcome
from mqha.broker.server import BrokerHttpServer
from mqha.broker.start_report import new_incarnation
from mqha.broker.store import BrokerStore
from mqha.replicas_manager.hooks import MasterInfo
from mqha.role import BrokerRole
from tests.helpers.processes import free_port

SEGMENT = 256 * 1024


def broker_config(root: Path, name: str = "broker-a", **overrides: Any) -> dict[str, Any]:
    listen = free_port()
    values = {
        "brokerName": name,
        "enableControllerMode": "true",
        "controllerAddr": "127.0.0.1:1",
        "storePathRootDir": str(root),
        "listenPort": str(listen),
        "haListenPort": str(free_port()),
        "mappedFileSizeCommitLog": str(SEGMENT),
        "maxMessageSize": str(64 * 1024),
        "haSendHeartbeatInterval": "1000",
    }
    values.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()})
    return BROKER_CONFIG.resolve(values)


@dataclass
class FakeController:
    """Confirms every SyncStateSet proposal of the master after ``delay`` (or not, when ``down``)."""

    delay: float = 0.02
    down: bool = False
    proposals: list[frozenset[int]] = field(default_factory=list)
    epoch: int = 1
    node: Node | None = None

    def report_sync_state_set(self, proposed: frozenset[int]) -> None:
        self.proposals.append(proposed)
        if self.down or self.node is None:
            return
        node = self.node

        def confirm() -> None:
            if node.role.is_master:
                self.epoch += 1
                node.runtime.apply_sync_state_set(proposed, self.epoch)

        asyncio.get_running_loop().call_later(self.delay, confirm)


@dataclass
class Node:
    broker_id: int
    config: dict[str, Any]
    store: BrokerStore
    role: BrokerRole
    ha: AutoSwitchHAService
    runtime: BrokerRuntime
    access: BrokerAccess
    http: BrokerHttpServer | None = None
    controller: FakeController = field(default_factory=FakeController)

    @classmethod
    async def start(
        cls,
        root: Path,
        broker_id: int,
        *,
        http: bool = False,
        is_known_broker: Callable[[int], bool] | None = None,
        **overrides: Any,
    ) -> Node:
        config = broker_config(root, **overrides)
        store = BrokerStore.open_config(config)
        role = BrokerRole()
        controller = FakeController()
        ha = AutoSwitchHAService(
            store,
            role,
            HAConfig.from_broker_config({**config, "haListenHost": "127.0.0.1"}),
            reporter=controller,
            is_known_broker=is_known_broker,
            incarnation=new_incarnation(),  # a fresh one per start, as mqbroker does
        )
        runtime = BrokerRuntime(
            role, store, ha, f"127.0.0.1:{config['listenPort']}", f"127.0.0.1:{config['haListenPort']}"
        )
        access = BrokerAccess(store, role, ha.gate)
        node = cls(broker_id, config, store, role, ha, runtime, access, controller=controller)
        controller.node = node
        await ha.start()
        if http:
            metrics = BrokerMetrics(config, runtime)
            node.http = BrokerHttpServer(config, runtime, access, metrics, host="127.0.0.1")
            await node.http.start()
        runtime.set_broker_controller_id(broker_id)
        return node

    @property
    def ha_address(self) -> str:
        return f"127.0.0.1:{self.ha.server.bound_port}"

    @property
    def url(self) -> str:
        assert self.http is not None
        return f"http://127.0.0.1:{self.http.bound_port}"

    async def become_master(self, epoch: int, sync_state_set: frozenset[int] | None = None) -> bool:
        members = sync_state_set or frozenset({self.broker_id})
        self.controller.epoch += 1
        ok = await self.runtime.change_to_master(epoch, self.controller.epoch, members)
        self.runtime.set_fenced(False)
        return ok

    async def follow(self, master: Node, epoch: int) -> bool:
        info = MasterInfo(master.broker_id, f"127.0.0.1:{master.config['listenPort']}", master.ha_address)
        ok = await self.runtime.change_to_slave(info, epoch)
        self.runtime.set_fenced(False)
        return ok

    async def put(self, count: int = 1, size: int = 1000, topic: str = "t", tag: str = "") -> PutOutcome:
        drafts = [MessageDraft(topic, f"{tag}{i}:".encode() + b"x" * size) for i in range(count)]
        return await self.access.put(drafts)

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        await self.ha.stop()
        self.store.close(self.ha.gate.confirm_offset())

    def segment_bytes(self) -> dict[str, bytes]:
        directory = Path(self.config["storePathCommitLog"])
        return {
            p.name: p.read_bytes()
            for p in sorted(directory.iterdir())
            if p.name not in ("checkpoint", SPARE_NAME)
        }


async def eventually(predicate: Callable[[], Any], timeout: float = 10.0, message: str = "condition") -> Any:
    """Poll ``predicate`` on the event loop until truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not met within {timeout} s")
        await asyncio.sleep(0.01)


def same_log(a: Node, b: Node) -> bool:
    """Byte-identical commit logs up to the shorter one's end (whole files compared when equal)."""
    return a.store.max_offset == b.store.max_offset and a.segment_bytes() == b.segment_bytes()
