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
    is_unspecified_host,
    primary_address,
    refused,
)
from mqha.errors import ConfigError
from mqha.security.http_limits import HTTP_LIMIT_KEYS
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


def _primary_address(_values: Mapping[str, Any]) -> str:
    """The host's primary address, as RocketMQ's default brokerIP1 (the launcher sets 127.0.0.1)."""
    return primary_address()


def _under_root(name: str) -> Any:
    return lambda values: os.path.join(values["storePathRootDir"], name)


CONTROLLER_DECIDES = "the controller decides it in controller mode (docs/architecture.md §4): remove the key"

BROKER_CONFIG = ConfigSpec(
    [
        # BrokerConfig
        Key("brokerClusterName", str, "DefaultCluster", "cluster this broker set belongs to", rule=NAME),
        Key("brokerName", str, REQUIRED, "broker set (group) name; its replicas share it", rule=NAME),
        Key(
            "brokerIP1",
            str,
            _primary_address,
            "address the broker listens on and registers with",
            rule=HOST,
            deviation="default: the host's primary address (mqha cluster sets 127.0.0.1); 0.0.0.0 and "
            "an address no local interface has are refused at start",
            default_text="the host's primary address",
        ),
        Key(
            "listenPort",
            int,
            10911,
            "client port (mqha: the HTTP API)",
            rule=PORT,
            deviation="0 (an ephemeral port) is refused: the registered address must be reachable",
        ),
        Key(
            "brokerId",
            int,
            -1,
            "replica id; 0 is the master in RocketMQ's classic mode",
            rule=between(-1, INT64_MAX),
            support=refused(CONTROLLER_DECIDES),
        ),
        Key(
            "enableControllerMode",
            bool,
            False,
            "run with a controller (AutoSwitchHA)",
            deviation="must be true: mqha brokers only run in controller mode",
        ),
        Key("controllerAddr", str, "", "controllers' addresses, host:port;host:port"),
        Key(
            "fetchControllerAddrByDnsLookup",
            bool,
            False,
            "resolve controllerAddr through DNS periodically",
            support=refused("list every controller in controllerAddr (names resolve at each connect)"),
        ),
        Key(
            "syncBrokerMetadataPeriod",
            int,
            5000,
            "period of the broker's metadata refresh from the controller",
            rule=MILLIS,
        ),
        Key(
            "checkSyncStateSetPeriod",
            int,
            5000,
            "period of the master's SyncStateSet check",
            rule=MILLIS,
        ),
        Key(
            "syncControllerMetadataPeriod",
            int,
            10000,
            "period of the controller-leader lookup",
            rule=MILLIS,
        ),
        Key(
            "controllerHeartBeatTimeoutMills",
            int,
            10000,
            "heartbeat timeout the controller applies to this broker",
            rule=MILLIS,
        ),
        Key(
            "brokerElectionPriority",
            int,
            _INT_MAX,
            "election priority; lower wins among equally up-to-date replicas",
            rule=JAVA_INT,
        ),
        Key("brokerHeartbeatInterval", int, 1000, "period of heartbeats to the controller", rule=MILLIS),
        Key("sendHeartbeatTimeoutMillis", int, 1000, "timeout of one heartbeat request", rule=MILLIS),
        # MessageStoreConfig
        Key(
            "storePathRootDir",
            str,
            os.path.expanduser("~/store"),
            "store root directory",
            rule=TEXT,
            default_text="~/store",
        ),
        Key(
            "storePathCommitLog",
            str,
            _under_root("commitlog"),
            "commit log directory",
            rule=TEXT,
            default_text="<storePathRootDir>/commitlog",
        ),
        Key(
            "storePathEpochFile",
            str,
            _under_root("epochFileCheckpoint"),
            "epoch file",
            rule=TEXT,
            default_text="<storePathRootDir>/epochFileCheckpoint",
        ),
        Key(
            "storePathBrokerIdentity",
            str,
            _under_root("brokerIdentity"),
            "broker identity file (controller-assigned id)",
            rule=TEXT,
            default_text="<storePathRootDir>/brokerIdentity",
        ),
        Key(
            "mappedFileSizeCommitLog",
            int,
            1024 * _MIB,
            "commit log segment size",
            rule=POSITIVE_INT,
            unit="bytes",
        ),
        Key("maxMessageSize", int, 4 * _MIB, "largest message body", rule=POSITIVE_INT, unit="bytes"),
        Key(
            "flushDiskType",
            str,
            "ASYNC_FLUSH",
            "fsync before the put answers (SYNC_FLUSH) or periodically",
            choices=("ASYNC_FLUSH", "SYNC_FLUSH"),
        ),
        Key("flushIntervalCommitLog", int, 500, "period of ASYNC_FLUSH fsyncs", rule=MILLIS),
        # Retention and full disk: RocketMQ's MessageStoreConfig names, units and defaults
        Key(
            "fileReservedTime",
            int,
            72,
            "hours a commit log segment is kept",
            rule=POSITIVE_INT,
            unit="hours",
        ),
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
            unit="%",
        ),
        Key(
            "diskSpaceWarningLevelRatio",
            int,
            90,
            "percent of the disk used above which puts are refused",
            rule=between(35, 90),
            unit="%",
        ),
        Key(
            "diskSpaceCleanForciblyRatio",
            int,
            85,
            "percent of the disk used above which the oldest segments go even unexpired",
            rule=between(30, 85),
            unit="%",
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
            unit="ms",
        ),
        Key(
            "haListenPort",
            int,
            lambda values: values["listenPort"] + 1,
            "HA replication port (default listenPort + 1)",
            rule=PORT,
            deviation="must differ from listenPort and from the controllers' addresses; a port in use "
            "stops the start with one line",
            default_text="listenPort + 1",
        ),
        Key("haSendHeartbeatInterval", int, 5000, "HA heartbeat period on an idle link", rule=MILLIS),
        Key(
            "haHousekeepingInterval",
            int,
            20000,
            "an HA link silent this long is closed",
            rule=MILLIS,
        ),
        Key(
            "haTransferBatchSize",
            int,
            32768,
            "largest HA transfer batch",
            rule=POSITIVE_INT,
            unit="bytes",
        ),
        Key(
            "haMaxPendingConnections",
            int,
            64,
            "HA connections that have not sent their HANDSHAKE yet held at once; more are closed at once",
            rule=POSITIVE_INT,
            rocketmq=False,
        ),
        Key(
            "haMaxTimeSlaveNotCatchup",
            int,
            15000,
            "a slave not caught up for this long leaves the SyncStateSet",
            rule=MILLIS,
            runtime=True,
        ),
        Key(
            "haMaxGapNotInSync",
            int,
            256 * _MIB,
            "byte gap after which a slave is out of sync (classic HA)",
            rule=NON_NEGATIVE_LONG,
            unit="bytes",
            support=refused("AutoSwitchHA measures time, not bytes: use haMaxTimeSlaveNotCatchup"),
        ),
        Key("haFlowControlEnable", bool, False, "limit the HA transfer rate"),
        Key(
            "maxHaTransferByteInSecond",
            int,
            100 * _MIB,
            "HA transfer rate limit with haFlowControlEnable",
            rule=POSITIVE_LONG,
            unit="bytes/s",
        ),
        Key(
            "brokerRole",
            str,
            "ASYNC_MASTER",
            "role and ack mode in classic mode",
            choices=("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"),
            support=refused(
                "the controller decides the role in controller mode; the ack rule is "
                "allAckInSyncStateSet or inSyncReplicas: remove brokerRole",
                accepted=("SLAVE",),
            ),
            deviation="SLAVE (RocketMQ's sample for controller mode) is accepted: a broker starts "
            "without a role until the controller gives it one",
        ),
        Key("syncFlushTimeout", int, 5000, "SYNC_FLUSH wait before FLUSH_DISK_TIMEOUT", rule=MILLIS),
        Key("slaveTimeout", int, 3000, "replica-ack wait before FLUSH_SLAVE_TIMEOUT", rule=MILLIS),
        Key(
            "totalReplicas",
            int,
            1,
            "replicas the broker set is meant to have",
            rule=POSITIVE_INT,
            deviation="shown by /v1/status and mqadmin brokerStatus next to the SyncStateSet; acks follow "
            "inSyncReplicas",
        ),
        Key(
            "inSyncReplicas",
            int,
            1,
            "replicas (master included) that must have a message before the put succeeds",
            rule=POSITIVE_INT,
        ),
        Key(
            "minInSyncReplicas",
            int,
            1,
            "fewer SyncStateSet members than this: puts are refused (IN_SYNC_REPLICAS_NOT_ENOUGH)",
            rule=POSITIVE_INT,
        ),
        Key("allAckInSyncStateSet", bool, False, "every SyncStateSet member must have a message"),
        Key(
            "enableAutoInSyncReplicas",
            bool,
            False,
            "lower the ack count to the current SyncStateSet size",
            support=refused("use allAckInSyncStateSet=true with minInSyncReplicas"),
        ),
        Key("syncFromLastFile", bool, False, "a new slave starts replicating at the master's last segment"),
        Key("asyncLearner", bool, False, "this replica replicates but never joins the SyncStateSet"),
        Key("readUnCommitted", bool, False, "reads may return messages past the confirm offset"),
        Key(
            "syncMasterFlushOffsetWhenStartup",
            bool,
            False,
            "a slave takes the master's flush offset at start",
            support=refused("slaves truncate to the epoch-consistent point on every connect (docs §4)"),
        ),
        Key(
            "maxSlaveResendLength",
            int,
            256 * _MIB,
            "largest resend a master makes to a slave that fell back",
            rule=NON_NEGATIVE_LONG,
            unit="bytes",
            support=refused("a slave re-syncs from the epoch-consistent point, whatever the length"),
        ),
        # mqha's own keys
        *AUTHENTICATION_KEYS,
        *BROKER_USER_KEYS,
        *TLS_KEYS,
        *HTTP_LIMIT_KEYS,
        Key(
            "maxRequestBodyBytes",
            int,
            8 * _MIB,
            "larger HTTP bodies are refused with 413",
            rule=POSITIVE_LONG,
            unit="bytes",
            rocketmq=False,
        ),
        Key(
            "scrubCommitLogBytesPerSecond",
            int,
            4 * _MIB,
            "the background scrub re-verifies every segment's CRCs at most this fast, oldest first, "
            "pass after pass; 0 turns it off (docs/architecture.md §4.7)",
            rule=NON_NEGATIVE_LONG,
            unit="bytes",
            runtime=True,
            rocketmq=False,
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
    if is_unspecified_host(values["brokerIP1"]):
        raise ConfigError(
            "brokerIP1", "is registered as this broker's address: give one peers can reach, not 0.0.0.0"
        )
    for name in ("listenPort", "haListenPort"):
        mine = f"{values['brokerIP1']}:{values[name]}"
        if mine in addresses:
            raise ConfigError(name, f"{mine} is a controller's address in controllerAddr")


def load_broker_config(path: str) -> dict[str, Any]:
    return load_broker_layers(path)[0]


def load_broker_layers(path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The broker's checked config and where each value came from (its ``-c`` file, into which
    ``updateBrokerConfig`` also writes, or ``default``)."""
    values, sources = BROKER_CONFIG.load_layers([path])
    check_broker_config(values)
    return values, sources
