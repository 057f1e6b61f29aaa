"""Broker config keys: RocketMQ's ``BrokerConfig`` and ``MessageStoreConfig`` names and defaults.

Keys and defaults follow docs/reference-behaviour.md §16.2–§16.3.

Controller mode is the mode: ``enableControllerMode`` must be true and ``controllerAddr`` set. Paths derive
from ``storePathRootDir`` as in RocketMQ; ``haListenPort`` defaults to ``listenPort + 1``
(docs/architecture.md §4).
"""

import os
from collections.abc import Mapping
from typing import Any

from mqha.config import (
    INT64_MAX,
    JAVA_INT,
    MILLIS,
    NON_NEGATIVE_LONG,
    PORT,
    POSITIVE_INT,
    POSITIVE_LONG,
    REQUIRED,
    TEXT,
    ConfigSpec,
    Key,
    Rule,
    between,
)
from mqha.errors import ConfigError
from mqha.security.keys import AUTHENTICATION_KEYS, BROKER_USER_KEYS, TLS_KEYS, check_security_keys
from mqha.wire.types import NAME_RULE, is_valid_address, is_valid_name

_INT_MAX = 2**31 - 1
_MIB = 1024 * 1024
NAME = Rule(is_valid_name, NAME_RULE)
"""Cluster and broker-set names: the rule every request checks too (docs/architecture.md §8)."""
HOST = Rule(lambda value: is_valid_address(f"{value}:1"), "a host name, IPv4 or [IPv6] address")


def _under_root(name: str) -> Any:
    return lambda values: os.path.join(values["storePathRootDir"], name)


BROKER_CONFIG = ConfigSpec(
    [
        # BrokerConfig
        Key("brokerClusterName", str, "DefaultCluster", rule=NAME),
        Key("brokerName", str, REQUIRED, rule=NAME),
        Key("brokerIP1", str, "127.0.0.1", rule=HOST),
        Key("listenPort", int, 10911, rule=PORT),
        Key(
            "brokerId",
            int,
            -1,
            "ignored in controller mode: the controller assigns the id",
            rule=between(-1, INT64_MAX),
        ),
        Key("enableControllerMode", bool, False),
        Key("controllerAddr", str, ""),
        Key("fetchControllerAddrByDnsLookup", bool, False),
        Key("syncBrokerMetadataPeriod", int, 5000, rule=MILLIS),
        Key("checkSyncStateSetPeriod", int, 5000, rule=MILLIS),
        Key("syncControllerMetadataPeriod", int, 10000, rule=MILLIS),
        Key("controllerHeartBeatTimeoutMills", int, 10000, rule=MILLIS),
        Key("brokerElectionPriority", int, _INT_MAX, rule=JAVA_INT),
        Key("brokerHeartbeatInterval", int, 1000, rule=MILLIS),
        Key("sendHeartbeatTimeoutMillis", int, 1000, rule=MILLIS),
        # MessageStoreConfig
        Key("storePathRootDir", str, os.path.expanduser("~/store"), rule=TEXT),
        Key("storePathCommitLog", str, _under_root("commitlog"), rule=TEXT),
        Key("storePathEpochFile", str, _under_root("epochFileCheckpoint"), rule=TEXT),
        Key("storePathBrokerIdentity", str, _under_root("brokerIdentity"), rule=TEXT),
        Key("mappedFileSizeCommitLog", int, 1024 * _MIB, rule=POSITIVE_INT),
        Key("maxMessageSize", int, 4 * _MIB, rule=POSITIVE_INT),
        Key("flushDiskType", str, "ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH")),
        Key("flushIntervalCommitLog", int, 500, rule=MILLIS),
        Key("fileReservedTime", int, 72, "hours a commit log segment is kept", rule=POSITIVE_INT),
        Key("haListenPort", int, lambda values: values["listenPort"] + 1, rule=PORT),
        Key("haSendHeartbeatInterval", int, 5000, rule=MILLIS),
        Key("haHousekeepingInterval", int, 20000, rule=MILLIS),
        Key("haTransferBatchSize", int, 32768, rule=POSITIVE_INT),
        Key("haMaxTimeSlaveNotCatchup", int, 15000, rule=MILLIS),
        Key("haMaxGapNotInSync", int, 256 * _MIB, rule=NON_NEGATIVE_LONG),
        Key("haFlowControlEnable", bool, False),
        Key("maxHaTransferByteInSecond", int, 100 * _MIB, rule=POSITIVE_LONG),
        Key("brokerRole", str, "ASYNC_MASTER", choices=("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")),
        Key("syncFlushTimeout", int, 5000, rule=MILLIS),
        Key("slaveTimeout", int, 3000, rule=MILLIS),
        Key("totalReplicas", int, 1, rule=POSITIVE_INT),
        Key("inSyncReplicas", int, 1, rule=POSITIVE_INT),
        Key("minInSyncReplicas", int, 1, rule=POSITIVE_INT),
        Key("allAckInSyncStateSet", bool, False),
        Key("enableAutoInSyncReplicas", bool, False),
        Key("syncFromLastFile", bool, False),
        Key("asyncLearner", bool, False),
        Key("readUnCommitted", bool, False),
        Key("syncMasterFlushOffsetWhenStartup", bool, False),
        Key("maxSlaveResendLength", int, 256 * _MIB, rule=NON_NEGATIVE_LONG),
        # mqha's own keys
        *AUTHENTICATION_KEYS,
        *BROKER_USER_KEYS,
        *TLS_KEYS,
        Key(
            "maxRequestBodyBytes",
            int,
            8 * _MIB,
            "larger HTTP bodies are refused with 413",
            rule=POSITIVE_LONG,
        ),
    ]
)


def check_broker_config(values: Mapping[str, Any]) -> None:
    """Cross-key rules; raises ``ConfigError`` naming the key."""
    if not values["enableControllerMode"]:
        raise ConfigError("enableControllerMode", "mqha brokers run in controller mode: set it to true")
    addresses = [part.strip() for part in values["controllerAddr"].split(";") if part.strip()]
    if not addresses:
        raise ConfigError("controllerAddr", "required in controller mode (host:port;host:port)")
    for address in addresses:
        if not is_valid_address(address):
            raise ConfigError(
                "controllerAddr", f"expected host:port;host:port (port 1..65535), got {address!r}"
            )
    if values["mappedFileSizeCommitLog"] <= values["maxMessageSize"] + 64:
        raise ConfigError("mappedFileSizeCommitLog", "must be larger than maxMessageSize")
    check_security_keys(values, ("innerClientAuthenticationCredentials", "initAuthenticationUser"))
    if values["haListenPort"] == values["listenPort"]:
        raise ConfigError("haListenPort", "must differ from listenPort")


def load_broker_config(path: str) -> dict[str, Any]:
    values = BROKER_CONFIG.load(path)
    check_broker_config(values)
    return values
