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
from mqha.config import REQUIRED, ConfigSpec, Key, Rule, is_unspecified_host, read_given, refused
from mqha.errors import ConfigError
from mqha.exporter_keys import exporter_keys
from mqha.security.credentials import SECRET_KEYS
from mqha.security.http_limits import HTTP_LIMIT_KEYS
from mqha.security.keys import AUTHENTICATION_KEYS, TLS_KEYS, check_security_keys
from mqha.wire.types import ADDRESS_RULE, is_valid_address

_INT_MAX = 2**31 - 1
ADDRESS = Rule(is_valid_address, ADDRESS_RULE)
ADDRESS_LIST = Rule(
    lambda value: all(is_valid_address(part.strip()) for part in value.split(",")),
    f"a comma-separated list of {ADDRESS_RULE}",
)
OPTIONAL_ADDRESS_LIST = Rule(
    lambda value: not value.strip() or ADDRESS_LIST.test(value),
    f"empty, or a comma-separated list of {ADDRESS_RULE}",
)


def _default_store_path(values: Mapping[str, Any]) -> str:
    return os.path.join(os.path.expanduser("~"), f"{values['controllerType']}Controller")


_METRICS_INSTEAD = (
    "metrics are Prometheus text on /metrics of the API port; metricsExporterType=PROM adds a /metrics "
    "listener on metricsPromExporterPort"
)
_JRAFT_INSTEAD = (
    "mqha's controller runs its own Raft: set controllerDLegerPeers, controllerDLegerSelfId and the "
    "controllerRaft* keys (docs/raft.md)"
)
_NO_POOLS = "the controller serves on one asyncio event loop: there is no pool to size"

CONTROLLER_CONFIG = ConfigSpec(
    [
        Key(
            "rocketmqHome",
            str,
            os.environ.get("ROCKETMQ_HOME", ""),
            "RocketMQ's installation directory",
            support=refused("mqha needs no installation directory: remove rocketmqHome"),
            default_text="$ROCKETMQ_HOME",
        ),
        Key(
            "configStorePath",
            str,
            os.path.expanduser("~/controller/controller.properties"),
            "where updateControllerConfig persists changes",
            rule=rules.TEXT,
            deviation="holds only the changed keys; read at every start over the -c file, so a change "
            "survives a restart (mqcontroller -p names the source of each value)",
            default_text="~/controller/controller.properties",
        ),
        Key(
            "controllerType",
            str,
            "DLedger",
            "the controller's consensus library: DLedger or jRaft",
            choices=("DLedger", "jRaft"),
            support=refused(_JRAFT_INSTEAD),
            deviation="DLedger names mqha's PySyncObj Raft; jRaft is refused",
        ),
        Key(
            "scanNotActiveBrokerInterval",
            int,
            5000,
            "period of the scan for brokers whose heartbeats stopped",
            rule=rules.MILLIS,
            runtime=True,
        ),
        Key(
            "controllerThreadPoolNums",
            int,
            16,
            "threads handling controller requests",
            rule=rules.POSITIVE_INT,
            support=refused(_NO_POOLS),
        ),
        Key(
            "controllerRequestThreadPoolQueueCapacity",
            int,
            50000,
            "queue length of the request thread pool",
            rule=rules.POSITIVE_INT,
            support=refused(_NO_POOLS),
        ),
        Key(
            "controllerDLegerGroup",
            str,
            "mqha-controller",
            "name of the Raft group",
            rule=rules.TEXT,
            deviation="shown in the status views only",
        ),
        Key(
            "controllerDLegerPeers",
            str,
            REQUIRED,
            "every controller: id-host:port;id-host:port",
            deviation="host:port is each node's HTTP API address; Raft listens on port + "
            "controllerRaftPortOffset",
        ),
        Key(
            "controllerDLegerSelfId",
            str,
            REQUIRED,
            "this node's id in controllerDLegerPeers",
            rule=rules.TEXT,
        ),
        Key(
            "mappedFileSize",
            int,
            1024 * 1024 * 1024,
            "segment size of DLedger's log",
            rule=rules.POSITIVE_INT,
            unit="bytes",
            support=refused("the Raft journal is compacted into snapshots by entry count (docs/raft.md)"),
        ),
        Key(
            "controllerStorePath",
            str,
            _default_store_path,
            "the controller's store directory",
            rule=rules.TEXT,
            default_text="~/<controllerType>Controller",
        ),
        Key(
            "electMasterMaxRetryCount",
            int,
            3,
            "attempts of a controller-triggered election",
            rule=rules.POSITIVE_INT,
            runtime=True,
        ),
        Key(
            "enableElectUncleanMaster",
            bool,
            False,
            "a replica outside the SyncStateSet may be elected when none in it is alive",
            runtime=True,
        ),
        Key(
            "uncleanRecoveryTimeoutMills",
            int,
            300_000,
            "how long a set whose alive replicas all lack acknowledged messages waits for one that holds "
            "them; then the most advanced log is elected and the rest declared lost (docs/architecture.md "
            "§3.2). 0: never wait; -1: wait until an operator forces an election",
            rule=rules.Rule(
                lambda value: value == -1 or 0 <= value <= rules.INT64_MAX,
                f"-1 or within [0, {rules.INT64_MAX}]",
                (-1, rules.INT64_MAX),
            ),
            runtime=True,
            unit="ms",
            rocketmq=False,
        ),
        Key(
            "processReadEvent",
            bool,
            False,
            "reads go through the Raft log",
            runtime=True,
            deviation="reads are answered by the serving leader only either way (docs/architecture.md §7)",
        ),
        Key(
            "notifyBrokerRoleChanged",
            bool,
            True,
            "push role changes to the brokers of the set",
            runtime=True,
        ),
        Key(
            "scanInactiveMasterInterval",
            int,
            5000,
            "period of the scan for sets whose master is not alive",
            rule=rules.MILLIS,
            runtime=True,
        ),
        *exporter_keys(
            _METRICS_INSTEAD,
            "/metrics on the API port is always on; OTLP_GRPC and LOG are refused",
            "the host of this node's API address",
        ),
        Key("configBlackList", str, "configBlackList;configStorePath", "keys updateControllerConfig refuses"),
        Key(
            "jRaftElectionTimeoutMs",
            int,
            1000,
            "JRaft election timeout",
            rule=rules.MILLIS,
            support=refused(_JRAFT_INSTEAD),
        ),
        Key(
            "jRaftScanWaitTimeoutMs",
            int,
            1000,
            "JRaft scan wait",
            rule=rules.MILLIS,
            support=refused(_JRAFT_INSTEAD),
        ),
        Key(
            "jRaftSnapshotIntervalSecs",
            int,
            3600,
            "JRaft snapshot period",
            rule=rules.POSITIVE_INT,
            unit="s",
            support=refused(_JRAFT_INSTEAD),
        ),
        Key(
            "jRaftGroupId",
            str,
            "jRaft-Controller",
            "JRaft group id",
            rule=rules.TEXT,
            support=refused(_JRAFT_INSTEAD),
        ),
        Key(
            "jRaftServerId",
            str,
            "localhost:9880",
            "this node's JRaft address",
            rule=ADDRESS,
            support=refused(_JRAFT_INSTEAD),
        ),
        Key(
            "jRaftInitConf",
            str,
            "localhost:9880,localhost:9881,localhost:9882",
            "JRaft members",
            rule=ADDRESS_LIST,
            support=refused(_JRAFT_INSTEAD),
        ),
        Key(
            "jRaftControllerRPCAddr",
            str,
            "localhost:9770,localhost:9771,localhost:9772",
            "controllers' RPC addresses under JRaft",
            rule=ADDRESS_LIST,
            support=refused(_JRAFT_INSTEAD),
        ),
        # mqha's own keys
        Key(
            "controllerRaftPortOffset",
            int,
            1,
            "Raft transport port = API port + this",
            rule=rules.between(1, 65534),
            rocketmq=False,
        ),
        Key(
            "controllerRaftPassword",
            str,
            "",
            "encrypts and authenticates Raft traffic when set",
            rocketmq=False,
        ),
        *AUTHENTICATION_KEYS,
        *TLS_KEYS,
        Key(
            "controllerRaftMinTimeoutMills",
            int,
            200,
            "Raft election timeout, lower bound",
            rule=rules.MILLIS,
            rocketmq=False,
        ),
        Key(
            "controllerRaftMaxTimeoutMills",
            int,
            400,
            "Raft election timeout, upper bound",
            rule=rules.MILLIS,
            rocketmq=False,
        ),
        Key(
            "controllerRaftMaxPendingConnections",
            int,
            64,
            "incoming Raft connections not yet named held at once; more are closed at once",
            rule=rules.POSITIVE_INT,
            rocketmq=False,
        ),
        Key(
            "controllerStateDigestIntervalMills",
            int,
            10_000,
            "the Raft leader proposes its state's digest this often; a member that differs stops (0: never)",
            rule=rules.NON_NEGATIVE_INT,
            unit="ms",
            rocketmq=False,
        ),
        Key(
            "controllerJournalFsync",
            bool,
            True,
            "fsync the Raft journal before a write is acknowledged",
            rocketmq=False,
        ),
        Key(
            "maxRequestBodyBytes",
            int,
            1024 * 1024,
            "larger HTTP bodies are refused with 413",
            rule=rules.POSITIVE_LONG,
            unit="bytes",
            runtime=True,
            rocketmq=False,
        ),
        *HTTP_LIMIT_KEYS,
        Key(
            "consoleMaxStreams",
            int,
            64,
            "web console event streams served at once; more get 503 (code 2 SYSTEM_BUSY)",
            rule=rules.POSITIVE_INT,
            rocketmq=False,
        ),
        Key(
            "controllerNodeAliases",
            str,
            "",
            "other host:port addresses brokers reach this node by (a port forward or NAT); a signature "
            "made for one of them counts as made for this node",
            rule=OPTIONAL_ADDRESS_LIST,
            rocketmq=False,
        ),
        Key(
            "controllerSignatureStallMills",
            int,
            10_000,
            "when broker signatures are refused for their timestamps this long and none passes, the "
            "node reports unhealthy, alarms and, leading, hands leadership over (its clock is off)",
            rule=rules.MILLIS,
            rocketmq=False,
        ),
        Key(
            "brokerSessionPingMills",
            int,
            1000,
            "WebSocket ping period of broker sessions",
            rule=rules.NON_NEGATIVE_INT,
            unit="ms",
            runtime=True,
            rocketmq=False,
        ),
        Key(
            "consoleAnalysisReportDir",
            str,
            "",
            "an mqha analyze report directory whose verdict.json the web console's violations page shows",
            runtime=True,
            rocketmq=False,
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


def config_files(path: str) -> list[str]:
    """The files a controller reads at start: its ``-c`` file, then ``configStorePath`` when that is
    another file and exists (the keys ``updateControllerConfig`` changed, which win)."""
    given = read_given(path)
    store = CONTROLLER_CONFIG.keys["configStorePath"].default
    if "configStorePath" in given:
        store = CONTROLLER_CONFIG.coerce("configStorePath", given["configStorePath"])
    if os.path.exists(store) and os.path.realpath(store) != os.path.realpath(path):
        return [path, store]
    return [path]


def load_controller_config(path: str) -> dict[str, Any]:
    """Typed config of one controller node; checks that the self id is among the peers."""
    return load_controller_layers(path)[0]


def load_controller_layers(path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``load_controller_config`` and where each value came from (``mqcontroller -p``)."""
    values, sources = CONTROLLER_CONFIG.load_layers(config_files(path))
    peers = parse_peers(values["controllerDLegerPeers"])
    self_id = values["controllerDLegerSelfId"]
    if self_id not in {p.node_id for p in peers}:
        raise ConfigError("controllerDLegerSelfId", f"{self_id!r} is not in controllerDLegerPeers")
    check_security_keys(values, ("innerClientAuthenticationCredentials", "adminAuthToken"))
    offset = values["controllerRaftPortOffset"]
    if any(peer.port + offset > 65535 for peer in peers):
        raise ConfigError("controllerRaftPortOffset", f"a peer's API port + {offset} is beyond 65535")
    if any(is_unspecified_host(peer.host) for peer in peers):
        raise ConfigError("controllerDLegerPeers", "0.0.0.0 is no address peers can reach: give the node IP")
    return values, sources
