"""Controller config keys: RocketMQ's ``ControllerConfig`` names and defaults (docs/reference-behaviour.md
§16.1) plus mqha's own.

``controllerDLegerPeers`` lists each node's API address (``n0-127.0.0.1:9878;n1-...``); the node's Raft
transport listens on API port + ``controllerRaftPortOffset`` (docs/architecture.md §3).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqha import config as rules
from mqha.config import REQUIRED, ConfigSpec, Key, Rule
from mqha.errors import ConfigError
from mqha.security.credentials import SECRET_KEYS
from mqha.security.keys import AUTHENTICATION_KEYS, TLS_KEYS, check_security_keys
from mqha.wire.types import ADDRESS_RULE, is_valid_address

_INT_MAX = 2**31 - 1
ADDRESS = Rule(is_valid_address, ADDRESS_RULE)
ADDRESS_LIST = Rule(
    lambda value: all(is_valid_address(part.strip()) for part in value.split(",")),
    f"a comma-separated list of {ADDRESS_RULE}",
)


def _default_store_path(values: Mapping[str, Any]) -> str:
    return os.path.join(os.path.expanduser("~"), f"{values['controllerType']}Controller")


CONTROLLER_CONFIG = ConfigSpec(
    [
        Key("rocketmqHome", str, os.environ.get("ROCKETMQ_HOME", "")),
        Key(
            "configStorePath", str, os.path.expanduser("~/controller/controller.properties"), rule=rules.TEXT
        ),
        Key(
            "controllerType",
            str,
            "DLedger",
            "DLedger or jRaft; both run mqha's PySyncObj controller",
            choices=("DLedger", "jRaft"),
        ),
        Key("scanNotActiveBrokerInterval", int, 5000, rule=rules.MILLIS),
        Key("controllerThreadPoolNums", int, 16, rule=rules.POSITIVE_INT),
        Key("controllerRequestThreadPoolQueueCapacity", int, 50000, rule=rules.POSITIVE_INT),
        Key("controllerDLegerGroup", str, "mqha-controller", rule=rules.TEXT),
        Key("controllerDLegerPeers", str, REQUIRED),
        Key("controllerDLegerSelfId", str, REQUIRED, rule=rules.TEXT),
        Key("mappedFileSize", int, 1024 * 1024 * 1024, rule=rules.POSITIVE_INT),
        Key("controllerStorePath", str, _default_store_path, rule=rules.TEXT),
        Key("electMasterMaxRetryCount", int, 3, rule=rules.POSITIVE_INT),
        Key("enableElectUncleanMaster", bool, False),
        Key(
            "uncleanRecoveryTimeoutMills",
            int,
            300_000,
            "how long a set without a complete replica waits for one before electing the most advanced "
            "log and declaring the rest lost (docs/architecture.md §3.2); 0 = never wait, -1 = wait until "
            "an operator forces an election",
            rule=rules.Rule(
                lambda value: value == -1 or 0 <= value <= rules.INT64_MAX,
                f"-1 or within [0, {rules.INT64_MAX}]",
                (-1, rules.INT64_MAX),
            ),
        ),
        Key("processReadEvent", bool, False),
        Key("notifyBrokerRoleChanged", bool, True),
        Key("scanInactiveMasterInterval", int, 5000, rule=rules.MILLIS),
        Key("metricsExporterType", str, "DISABLE", choices=("DISABLE", "OTLP_GRPC", "PROM", "LOG")),
        Key("metricsGrpcExporterTarget", str, ""),
        Key("metricsGrpcExporterHeader", str, ""),
        Key("metricGrpcExporterTimeOutInMills", int, 3000, rule=rules.MILLIS),
        Key("metricGrpcExporterIntervalInMills", int, 60000, rule=rules.MILLIS),
        Key("metricLoggingExporterIntervalInMills", int, 10000, rule=rules.MILLIS),
        Key("metricsPromExporterPort", int, 5557, rule=rules.PORT),
        Key("metricsPromExporterHost", str, ""),
        Key("metricsLabel", str, ""),
        Key("metricsInDelta", bool, False),
        Key("configBlackList", str, "configBlackList;configStorePath"),
        Key("jRaftElectionTimeoutMs", int, 1000, rule=rules.MILLIS),
        Key("jRaftScanWaitTimeoutMs", int, 1000, rule=rules.MILLIS),
        Key("jRaftSnapshotIntervalSecs", int, 3600, rule=rules.POSITIVE_INT),
        Key("jRaftGroupId", str, "jRaft-Controller", rule=rules.TEXT),
        Key("jRaftServerId", str, "localhost:9880", rule=ADDRESS),
        Key("jRaftInitConf", str, "localhost:9880,localhost:9881,localhost:9882", rule=ADDRESS_LIST),
        Key("jRaftControllerRPCAddr", str, "localhost:9770,localhost:9771,localhost:9772", rule=ADDRESS_LIST),
        # mqha's own keys
        Key(
            "controllerRaftPortOffset",
            int,
            1,
            "Raft transport port = API port + this",
            rule=rules.between(1, 65534),
        ),
        Key("controllerRaftPassword", str, "", "encrypts and authenticates Raft traffic when set"),
        *AUTHENTICATION_KEYS,
        *TLS_KEYS,
        Key(
            "controllerRaftMinTimeoutMills", int, 200, "Raft election timeout, lower bound", rule=rules.MILLIS
        ),
        Key(
            "controllerRaftMaxTimeoutMills", int, 400, "Raft election timeout, upper bound", rule=rules.MILLIS
        ),
        Key("controllerJournalFsync", bool, True, "fsync the Raft journal before a write is acknowledged"),
        Key(
            "maxRequestBodyBytes",
            int,
            1024 * 1024,
            "larger HTTP bodies are refused with 413",
            rule=rules.POSITIVE_LONG,
        ),
        Key(
            "brokerSessionPingMills",
            int,
            1000,
            "WebSocket ping period of broker sessions",
            rule=rules.NON_NEGATIVE_INT,
        ),
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
        if not sep or not node_id.isprintable() or not node_id.strip() or not is_valid_address(address):
            raise ConfigError("controllerDLegerPeers", f"expected id-host:port (port 1..65535), got {item!r}")
        host, _, port = address.rpartition(":")
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
    offset = values["controllerRaftPortOffset"]
    if any(peer.port + offset > 65535 for peer in peers):
        raise ConfigError("controllerRaftPortOffset", f"a peer's API port + {offset} is beyond 65535")
    return values
