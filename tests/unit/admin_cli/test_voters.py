"""mqadmin's voter-set commands, pure parts (``mqha.admin_cli.commands.voters``): calls, retries, the
checks before adding a peer, and the text and ``--json`` of docs/architecture.md §6.1."""

from __future__ import annotations

from typing import Any

import pytest

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import Answer, CommandFailed
from mqha.codes import ResponseCode

LEADER = "127.0.0.1:9878"
NEW = "127.0.0.1:9898"
V1 = "127.0.0.1:9879/" + "a" * 32
V2 = "127.0.0.1:9889/" + "b" * 32
V3 = "127.0.0.1:9899/" + "c" * 32
OBSERVER = "127.0.0.1:9899/" + "d" * 32


def answer(payload: dict[str, Any], code: int = 0, address: str = LEADER, remark: str = "") -> Answer:
    return core.answer_from_http(address, 200, {"code": code, "codeName": "X", "remark": remark, **payload})


QUORUM = answer(
    {
        "clusterId": "0123456789abcdef",
        "self": V1,
        "role": "leader",
        "leaderId": "n0",
        "leaderRaftId": V1,
        "commitIndex": 42,
        "voters": [
            {"raftId": V1, "apiAddress": "127.0.0.1:9878", "storageId": "a" * 32, "self": True},
            {
                "raftId": V2,
                "apiAddress": "127.0.0.1:9888",
                "storageId": "b" * 32,
                "connected": True,
                "matchIndex": 42,
            },
        ],
        "observers": [
            {"raftId": OBSERVER, "apiAddress": NEW, "storageId": "d" * 32, "matchIndex": 40},
        ],
    }
)


def storage(role: str, raft_id: str = OBSERVER, cluster: str | None = "0123456789abcdef") -> Answer:
    return answer(
        {"nodeId": "n2", "storageId": raft_id[-32:], "clusterId": cluster, "role": role, "raftId": raft_id},
        address=NEW,
    )


def test_calls_follow_the_voter_routes() -> None:
    assert core.storage_call() == core.HttpCall("GET", "/v1/controller/storage")
    assert core.quorum_call() == core.HttpCall("GET", "/v1/controller/quorum")
    add = core.add_peer_call(OBSERVER)
    assert (add.method, add.path, add.body) == ("POST", "/v1/controller/peers/add", {"raftId": OBSERVER})
    remove = core.remove_peer_call(NEW)
    assert (remove.method, remove.path, remove.body) == (
        "POST",
        "/v1/controller/peers/remove",
        {"address": NEW},
    )
    # Idempotent on the controller: a lost answer may be followed by the same call again.
    assert not add.write and not remove.write


def test_only_not_yet_answers_are_retried() -> None:
    assert core.worth_retrying(ResponseCode.SERVICE_NOT_AVAILABLE)
    assert core.worth_retrying(ResponseCode.CONTROLLER_NOT_LEADER)
    for code in (ResponseCode.NO_PERMISSION, ResponseCode.CONTROLLER_INVALID_REQUEST, core.CONNECT_FAILED):
        assert not core.worth_retrying(code)


def test_gave_up_keeps_the_code_and_says_how_long() -> None:
    last = core.failed(ResponseCode.SERVICE_NOT_AVAILABLE, "not caught up; retry", LEADER)
    out = core.gave_up(last, 60)
    assert out.failure.code == ResponseCode.SERVICE_NOT_AVAILABLE and out.exit_code == last.exit_code
    assert out.failure.remark == "not caught up; retry (still so after 60 s; raise --timeout to wait longer)"


def test_unreadable_peer_names_the_peer() -> None:
    exc = core.unreachable(core.CONNECT_FAILED, "cannot connect: Connection refused", NEW)
    out = core.unreadable_peer(NEW, exc)
    assert out.exit_code == core.EXIT_UNREACHABLE
    assert out.failure.remark.startswith(f"cannot read the storage identity of {NEW} (is it started?)")


def test_an_observer_of_the_cluster_may_be_added() -> None:
    assert core.raft_id_to_add(NEW, storage("observer"), QUORUM) == OBSERVER


@pytest.mark.parametrize(
    ("store", "says"),
    [
        (storage("pending", cluster=None), "has not joined a cluster yet (role pending)"),
        (storage("observer", cluster="ffffffffffffffff"), "belongs to controller cluster ffffffffffffffff"),
        (storage("voter", raft_id=V2), "is already a voter"),
        (storage("voter", raft_id=V3), "has a voter's store"),
        (answer({"role": "observer"}, address=NEW), "malformed storage answer"),
    ],
)
def test_what_cannot_be_added_is_refused_before_asking(store: Answer, says: str) -> None:
    with pytest.raises(CommandFailed) as raised:
        core.raft_id_to_add(NEW, store, QUORUM)
    assert says in raised.value.failure.remark
    assert raised.value.exit_code == core.EXIT_FAILED


def test_quorum_text_and_json() -> None:
    assert core.format_controller_quorum(QUORUM).split("\n") == [
        "",
        "#ClusterId\t0123456789abcdef",
        "#LeaderId\tn0",
        f"#LeaderRaftId\t{V1}",
        "#CommitIndex\t42",
        f"#Voter:\t{V1}\t127.0.0.1:9878\tconnected=self\tmatchIndex=-",
        f"#Voter:\t{V2}\t127.0.0.1:9888\tconnected=true\tmatchIndex=42",
        f"#Observer:\t{OBSERVER}\t{NEW}\tmatchIndex=40",
        "",
    ]
    obj = core.controller_quorum_json(QUORUM)
    assert obj["address"] == LEADER and obj["clusterId"] == "0123456789abcdef"
    assert [v["raftId"] for v in obj["voters"]] == [V1, V2]
    assert [o["matchIndex"] for o in obj["observers"]] == [40]
    assert core.voter_ids(QUORUM) == [V1, V2]


def test_change_texts_name_the_peer_and_the_voters() -> None:
    added = answer({"voters": [V1, V2, OBSERVER]}, remark=f"{OBSERVER} added")
    assert core.format_add_peer(OBSERVER, added) == (
        f"add controller peer success! {OBSERVER} is a voter; voters: [{V1}, {V2}, {OBSERVER}]\n"
    )
    assert core.add_peer_json(OBSERVER, added)["voters"] == [V1, V2, OBSERVER]
    removed = answer({"voters": [V1, V2]}, remark=f"{V3} removed")
    assert core.format_remove_peer(NEW, removed) == (
        f"remove controller peer success! {NEW} is not a voter ({V3} removed); voters: [{V1}, {V2}]\n"
    )
    assert core.remove_peer_json(NEW, removed) == {
        "address": NEW,
        "removed": True,
        "remark": f"{V3} removed",
        "voters": [V1, V2],
    }


def test_change_commands_bound_the_whole_run_with_a_longer_timeout() -> None:
    for name in ("addControllerPeer", "removeControllerPeer"):
        args = core.build_parser(core.COMMANDS[name]).parse_args(["-a", LEADER, "-p", NEW])
        assert args.timeout == core.DEFAULT_CHANGE_TIMEOUT == 60
    args = core.build_parser(core.COMMANDS["getControllerQuorum"]).parse_args(["-a", LEADER])
    assert args.timeout == core.DEFAULT_TIMEOUT
