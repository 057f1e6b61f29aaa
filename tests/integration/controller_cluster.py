"""A cluster of real ``mqcontroller`` processes on 127.0.0.1, for the controller tests and benchmark.

Config files, store directories and logs live under a per-test directory; every process is started
through a :class:`ProcessGroup` (stopped by pid); every wait is bounded.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqha.cluster.nodes import LocalEndpoint, command_of, http_json
from mqha.cluster.processes import free_port_pair
from tests.helpers.processes import ManagedProcess, ProcessGroup, wait_healthy, wait_until

RAFT_PORT_OFFSET = 1

# Fast settings for tests: scans every few hundred ms, default Raft timeouts of mqha (0.2-0.4 s).
TEST_SETTINGS: dict[str, str] = {
    "controllerDLegerGroup": "test-group",
    "scanNotActiveBrokerInterval": "200",
    "scanInactiveMasterInterval": "500",
    "brokerSessionPingMills": "500",
}


def mqcontroller_command() -> list[str]:
    return command_of("mqcontroller", "mqha.controller")


def api_port() -> int:
    """A free port whose Raft companion (port + offset) is free too."""
    return free_port_pair()


def request(
    method: str,
    url: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 5.0,
) -> tuple[int, Any]:
    """One HTTP request; returns (status, decoded JSON or text). Non-2xx answers are returned."""
    return http_json(method, url, body, timeout, raw=raw, headers=headers)


@dataclass
class Node(LocalEndpoint):
    """One mqcontroller process of a test cluster: ports, directories, process."""

    index: int
    node_id: str
    port: int
    base: Path
    proc: ManagedProcess | None = None

    @property
    def conf(self) -> Path:
        return self.base / "controller.conf"

    @property
    def store(self) -> Path:
        return self.base / "store"

    @property
    def log_path(self) -> Path:
        return self.base / "controller.log"

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return request(method, self.url + path, body, **kwargs)

    def get(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return self.call("POST", path, body, **kwargs)

    def post_ok(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        """POST that must answer 200; returns the body."""
        status, reply = self.post(path, body, **kwargs)
        assert status == 200, reply
        return reply

    def try_metadata(self) -> dict[str, Any] | None:
        try:
            status, body = self.get("/v1/controller/metadata", timeout=0.5)
        except OSError:
            return None
        return body if status == 200 else None

    def state(self) -> dict[str, Any]:
        status, body = self.get("/v1/controller/status", timeout=2.0)
        assert status == 200, body
        return body

    def running(self) -> bool:
        return self.proc is not None and self.proc.is_running() and not self.proc.paused


@dataclass
class ControllerCluster:
    """Starts, stops and asks a test cluster of mqcontroller processes."""

    group: ProcessGroup
    base_dir: Path
    size: int = 3
    settings: Mapping[str, str] = field(default_factory=dict)
    args: Sequence[str] = ()  # extra mqcontroller arguments, e.g. ("--log-level", "WARNING")
    nodes: list[Node] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = [Node(i, f"n{i}", api_port(), self.base_dir / f"n{i}") for i in range(self.size)]
        for node in self.nodes:
            self.write_config(node)

    @property
    def peers(self) -> str:
        return ";".join(f"{n.node_id}-{n.address}" for n in self.nodes)

    def write_config(self, node: Node, extra: Mapping[str, str] | None = None) -> None:
        node.base.mkdir(parents=True, exist_ok=True)
        values = {
            **TEST_SETTINGS,
            "controllerDLegerPeers": self.peers,
            "controllerDLegerSelfId": node.node_id,
            "controllerStorePath": str(node.store),
            "configStorePath": str(node.base / "controller.properties"),
            "controllerRaftPortOffset": str(RAFT_PORT_OFFSET),
            **self.settings,
            **(extra or {}),
        }
        node.conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def start(self, indexes: Sequence[int] | None = None, timeout: float = 20.0) -> None:
        chosen = [self.nodes[i] for i in (range(self.size) if indexes is None else indexes)]
        for node in chosen:
            node.proc = self.group.start(
                [*mqcontroller_command(), "-c", str(node.conf), *self.args],
                log_path=node.log_path,
                name=f"mqcontroller-{node.node_id}",
            )
        wait_healthy([(node.proc, node.url) for node in chosen], timeout)

    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.running()]

    def leader(self, timeout: float = 5.0, among: Sequence[Node] | None = None) -> Node:
        """The one node whose metadata says isLeader (serving); waits until exactly one does."""

        def find() -> Node | None:
            leaders = [n for n in (among or self.alive()) if (m := n.try_metadata()) and m["isLeader"]]
            return leaders[0] if len(leaders) == 1 else None

        return wait_until(find, timeout, interval=0.01, message="exactly one serving controller leader")

    def followers(self, leader: Node) -> list[Node]:
        return [n for n in self.alive() if n is not leader]

    def states(self, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        return [n.state()["state"] for n in nodes]

    def wait_same_state(self, nodes: Sequence[Node], timeout: float = 5.0) -> dict[str, Any]:
        """Wait until ``nodes`` report identical applied groups (and applied index); returns it."""

        def same() -> dict[str, Any] | None:
            states = self.states(nodes)
            first = states[0]
            if all(s == first for s in states[1:]):
                return first
            return None

        return wait_until(same, timeout, message="identical controller state on nodes")


def groups_of(state: Mapping[str, Any]) -> dict[str, Any]:
    """The broker sets of a ``/v1/controller/status`` state, by name."""
    return {g["brokerName"]: g for g in state["groups"]}


class HeartbeatSender:
    """A thread posting heartbeats of some brokers to every controller every ``interval`` seconds."""

    def __init__(self, cluster: ControllerCluster, interval: float = 0.1) -> None:
        self.cluster = cluster
        self.interval = interval
        self.beats: dict[tuple[str, int], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)

    def set(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.beats[(body["brokerName"], body["brokerId"])] = body

    def drop(self, broker_name: str, broker_id: int) -> None:
        with self._lock:
            self.beats.pop((broker_name, broker_id), None)

    def send_once(self) -> None:
        with self._lock:
            beats = list(self.beats.values())
        for node in self.cluster.alive():
            for body in beats:
                with contextlib.suppress(OSError):
                    request("POST", node.url + "/v1/brokers/heartbeat", body, timeout=0.5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.send_once()
            self._stop.wait(self.interval)

    def __enter__(self) -> HeartbeatSender:
        self.send_once()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def heartbeat(
    broker_name: str,
    broker_id: int,
    *,
    cluster_name: str = "c1",
    epoch: int = 0,
    max_offset: int = 0,
    timeout_ms: int = 1000,
    priority: int | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "clusterName": cluster_name,
        "brokerName": broker_name,
        "brokerAddr": f"127.0.0.1:{10900 + broker_id}",
        "brokerId": broker_id,
        "epoch": epoch,
        "maxOffset": max_offset,
        "confirmOffset": max_offset,
        "heartbeatTimeoutMills": timeout_ms,
    }
    if priority is not None:
        body["electionPriority"] = priority
    return body


def beating_replicas(cluster: ControllerCluster, broker_name: str = "b1", count: int = 3) -> HeartbeatSender:
    """Register ``count`` replicas of ``broker_name`` (ids 1..count) through the leader; returns the
    heartbeat sender (to enter) that keeps them all alive (long heartbeat timeout)."""
    leader = cluster.leader(timeout=5)
    ids = list(range(1, count + 1))
    assert [register_broker(leader, broker_name) for _ in ids] == ids
    beats = HeartbeatSender(cluster, interval=0.15)
    for broker_id in ids:
        beats.set(heartbeat(broker_name, broker_id, timeout_ms=60_000))
    return beats


def register_broker(leader: Node, broker_name: str, cluster_name: str = "c1") -> int:
    """next-id -> apply-id -> register through the HTTP API, as a broker does (docs/reference-behaviour.md
    §9.3)."""
    status, body = leader.get(f"/v1/brokers/next-id?clusterName={cluster_name}&brokerName={broker_name}")
    assert status == 200, body
    broker_id = body["nextBrokerId"]
    address = f"127.0.0.1:{10900 + broker_id}"
    status, body = leader.post(
        "/v1/brokers/apply-id",
        {
            "clusterName": cluster_name,
            "brokerName": broker_name,
            "appliedBrokerId": broker_id,
            "registerCheckCode": f"{address};{time.time_ns() // 1_000_000}",
        },
    )
    assert status == 200, body
    status, body = leader.post(
        "/v1/brokers/register",
        {
            "clusterName": cluster_name,
            "brokerName": broker_name,
            "brokerId": broker_id,
            "brokerAddress": address,
            "haAddress": f"127.0.0.1:{20900 + broker_id}",
        },
    )
    assert status == 200, body
    return broker_id


@contextlib.contextmanager
def running_controllers(directory: Path) -> Iterator[tuple[ProcessGroup, str]]:
    """A started 3-controller cluster with a leader: its process group and the brokers' ``controllerAddr``."""
    with ProcessGroup() as processes:
        controllers = ControllerCluster(processes, directory)
        controllers.start()
        controllers.leader(timeout=10)
        yield processes, ";".join(n.address for n in controllers.nodes)
