"""Controller config keys and defaults (docs/reference-behaviour.md §16.1, docs/architecture.md §3)."""

import pytest

from mqha.controller.config import (
    CONTROLLER_CONFIG,
    Peer,
    blacklisted_keys,
    load_controller_config,
    parse_peers,
)
from mqha.errors import ConfigError

PEERS = "n0-127.0.0.1:9878;n1-127.0.0.1:9888;n2-127.0.0.1:9898"


def test_16_1_defaults() -> None:
    values = CONTROLLER_CONFIG.parse(f"controllerDLegerPeers={PEERS}\ncontrollerDLegerSelfId=n0\n")
    assert values["scanNotActiveBrokerInterval"] == 5000
    assert values["scanInactiveMasterInterval"] == 5000
    assert values["electMasterMaxRetryCount"] == 3
    assert values["enableElectUncleanMaster"] is False
    assert values["notifyBrokerRoleChanged"] is True
    assert values["configBlackList"] == "configBlackList;configStorePath"
    assert values["controllerStorePath"].endswith("DLedgerController")
    assert values["controllerRaftPortOffset"] == 1


def test_peers_parse_in_order() -> None:
    peers = parse_peers(PEERS)
    assert peers[1] == Peer("n1", "127.0.0.1", 9888)
    assert peers[1].api_address == "127.0.0.1:9888"
    assert peers[1].raft_address(1) == "127.0.0.1:9889"


@pytest.mark.parametrize("text", ["", "n0", "n0-127.0.0.1", "n0-127.0.0.1:x", "n0-h:1;n0-h:2", "-h:1"])
def test_bad_peers_name_the_key(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_peers(text)
    assert info.value.key == "controllerDLegerPeers"


def test_self_id_must_be_a_peer(tmp_path) -> None:
    path = tmp_path / "controller.conf"
    path.write_text(f"controllerDLegerPeers={PEERS}\ncontrollerDLegerSelfId=n9\n")
    with pytest.raises(ConfigError) as info:
        load_controller_config(str(path))
    assert info.value.key == "controllerDLegerSelfId"


def test_5_11_blacklist_always_has_the_fixed_keys() -> None:
    assert blacklisted_keys({"configBlackList": "a; b"}) == {
        "a",
        "b",
        "configBlackList",
        "configStorePath",
        "rocketmqHome",
        "adminAuthToken",
        "controllerRaftPassword",
        "innerClientAuthenticationCredentials",
        "initAuthenticationUser",
    }
