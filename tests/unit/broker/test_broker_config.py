"""Broker config keys and defaults (docs/reference-behaviour.md §16.2–§16.3, docs/architecture.md §4)."""

import pytest

from mqha.broker.config import BROKER_CONFIG, check_broker_config
from mqha.errors import ConfigError

BASE = (
    "brokerName=broker-a\nenableControllerMode=true\n"
    "controllerAddr=127.0.0.1:9878\nstorePathRootDir=/data/a\n"
)


def test_16_3_defaults_and_derived_paths() -> None:
    values = BROKER_CONFIG.parse(BASE + "listenPort=30911\n")
    check_broker_config(values)
    assert values["haListenPort"] == 30912
    assert values["storePathEpochFile"] == "/data/a/epochFileCheckpoint"
    assert values["storePathBrokerIdentity"] == "/data/a/brokerIdentity"
    assert values["storePathCommitLog"] == "/data/a/commitlog"
    assert values["haTransferBatchSize"] == 32768
    assert values["haMaxTimeSlaveNotCatchup"] == 15000
    assert values["slaveTimeout"] == 3000
    assert values["allAckInSyncStateSet"] is False
    assert values["brokerElectionPriority"] == 2**31 - 1


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("enableControllerMode=false\n", "enableControllerMode"),
        ("controllerAddr=\n", "controllerAddr"),
        ("flushDiskType=SOMETIMES\n", "flushDiskType"),
        ("haListenPort=10911\n", "haListenPort"),
        ("mappedFileSizeCommitLog=1024\n", "mappedFileSizeCommitLog"),
    ],
)
def test_bad_broker_config_names_the_key(extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_broker_config(BROKER_CONFIG.parse(BASE + extra))
    assert info.value.key == key
