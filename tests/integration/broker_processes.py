"""Real ``mqbroker`` processes of one set on 127.0.0.1, for the broker-cluster, mqadmin and metrics tests.

A test picks its settings on top of :data:`BROKER_TEST_SETTINGS` (the local cluster's fast timings,
``mqha.cluster.nodes.BROKER_DEFAULTS``, with small files); every process is started through a
:class:`ProcessGroup` (stopped by pid); every wait is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqha.cluster.nodes import BROKER_DEFAULTS, LocalEndpoint, command_of
from mqha.wire.broker_api import OFFSET_TOO_SMALL
from tests.helpers.processes import ManagedProcess, ProcessGroup, free_port, wait_healthy
from tests.integration.controller_cluster import request

CLUSTER_NAME = "c1"
BROKER_NAME = "bs1"

BROKER_TEST_SETTINGS: dict[str, str] = {
    **BROKER_DEFAULTS,
    "brokerClusterName": CLUSTER_NAME,
    "brokerName": BROKER_NAME,
    "mappedFileSizeCommitLog": str(1024 * 1024),
    "maxMessageSize": str(64 * 1024),
}


def mqbroker_command() -> list[str]:
    return command_of("mqbroker", "mqha.broker")


@dataclass
class Broker(LocalEndpoint):
    """One mqbroker process of a test: its ports, directory, config, process and HTTP calls."""

    name: str
    base: Path
    settings: Mapping[str, str] = field(default_factory=lambda: BROKER_TEST_SETTINGS)
    port: int = field(default_factory=free_port)
    ha_port: int = field(default_factory=free_port)
    proc: ManagedProcess | None = None
    env: Mapping[str, str] | None = None  # added to the process's environment (e.g. a chaos shim)

    def write_config(self, controllers: str) -> Path:
        self.base.mkdir(parents=True, exist_ok=True)
        values = {
            **self.settings,
            "listenPort": str(self.port),
            "haListenPort": str(self.ha_port),
            "controllerAddr": controllers,
            "storePathRootDir": str(self.base / "store"),
        }
        conf = self.base / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        return conf

    def launch(self, group: ProcessGroup, controllers: str) -> None:
        """Start the process; ``wait_healthy`` waits for its API."""
        conf = self.write_config(controllers)
        self.proc = group.start(
            [*mqbroker_command(), "-c", str(conf)],
            log_path=self.base / "broker.log",
            name=f"mqbroker-{self.name}",
            env=self.env,
        )

    def start(self, group: ProcessGroup, controllers: str) -> None:
        self.launch(group, controllers)
        wait_healthy([(self.proc, self.url)])

    def get(self, path: str, timeout: float = 3.0) -> dict[str, Any]:
        status, body = request("GET", self.url + path, timeout=timeout)
        assert status == 200, body
        return body

    def status(self) -> dict[str, Any]:
        return self.get("/v1/status", timeout=2.0)

    def try_status(self) -> dict[str, Any] | None:
        if self.proc is None or not self.proc.is_running() or self.proc.paused:
            return None
        try:
            return self.status()
        except (OSError, AssertionError):
            return None

    def serving_role(self) -> str | None:
        """MASTER or SLAVE once unfenced; None while down, unreachable or fenced."""
        status = self.try_status()
        return None if status is None or status["fenced"] else status["role"]

    def metrics_text(self) -> str:
        status, body = request("GET", self.url + "/metrics", timeout=3.0)
        assert status == 200 and isinstance(body, str), body
        return body

    def put(self, bodies: list[str]) -> tuple[int, dict[str, Any]]:
        payload = {"messages": [{"topic": "orders", "body": b} for b in bodies]}
        return request("POST", self.url + "/v1/messages", payload, timeout=10.0)

    def read_all(self) -> list[tuple[int, str, str]]:
        """Every message this broker serves (up to its confirm offset): (offset, msgId, body)."""
        out, offset = [], 0
        while True:
            code, body = request(
                "GET", f"{self.url}/v1/messages?offset={offset}&maxMessages=1024", timeout=5.0
            )
            assert code == 200, body
            out += [(m["offset"], m["msgId"], m["body"]) for m in body["messages"]]
            moved = body.get("status") == OFFSET_TOO_SMALL and body["nextOffset"] > offset  # retention
            if not body["messages"] and not moved:
                return out
            offset = body["nextOffset"]
