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
HOURS = Rule(
    lambda value: parse_delete_when(value) is not None, "hours 00-23 separated by ';', e.g. 04 or 04;16"
)
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
        # Retention and full disk: RocketMQ's MessageStoreConfig names, units and defaults
        Key("fileReservedTime", int, 72, "hours a commit log segment is kept", rule=POSITIVE_INT),
        Key(
            "deleteWhen",
            str,
            "04",
            "hours of the day (00-23, ';'-separated) when expired segments go",
            rule=HOURS,
        ),
        Key(
            "diskMaxUsedSpaceRatio",
            int,
            75,
            "percent of the disk used above which expired segments go at once",
            rule=between(10, 95),
        ),
        Key(
            "diskSpaceWarningLevelRatio",
            int,
            90,
            "percent of the disk used above which puts are refused",
            rule=between(35, 90),
        ),
        Key(
            "diskSpaceCleanForciblyRatio",
            int,
            85,
            "percent of the disk used above which the oldest segments go even unexpired",
            rule=between(30, 85),
        ),
        Key(
            "cleanFileForciblyEnable",
            bool,
            True,
            "allow deleting unexpired segments above diskSpaceCleanForciblyRatio",
        ),
        Key("cleanResourceInterval", int, 10000, "milliseconds between two retention passes", rule=MILLIS),
        Key(
            "destroyMapedFileIntervalForcibly",
            int,
            120000,
            "milliseconds a segment still being read is kept after it was due",
            rule=MILLIS,
        ),
        Key(
            "deleteCommitLogFilesInterval",
            int,
            100,
            "milliseconds between two segment deletions of one pass",
            rule=between(0, 2**31 - 1),
        ),
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
        Key(
            "historyRecordPutAcks",
            bool,
            True,
            "a master records every PUT_OK it answers in its history.db (the no-loss proof's acks)",
        ),
    ]
)


def parse_delete_when(text: str) -> frozenset[int] | None:
    """``deleteWhen`` ("04", "04;16") as a set of hours; None when malformed."""
    hours = set()
    for part in text.split(";"):
        hour = part.strip()
        if not hour.isdigit() or not 0 <= int(hour) <= 23:
            return None
        hours.add(int(hour))
    return frozenset(hours) or None


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
    if values["diskSpaceCleanForciblyRatio"] > values["diskSpaceWarningLevelRatio"]:
        raise ConfigError("diskSpaceCleanForciblyRatio", "must not exceed diskSpaceWarningLevelRatio")
    if values["haListenPort"] == values["listenPort"]:
        raise ConfigError("haListenPort", "must differ from listenPort")


def load_broker_config(path: str) -> dict[str, Any]:
    values = BROKER_CONFIG.load(path)
    check_broker_config(values)
    return values
