"""The nodes of a local cluster (``mqha.cluster.local``): their records and addresses, the configs
they start with, a JSON GET of their HTTP APIs and the status table ``mqha cluster status`` prints.
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqha.cluster.processes import LOCALHOST
from mqha.errors import MqhaError
from mqha.table_text import columns

CONTROLLER = "controller"
BROKER = "broker"
PROXY = "proxy"  # mqproxy (docs/architecture.md §13): ``port`` is its gRPC port
DEFAULT_CLUSTER_NAME = "DefaultCluster"

CONTROLLER_DEFAULTS: dict[str, str] = {
    "controllerDLegerGroup": "mqha-local",
    "controllerRaftPortOffset": "1",
    "scanNotActiveBrokerInterval": "500",  # heartbeat-timeout scan (hangs, partitions)
    "scanInactiveMasterInterval": "500",
    "brokerSessionPingMills": "500",  # a crash is seen at once by the session close anyway
}
"""Controller keys of a local cluster: fast scans; everything else as RocketMQ's defaults."""

BROKER_DEFAULTS: dict[str, str] = {
    "brokerIP1": LOCALHOST,
    "enableControllerMode": "true",
    "allAckInSyncStateSet": "true",
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024),  # files are preallocated: keep runs small
    "maxMessageSize": str(1024 * 1024),
    "slaveTimeout": "1500",
    "haSendHeartbeatInterval": "500",
    "haHousekeepingInterval": "5000",
    "haMaxTimeSlaveNotCatchup": "3000",
    "checkSyncStateSetPeriod": "500",
    "syncBrokerMetadataPeriod": "500",
    "syncControllerMetadataPeriod": "1000",
    "brokerHeartbeatInterval": "200",
    "controllerHeartBeatTimeoutMills": "1500",
}
"""Broker keys of a local cluster: sub-second heartbeats, a 1.5 s heartbeat timeout, 4 MiB segments."""


def group_names(count: int) -> list[str]:
    """``broker-a``, ``broker-b``, ... (RocketMQ's sample names)."""
    names = []
    for i in range(count):
        suffix, n = "", i
        while True:
            suffix = chr(ord("a") + n % 26) + suffix
            n = n // 26 - 1
            if n < 0:
                break
        names.append(f"broker-{suffix}")
    return names


def command_of(script: str, module: str) -> list[str]:
    """The installed console script next to this interpreter, else ``python -m module``."""
    path = Path(sys.executable).with_name(script)
    return [str(path)] if path.exists() else [sys.executable, "-m", module]


def http_json(
    method: str,
    url: str,
    body: Any = None,
    timeout: float = 5.0,
    *,
    raw: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    """One HTTP request with an optional JSON body (or ``raw`` bytes): (status, decoded JSON, or the
    text when the body is not JSON, or None when empty). Non-2xx answers are returned; connection
    errors raise ``OSError``. An https ``url`` is verified by ``context`` (docs/architecture.md §12.5)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, payload = err.code, err.read()
    try:
        return status, json.loads(payload) if payload else None
    except ValueError:
        return status, payload.decode(errors="replace")


def http_get(url: str, timeout: float = 1.0) -> tuple[int, Any]:
    """GET a JSON document; (status, body, None when not JSON). Connection errors raise."""
    status, body = http_json("GET", url, timeout=timeout)
    return status, None if isinstance(body, str) else body


class LocalEndpoint:
    """Names where a process on 127.0.0.1 answers HTTP: ``address`` and ``url`` from its ``port``."""

    port: int

    @property
    def address(self) -> str:
        return f"{LOCALHOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


@dataclass
class Node(LocalEndpoint):
    """One process of the cluster, as recorded in ``mqha.cluster.json``."""

    name: str
    kind: str  # CONTROLLER | BROKER | PROXY
    port: int
    base: str  # its directory: config, log, store
    group: str | None = None  # brokers: brokerName
    pid: int | None = None
    start_time: int | None = None  # /proc start time of pid: guards against pid reuse

    @property
    def ha_address(self) -> str | None:
        return f"{LOCALHOST}:{self.port + 1}" if self.kind == BROKER else None

    @property
    def conf(self) -> Path:
        return Path(self.base) / f"{self.kind}.conf"

    @property
    def log(self) -> Path:
        return Path(self.base) / f"{self.kind}.log"

    @property
    def store(self) -> Path:
        return Path(self.base) / "store"


@dataclass(frozen=True)
class NodeStatus:
    """What ``status`` shows for one node (absent values are None)."""

    name: str
    kind: str
    address: str
    pid: int | None
    state: str  # running | paused | down
    role: str  # LEADER / FOLLOWER for controllers, MASTER / SLAVE for brokers, "-" when unknown
    group: str | None = None
    broker_id: int | None = None
    master_epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    sync_state_set: tuple[int, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


class ClusterError(MqhaError, RuntimeError):
    """The cluster did not reach the asked state within its bound (the message says which)."""


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return "{" + ",".join(str(v) for v in value) + "}"
    return str(value)


def format_status_table(statuses: Sequence[NodeStatus]) -> str:
    # CTRL_ID: the controller's broker id, the ids SYNC_STATE_SET lists (clusterList's #BID shows the
    # master as 0; docs/architecture.md §6).
    header = ("NODE", "ROLE", "CTRL_ID", "EPOCH", "MAX_OFFSET", "CONFIRM", "SYNC_STATE_SET", "ADDRESS", "PID")
    rows = [header]
    for s in statuses:
        role = s.role if s.state == "running" else s.state.upper()
        rows.append(
            (
                s.name,
                role,
                _cell(s.broker_id),
                _cell(s.master_epoch),
                _cell(s.max_offset),
                _cell(s.confirm_offset),
                _cell(s.sync_state_set),
                s.address,
                _cell(s.pid),
            )
        )
    return "\n".join(columns(rows))
