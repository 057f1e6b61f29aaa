"""mqadmin core (``mqha.admin_cli.commands``): calls built from arguments, text of docs/reference-behaviour.md
§19 from replies."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import Answer, CommandFailed, UsageError
from mqha.wire.controller_api import ReplicasInfo

LEADER = "127.0.0.1:9878"

REPLICAS_INFO = ReplicasInfo.from_json(
    {
        "masterBrokerId": 1,
        "masterAddress": "127.0.0.1:10911",
        "masterEpoch": 3,
        "syncStateSetEpoch": 5,
        "inSyncReplicas": [
            {"brokerName": "b1", "brokerId": 1, "brokerAddress": "127.0.0.1:10911", "alive": True},
            {"brokerName": "b1", "brokerId": 2, "brokerAddress": "127.0.0.1:10921", "alive": True},
        ],
        "notInSyncReplicas": [
            {"brokerName": "b1", "brokerId": 3, "brokerAddress": "127.0.0.1:10931", "alive": False}
        ],
    }
)


def answer(payload: dict, code: int = 0, status: int = 200, remark: str = "") -> Answer:
    return core.answer_from_http(LEADER, status, {"code": code, "codeName": "X", "remark": remark, **payload})


# --------------------------------------------------------------------------------------- commands


def test_every_command_of_spec_19_is_declared_with_its_options() -> None:
    flags = {
        name: {f for o in c.options for f in o.flags if not f.startswith("--")}
        for name, c in core.COMMANDS.items()
    }
    assert flags == {
        "getControllerMetaData": {"-a"},
        "getSyncStateSet": {"-a", "-b", "-c", "-i"},
        "getBrokerEpoch": {"-a", "-b", "-c", "-i"},
        "haStatus": {"-a", "-b", "-c", "-i"},
        "electMaster": {"-a", "-b", "-bn", "-c"},
        "cleanBrokerMetadata": {"-a", "-bn", "-b", "-c", "-l"},
        "getControllerConfig": {"-a"},
        "updateControllerConfig": {"-a", "-k", "-v"},
        "getControllerQuorum": {"-a"},
        "clusterList": {"-a", "-c", "-i"},
        "brokerStatus": {"-a", "-b", "-c", "-i"},
        "getBrokerConfig": {"-a", "-b", "-c", "-i"},
        "updateBrokerConfig": {"-a", "-b", "-c", "-k", "-v"},
        "addControllerPeer": {"-a", "-p"},
        "removeControllerPeer": {"-a", "-p"},
        "updateTopic": {"-a", "-c", "-t", "-r", "-w", "-p"},
        "deleteTopic": {"-a", "-c", "-t"},
        "topicList": {"-a", "-c"},
        "topicRoute": {"-a", "-t", "-l"},
        "consumerProgress": {"-a", "-g", "-t"},
        # ACL 2.0: -a is the actions, the controllers are -n (§12.11)
        "createUser": {"-n", "-c", "-u", "-p", "-t"},
        "updateUser": {"-n", "-c", "-u", "-p", "-t"},
        "deleteUser": {"-n", "-c", "-u"},
        "getUser": {"-n", "-c", "-u"},
        "listUser": {"-n", "-c", "-f"},
        "createAcl": {"-n", "-c", "-s", "-r", "-a", "-d", "-i"},
        "updateAcl": {"-n", "-c", "-s", "-r", "-a", "-d", "-i"},
        "deleteAcl": {"-n", "-c", "-s", "-r"},
        "getAcl": {"-n", "-c", "-s"},
        "listAcl": {"-n", "-c", "-s", "-r"},
    }
    mutating = {name for name, c in core.COMMANDS.items() if c.mutating}
    assert mutating == {
        "electMaster",
        "cleanBrokerMetadata",
        "updateControllerConfig",
        "updateBrokerConfig",
        "addControllerPeer",
        "removeControllerPeer",
        "updateTopic",
        "deleteTopic",
        "createUser",
        "updateUser",
        "deleteUser",
        "createAcl",
        "updateAcl",
        "deleteAcl",
    }


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("getSyncStateSt", "getSyncStateSet"),
        ("getsyncstateset", "getSyncStateSet"),
        ("electmaster", "electMaster"),
        ("getBrokerEpochs", "getBrokerEpoch"),
        ("hastatus", "haStatus"),
        ("updateControllerConf", "updateControllerConfig"),
    ],
)
def test_unknown_command_names_the_closest_match(typed: str, meant: str) -> None:
    text = core.unknown_command_text(typed)
    assert text.startswith(f"mqadmin: unknown command '{typed}'. Did you mean '{meant}'?\n")
    for name in core.COMMANDS:  # followed by the whole list
        assert f"\n  {name} " in text


def test_unknown_command_without_a_close_match_lists_commands_only() -> None:
    text = core.unknown_command_text("zzzzzzzz")
    assert "Did you mean" not in text and "Commands:" in text


# ---------------------------------------------------------------------------------------- arguments


def test_split_addresses_keeps_order_and_drops_blanks_and_duplicates() -> None:
    assert core.split_addresses(" a:1; b:2;;a:1; ") == ["a:1", "b:2"]
    with pytest.raises(UsageError, match="no controller address"):
        core.split_addresses(" ; ")
    with pytest.raises(UsageError, match="expected host:port"):
        core.split_addresses("localhost")
    with pytest.raises(UsageError, match="expected host:port"):
        core.split_addresses("h:99999")


def test_clean_needs_a_cluster_unless_living_brokers_are_cleaned() -> None:
    with pytest.raises(UsageError) as info:
        core.check_clean_args(None, clean_living=False)
    assert str(info.value) == "cleanLivingBroker option is false, clusterName option can not be empty."
    core.check_clean_args(None, clean_living=True)
    core.check_clean_args("c1", clean_living=False)


# -------------------------------------------------------------------------------------------- calls


def test_calls_follow_the_controller_routes_of_architecture_3() -> None:
    assert core.metadata_call() == core.HttpCall("GET", "/v1/controller/metadata")
    assert core.sync_state_data_call(["b 1", "b2"]).path == "/v1/sync-state-data?brokerName=b+1&brokerName=b2"
    elect = core.elect_call("c1", "b/1", 2)
    assert (elect.method, elect.path, elect.write) == ("POST", "/v1/groups/b%2F1/elect", True)
    assert elect.body == {"clusterName": "c1", "brokerId": 2, "designateElect": True}
    clean = core.clean_call("c1", "b1", "1;2", clean_living=False)
    assert clean.body == {
        "clusterName": "c1",
        "brokerControllerIdsToClean": "1;2",
        "cleanLivingBroker": False,
    }
    assert core.clean_call("", "b1", "  ", clean_living=True).body == {
        "clusterName": None,
        "brokerControllerIdsToClean": None,
        "cleanLivingBroker": True,
    }
    update = core.update_config_call("k", "v")
    assert (update.method, update.path, update.body, update.write) == (
        "PUT",
        "/v1/controller/config",
        {"k": "v"},
        True,
    )
    assert core.broker_epochs_call().path == "/v1/epochs"
    assert core.broker_ha_status_call().path == "/v1/ha/status"


# ------------------------------------------------------------------------------------------ answers


def test_answer_without_envelope_is_a_system_error() -> None:
    with pytest.raises(CommandFailed) as info:
        core.answer_from_http(LEADER, 502, "<html>bad gateway</html>")
    assert info.value.failure.code == 1 and "HTTP 502" in info.value.failure.remark
    with pytest.raises(CommandFailed):
        core.answer_from_http(LEADER, 200, {"code": True})


def test_require_success_carries_code_remark_and_auth_hint() -> None:
    assert core.require_success(answer({})).ok
    with pytest.raises(CommandFailed) as info:
        core.require_success(answer({}, code=2008, status=404, remark="gone"))
    failure = info.value.failure
    assert (failure.code, failure.code_name, failure.remark, failure.address) == (
        2008,
        "CONTROLLER_BROKER_METADATA_NOT_EXIST",
        "gone",
        LEADER,
    )
    assert info.value.exit_code == core.EXIT_FAILED
    with pytest.raises(CommandFailed) as info:
        core.require_success(answer({}, code=16, status=401, remark="needs a token"))
    assert "--token" in info.value.failure.remark and core.TOKEN_ENV in info.value.failure.remark
    with pytest.raises(CommandFailed) as info:  # the config blacklist is 403 too, but no token problem
        core.require_success(answer({}, code=16, status=403, remark="Can not update config in black list."))
    assert info.value.failure.remark == "Can not update config in black list."


def test_failure_text_and_json() -> None:
    failure = core.Failure(2007, "no leader", "h:1")
    assert core.failure_text("getSyncStateSet", failure) == (
        "getSyncStateSet command failed: [2007 CONTROLLER_NOT_LEADER] no leader (from h:1)"
    )
    assert json.loads(core.failure_json("x", core.Failure(10001, "refused"))) == {
        "command": "x",
        "code": 10001,
        "codeName": "CONNECT_FAILED",
        "remark": "refused",
        "address": None,
    }
    assert core.Failure(13, "", name="MESSAGE_ILLEGAL").code_name == "MESSAGE_ILLEGAL"  # a broker's code


def test_leader_of_metadata() -> None:
    assert core.leader_of(answer({"isLeader": True, "selfAddress": "a:1", "leaderAddress": "a:1"})) == "a:1"
    assert core.leader_of(answer({"isLeader": False, "leaderAddress": "b:2"})) == "b:2"
    assert core.leader_of(answer({"isLeader": False, "leaderAddress": None})) is None


def test_sync_state_look_ups() -> None:
    groups = answer({"clusters": {"c1": ["b2", "b1"], "c2": ["x"]}})
    assert core.broker_names_of_cluster(groups, "c1") == ["b1", "b2"]
    with pytest.raises(CommandFailed) as info:
        core.broker_names_of_cluster(groups, "nope")
    assert info.value.failure.code == 2008 and "clusters: c1, c2" in info.value.failure.remark
    with pytest.raises(CommandFailed, match="'nope' is not known"):
        core.require_known_sets({"b1": REPLICAS_INFO}, ["b1", "nope"], LEADER)
    table = core.sync_state_table(answer({"replicasInfoTable": {"b1": REPLICAS_INFO.to_json()}}))
    assert table == {"b1": REPLICAS_INFO}
    with pytest.raises(CommandFailed, match="malformed reply"):
        core.sync_state_table(answer({"replicasInfoTable": {"b1": {"masterEpoch": "x"}}}))


def test_replica_targets_master_first() -> None:
    targets = core.replica_targets("b1", REPLICAS_INFO)
    assert [(t.broker_id, t.address, t.alive, t.is_master) for t in targets] == [
        (1, "127.0.0.1:10911", True, True),
        (2, "127.0.0.1:10921", True, False),
        (3, "127.0.0.1:10931", False, False),
    ]
    master = core.master_target("b1", REPLICAS_INFO)
    assert master is not None and master.address == "127.0.0.1:10911"
    no_master = ReplicasInfo.from_json({"masterBrokerId": None, "masterAddress": None})
    assert core.master_target("b1", no_master) is None


# ----------------------------------------------------------------------------------- text
# (docs/reference-behaviour.md §19)


def test_get_controller_metadata_text() -> None:
    reply = answer(
        {
            "group": "g1",
            "leaderId": "n1",
            "leaderAddress": "127.0.0.1:9888",
            "isLeader": False,
            "peers": "n0:127.0.0.1:9878;n1:127.0.0.1:9888;",
        }
    )
    assert core.format_controller_metadata(reply) == (
        "\n#ControllerGroup\tg1"
        "\n#ControllerLeaderId\tn1"
        "\n#ControllerLeaderAddress\t127.0.0.1:9888"
        "\n#Peer:\tn0:127.0.0.1:9878"
        "\n#Peer:\tn1:127.0.0.1:9888"
        "\n"
    )
    assert core.controller_metadata_json(reply)["peers"] == ["n0:127.0.0.1:9878", "n1:127.0.0.1:9888"]
    no_leader = answer({"group": "g1", "leaderId": None, "leaderAddress": None, "peers": ""})
    assert core.format_controller_metadata(no_leader).splitlines()[2:] == [
        "#ControllerLeaderId\tnull",
        "#ControllerLeaderAddress\tnull",
    ]


def test_get_sync_state_set_text() -> None:
    assert core.format_sync_state_set("b1", REPLICAS_INFO) == (
        "\n#brokerName\tb1\n#MasterBrokerId\t1\n#MasterAddr\t127.0.0.1:10911\n#MasterEpoch\t3"
        "\n#SyncStateSetEpoch\t5\n#SyncStateSetNums\t2\n"
        "\nInSyncReplica:\tReplicaIdentity{brokerName='b1', brokerId=1, brokerAddress='127.0.0.1:10911', "
        "alive=true}\n"
        "\nInSyncReplica:\tReplicaIdentity{brokerName='b1', brokerId=2, brokerAddress='127.0.0.1:10921', "
        "alive=true}\n"
        "\nNotInSyncReplica:\tReplicaIdentity{brokerName='b1', brokerId=3, brokerAddress='127.0.0.1:10931', "
        "alive=false}\n"
    )
    both = core.format_sync_state_sets({"b2": REPLICAS_INFO, "b1": REPLICAS_INFO})
    assert both.index("#brokerName\tb1") < both.index("#brokerName\tb2")
    assert core.sync_state_sets_json({"b1": REPLICAS_INFO})["replicasInfoTable"]["b1"]["masterEpoch"] == 3


EPOCH_CACHE = {
    "clusterName": "c1",
    "brokerName": "b1",
    "brokerId": 0,
    "controllerBrokerId": 1,
    "epochList": [
        {"epoch": 1, "startOffset": 0, "endOffset": 4096},
        {"epoch": 3, "startOffset": 4096, "endOffset": 5000},
    ],
    "maxOffset": 8192,
    "confirmOffset": 8000,
}


def test_get_broker_epoch_text_replaces_the_last_end_with_max_offset() -> None:
    assert core.format_broker_epoch("127.0.0.1:10911", EPOCH_CACHE) == (
        "\n#clusterName\tc1\n#brokerName\tb1\n#brokerAddr\t127.0.0.1:10911\n#brokerId\t0"
        "\n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=4096}"
        "\n#Epoch: EpochEntry{epoch=3, startOffset=4096, endOffset=8192}"
        "\n"
    )
    empty = {**EPOCH_CACHE, "epochList": []}
    assert core.format_broker_epoch("a:1", empty).endswith("#brokerId\t0\n")
    as_json = core.broker_epoch_json("a:1", EPOCH_CACHE)
    assert as_json["epochList"][-1] == {"epoch": 3, "startOffset": 4096, "endOffset": 8192}


MASTER_HA = {
    "master": True,
    "masterCommitLogMaxOffset": 10000,
    "inSyncSlaveNums": 1,
    "haConnectionInfo": [
        {
            "addr": "127.0.0.1:50001",
            "slaveAckOffset": 10000,
            "diff": 0,
            "inSync": True,
            "transferredByteInSecond": 2048,
            "transferFromWhere": 0,
        },
        {
            "addr": "127.0.0.1:50002",
            "slaveAckOffset": 4000,
            "diff": 6000,
            "inSync": False,
            "transferredByteInSecond": 1000,
            "transferFromWhere": 3000,
        },
    ],
    "haClientRuntimeInfo": None,
}


def test_ha_status_text_of_a_master() -> None:
    lines = core.format_ha_status("127.0.0.1:10911", MASTER_HA).split("\n")
    assert lines[:5] == [
        "",
        "#MasterAddr\t127.0.0.1:10911",
        "#MasterCommitLogMaxOffset\t10000",
        "#SlaveNum\t2",
        "#InSyncSlaveNum\t1",
    ]
    assert lines[5].split() == list(core.HA_HEADER)
    assert lines[6].split() == ["127.0.0.1:50001", "10000", "0", "2.00", "OK", "0"]
    assert lines[7].split() == ["127.0.0.1:50002", "4000", "6000", "0.98", "Fall", "Behind", "3000"]
    # Columns line up under the header.
    assert lines[6].index("2.00") + 4 == lines[5].index("#TransferSpeed(KB/s)") + len("#TransferSpeed(KB/s)")
    assert lines[8:] == [""]


def test_ha_status_text_of_a_slave() -> None:
    info = {
        "master": False,
        "haClientRuntimeInfo": {
            "masterAddr": "127.0.0.1:10912",
            "transferredByteInSecond": 512,
            "maxOffset": 9000,
            "lastReadTimestamp": 1_700_000_000_123,
            "lastWriteTimestamp": 0,
            "masterFlushOffset": 9500,
        },
    }
    assert core.format_ha_status("127.0.0.1:10921", info, tz=dt.UTC) == (
        "\n#MasterAddr\t127.0.0.1:10912\n#CommitLogMaxOffset\t9000\n#TransferSpeed(KB/s)\t0.50"
        "\n#LastReadTime\t2023-11-14 22:13:20,123\n#LastWriteTime\tnever\n#MasterFlushOffset\t9500\n"
    )


def test_elect_master_text_prints_the_member_lines() -> None:
    reply = answer(
        {
            "masterBrokerId": 2,
            "masterAddress": "127.0.0.1:10921",
            "masterEpoch": 4,
            "syncStateSetEpoch": 6,
            "syncStateSet": [2],
            "brokerMemberGroup": {
                "cluster": "c1",
                "brokerName": "b1",
                "brokerAddrs": {"2": "127.0.0.1:10921", "10": "127.0.0.1:11011", "1": "127.0.0.1:10911"},
            },
        }
    )
    payload = core.elect_payload(reply)
    assert core.format_elect_master("c1", "b1", payload) == (
        "\n#ClusterName\tc1\n#BrokerName\tb1\n#BrokerMasterAddr\t127.0.0.1:10921\n#MasterEpoch\t4"
        "\n#SyncStateSetEpoch\t6\n"
        "\t#Broker\t1\t127.0.0.1:10911\n\t#Broker\t2\t127.0.0.1:10921\n\t#Broker\t10\t127.0.0.1:11011\n"
    )
    assert core.elect_master_json("c1", "b1", payload)["masterBrokerId"] == 2


def test_clean_and_config_texts() -> None:
    assert core.format_clean("b1") == "clear broker b1 metadata from controller success! \n"
    text = core.format_controller_config("h:1", {"b": True, "a": 5, "longKeyName": None})
    assert text.split("\n") == [
        "============h:1============",
        "a" + " " * 49 + "=  5",
        "b" + " " * 49 + "=  true",
        "longKeyName" + " " * 39 + "=  ",
        "",
    ]
    assert (
        core.format_update_config(["h:1", "h:2"], "k", "v")
        == "update controller config success![h:1, h:2]\nk : v\n"
    )
    with pytest.raises(CommandFailed, match="no 'config'"):
        core.controller_config_of(answer({}))
