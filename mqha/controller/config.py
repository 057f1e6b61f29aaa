"""Controller config keys: RocketMQ's ``ControllerConfig`` names and defaults (docs/reference-behaviour.md
§16.1) plus mqha's own.

``controllerDLegerPeers`` lists each node's API address (``n0-127.0.0.1:9878;n1-...``); the node's Raft
transport listens on API port + ``controllerRaftPortOffset`` (docs/architecture.md §3).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqha.config import REQUIRED, ConfigSpec, Key
from mqha.errors import ConfigError
from mqha.security.credentials import SECRET_KEYS
from mqha.security.keys import AUTHENTICATION_KEYS, TLS_KEYS, check_security_keys

_INT_MAX = 2**31 - 1


def _default_store_path(values: Mapping[str, Any]) -> str:
    return os.path.join(os.path.expanduser("~"), f"{values['controllerType']}Controller")


CONTROLLER_CONFIG = ConfigSpec(
    [
        Key("rocketmqHome", str, os.environ.get("ROCKETMQ_HOME", "")),
        Key("configStorePath", str, os.path.expanduser("~/controller/controller.properties")),
        Key("controllerType", str, "DLedger", "DLedger or jRaft; both run mqha's PySyncObj controller"),
        Key("scanNotActiveBrokerInterval", int, 5000),
        Key("controllerThreadPoolNums", int, 16),
        Key("controllerRequestThreadPoolQueueCapacity", int, 50000),
        Key("controllerDLegerGroup", str, "mqha-controller"),
        Key("controllerDLegerPeers", str, REQUIRED),
        Key("controllerDLegerSelfId", str, REQUIRED),
        Key("mappedFileSize", int, 1024 * 1024 * 1024),
        Key("controllerStorePath", str, _default_store_path),
        Key("electMasterMaxRetryCount", int, 3),
        Key("enableElectUncleanMaster", bool, False),
        Key("processReadEvent", bool, False),
        Key("notifyBrokerRoleChanged", bool, True),
        Key("scanInactiveMasterInterval", int, 5000),
        Key("metricsExporterType", str, "DISABLE"),
        Key("metricsGrpcExporterTarget", str, ""),
        Key("metricsGrpcExporterHeader", str, ""),
        Key("metricGrpcExporterTimeOutInMills", int, 3000),
        Key("metricGrpcExporterIntervalInMills", int, 60000),
        Key("metricLoggingExporterIntervalInMills", int, 10000),
        Key("metricsPromExporterPort", int, 5557),
        Key("metricsPromExporterHost", str, ""),
        Key("metricsLabel", str, ""),
        Key("metricsInDelta", bool, False),
        Key("configBlackList", str, "configBlackList;configStorePath"),
        Key("jRaftElectionTimeoutMs", int, 1000),
        Key("jRaftScanWaitTimeoutMs", int, 1000),
        Key("jRaftSnapshotIntervalSecs", int, 3600),
        Key("jRaftGroupId", str, "jRaft-Controller"),
        Key("jRaftServerId", str, "localhost:9880"),
        Key("jRaftInitConf", str, "localhost:9880,localhost:9881,localhost:9882"),
        Key("jRaftControllerRPCAddr", str, "localhost:9770,localhost:9771,localhost:9772"),
        # mqha's own keys
        Key("controllerRaftPortOffset", int, 1, "Raft transport port = API port + this"),
        Key("controllerRaftPassword", str, "", "encrypts and authenticates Raft traffic when set"),
        *AUTHENTICATION_KEYS,
        *TLS_KEYS,
        Key("controllerRaftMinTimeoutMills", int, 200, "Raft election timeout, lower bound"),
        Key("controllerRaftMaxTimeoutMills", int, 400, "Raft election timeout, upper bound"),
        Key("controllerJournalFsync", bool, True, "fsync the Raft journal before a write is acknowledged"),
        Key("maxRequestBodyBytes", int, 1024 * 1024, "larger HTTP bodies are refused with 413"),
        Key("brokerSessionPingMills", int, 1000, "WebSocket ping period of broker sessions"),
        Key(
            "consoleAnalysisReportDir",
            str,
            "",
            "an mqha analyze report directory whose verdict.json the web console's violations page shows",
        ),
    ]
)

ALWAYS_BLACKLISTED = ("configBlackList", "configStorePath", "rocketmqHome", *sorted(SECRET_KEYS))
"""Never changed through the config API; secrets are neither read nor written there (docs §12)."""


@dataclass(frozen=True)
class Peer:
    """One controller of the cluster: its node id and API host:port (its Raft port follows from them)."""

    node_id: str
    host: str
    port: int

    @property
    def api_address(self) -> str:
        return f"{self.host}:{self.port}"

    def raft_address(self, port_offset: int) -> str:
        return f"{self.host}:{self.port + port_offset}"


def parse_peers(text: str) -> list[Peer]:
    """``n0-127.0.0.1:9878;n1-127.0.0.1:9888`` → peers in the given order."""
    peers = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        node_id, sep, address = item.partition("-")
        host, colon, port = address.rpartition(":")
        if not sep or not node_id or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError("controllerDLegerPeers", f"expected id-host:port, got {item!r}")
        peers.append(Peer(node_id, host, int(port)))
    if not peers:
        raise ConfigError("controllerDLegerPeers", "no peers listed")
    if len({p.node_id for p in peers}) != len(peers):
        raise ConfigError("controllerDLegerPeers", "duplicate node id")
    return peers


def blacklisted_keys(values: Mapping[str, Any]) -> frozenset[str]:
    """Keys that ``updateControllerConfig`` may not change (docs/reference-behaviour.md §5.11)."""
    listed = (k.strip() for k in str(values.get("configBlackList", "")).split(";"))
    return frozenset(ALWAYS_BLACKLISTED) | frozenset(k for k in listed if k)


def load_controller_config(path: str) -> dict[str, Any]:
    """Typed config of one controller node; checks that the self id is among the peers."""
    values = CONTROLLER_CONFIG.load(path)
    peers = parse_peers(values["controllerDLegerPeers"])
    self_id = values["controllerDLegerSelfId"]
    if self_id not in {p.node_id for p in peers}:
        raise ConfigError("controllerDLegerSelfId", f"{self_id!r} is not in controllerDLegerPeers")
    check_security_keys(values, ("innerClientAuthenticationCredentials", "adminAuthToken"))
    if values["controllerRaftPortOffset"] == 0:
        raise ConfigError("controllerRaftPortOffset", "must not be 0: Raft and the API cannot share a port")
    return values
