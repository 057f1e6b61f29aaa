"""Broker config keys: RocketMQ's ``BrokerConfig`` and ``MessageStoreConfig`` names and defaults.

Keys and defaults follow docs/reference-behaviour.md §16.2–§16.3.

Controller mode is the mode: ``enableControllerMode`` must be true and ``controllerAddr`` set. Paths derive
from ``storePathRootDir`` as in RocketMQ; ``haListenPort`` defaults to ``listenPort + 1``
(docs/architecture.md §4).
"""

import os
from collections.abc import Mapping
from typing import Any

from mqha.config import REQUIRED, ConfigSpec, Key
from mqha.errors import ConfigError
from mqha.security.keys import AUTHENTICATION_KEYS, BROKER_USER_KEYS, TLS_KEYS, check_security_keys

_INT_MAX = 2**31 - 1
_MIB = 1024 * 1024


def _under_root(name: str) -> Any:
    return lambda values: os.path.join(values["storePathRootDir"], name)


BROKER_CONFIG = ConfigSpec(
    [
        # BrokerConfig
        Key("brokerClusterName", str, "DefaultCluster"),
        Key("brokerName", str, REQUIRED),
        Key("brokerIP1", str, "127.0.0.1"),
        Key("listenPort", int, 10911),
        Key("brokerId", int, -1, "ignored in controller mode: the controller assigns the id"),
        Key("enableControllerMode", bool, False),
        Key("controllerAddr", str, ""),
        Key("fetchControllerAddrByDnsLookup", bool, False),
        Key("syncBrokerMetadataPeriod", int, 5000),
        Key("checkSyncStateSetPeriod", int, 5000),
        Key("syncControllerMetadataPeriod", int, 10000),
        Key("controllerHeartBeatTimeoutMills", int, 10000),
        Key("brokerElectionPriority", int, _INT_MAX),
        Key("brokerHeartbeatInterval", int, 1000),
        Key("sendHeartbeatTimeoutMillis", int, 1000),
        # MessageStoreConfig
        Key("storePathRootDir", str, os.path.expanduser("~/store")),
        Key("storePathCommitLog", str, _under_root("commitlog")),
        Key("storePathEpochFile", str, _under_root("epochFileCheckpoint")),
        Key("storePathBrokerIdentity", str, _under_root("brokerIdentity")),
        Key("mappedFileSizeCommitLog", int, 1024 * _MIB),
        Key("maxMessageSize", int, 4 * _MIB),
        Key("flushDiskType", str, "ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH")),
        Key("flushIntervalCommitLog", int, 500),
        Key("fileReservedTime", int, 72, "hours a commit log segment is kept"),
        Key("haListenPort", int, lambda values: values["listenPort"] + 1),
        Key("haSendHeartbeatInterval", int, 5000),
        Key("haHousekeepingInterval", int, 20000),
        Key("haTransferBatchSize", int, 32768),
        Key("haMaxTimeSlaveNotCatchup", int, 15000),
        Key("haMaxGapNotInSync", int, 256 * _MIB),
        Key("haFlowControlEnable", bool, False),
        Key("maxHaTransferByteInSecond", int, 100 * _MIB),
        Key("brokerRole", str, "ASYNC_MASTER", choices=("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")),
        Key("syncFlushTimeout", int, 5000),
        Key("slaveTimeout", int, 3000),
        Key("totalReplicas", int, 1),
        Key("inSyncReplicas", int, 1),
        Key("minInSyncReplicas", int, 1),
        Key("allAckInSyncStateSet", bool, False),
        Key("enableAutoInSyncReplicas", bool, False),
        Key("syncFromLastFile", bool, False),
        Key("asyncLearner", bool, False),
        Key("readUnCommitted", bool, False),
        Key("syncMasterFlushOffsetWhenStartup", bool, False),
        Key("maxSlaveResendLength", int, 256 * _MIB),
        # mqha's own keys
        *AUTHENTICATION_KEYS,
        *BROKER_USER_KEYS,
        *TLS_KEYS,
        Key("maxRequestBodyBytes", int, 8 * _MIB, "larger HTTP bodies are refused with 413"),
    ]
)


def check_broker_config(values: Mapping[str, Any]) -> None:
    """Cross-key rules; raises ``ConfigError`` naming the key."""
    if not values["enableControllerMode"]:
        raise ConfigError("enableControllerMode", "mqha brokers run in controller mode: set it to true")
    if not values["controllerAddr"].strip(";").strip():
        raise ConfigError("controllerAddr", "required in controller mode (host:port;host:port)")
    if values["mappedFileSizeCommitLog"] <= values["maxMessageSize"] + 64:
        raise ConfigError("mappedFileSizeCommitLog", "must be larger than maxMessageSize")
    check_security_keys(values, ("innerClientAuthenticationCredentials", "initAuthenticationUser"))
    if values["haListenPort"] == values["listenPort"]:
        raise ConfigError("haListenPort", "must differ from listenPort")


def load_broker_config(path: str) -> dict[str, Any]:
    values = BROKER_CONFIG.load(path)
    check_broker_config(values)
    return values
