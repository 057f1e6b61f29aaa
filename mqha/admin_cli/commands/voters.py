"""mqadmin's controller voter-set commands (docs/raft.md §10, docs/architecture.md §6.1): their calls,
which answers are worth asking again, the checks before a peer is added, and their text and ``--json``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqha.admin_cli.commands.calls import Answer, HttpCall
from mqha.admin_cli.commands.failures import CommandFailed, Failure, failed
from mqha.admin_cli.commands.text import config_value_text
from mqha.codes import ResponseCode

RETRY_PAUSE = 0.5  # seconds between two asks of a voter change the leader cannot make yet
DEFAULT_CHANGE_TIMEOUT = 60.0  # addControllerPeer / removeControllerPeer: the whole command's bound

# Asked again until the command's --timeout: the observer has not caught up, the change did not commit,
# the node is starting (all 503 code 14), or leadership is moving (2007, e.g. the leader removing itself
# hands it over first).
_RETRIED = frozenset({ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.CONTROLLER_NOT_LEADER})


def storage_call() -> HttpCall:
    return HttpCall("GET", "/v1/controller/storage")


def quorum_call() -> HttpCall:
    return HttpCall("GET", "/v1/controller/quorum")


# Both changes are idempotent on the controller (adding a voter again or removing a non-voter answers
# SUCCESS and says so), so they may be sent again after a lost answer: not marked ``write``.
def add_peer_call(raft_id: str) -> HttpCall:
    return HttpCall("POST", "/v1/controller/peers/add", {"raftId": raft_id})


def remove_peer_call(address: str) -> HttpCall:
    return HttpCall("POST", "/v1/controller/peers/remove", {"address": address})


def worth_retrying(code: int) -> bool:
    """Whether a voter change (or the quorum read before it) that ended with ``code`` is asked again."""
    return code in _RETRIED


def gave_up(last: CommandFailed, command_timeout: float) -> CommandFailed:
    """The last retried failure, once --timeout is spent."""
    f = last.failure
    remark = f"{f.remark} (still so after {command_timeout:g} s; raise --timeout to wait longer)"
    return CommandFailed(Failure(f.code, remark, f.address, f.name), last.exit_code)


def unreadable_peer(address: str, exc: CommandFailed) -> CommandFailed:
    """The new controller's storage identity could not be read."""
    f = exc.failure
    remark = f"cannot read the storage identity of {address} (is it started?): {f.remark}"
    return CommandFailed(Failure(f.code, remark, f.address or address, f.name), exc.exit_code)


def voter_ids(quorum: Answer) -> list[str]:
    return [str(v.get("raftId")) for v in _members(quorum.payload.get("voters"))]


def raft_id_to_add(address: str, storage: Answer, quorum: Answer) -> str:
    """The raftId of the controller at ``address`` (its storage answer) once it is an observer that the
    cluster of ``quorum`` may take as a voter; otherwise why not, as a failure."""
    p = storage.payload
    raft_id, role = p.get("raftId"), p.get("role")
    if not isinstance(raft_id, str) or not raft_id:
        raise failed(ResponseCode.SYSTEM_ERROR, "malformed storage answer: no raftId", address)
    if role == "pending":
        raise failed(
            ResponseCode.CONTROLLER_INVALID_REQUEST,
            f"{address} has not joined a cluster yet (role pending): it waits for its peers; start it "
            "with the cluster's controllerDLegerPeers and add it once it is an observer",
            address,
        )
    cluster, ours = p.get("clusterId"), quorum.payload.get("clusterId")
    if cluster and ours and cluster != ours:
        raise failed(
            ResponseCode.CONTROLLER_INVALID_REQUEST,
            f"{address} belongs to controller cluster {cluster}, not {ours}",
            address,
        )
    if raft_id in voter_ids(quorum):
        raise failed(
            ResponseCode.CONTROLLER_INVALID_REQUEST, f"{address} is already a voter ({raft_id})", address
        )
    if role == "voter":
        # A store that was a voter once and was removed since: only a blank store rejoins.
        raise failed(
            ResponseCode.CONTROLLER_INVALID_REQUEST,
            f"{address} has a voter's store ({raft_id}) that the voter set no longer lists: wipe its "
            "store and start it again, it then joins as an observer (docs/architecture.md §6.1)",
            address,
        )
    return raft_id


def _members(items: Any) -> list[Mapping[str, Any]]:
    return [m for m in items or [] if isinstance(m, Mapping)]


def _show(value: Any) -> str:
    return config_value_text(value) or "-"  # absent (e.g. the answering node's own match index): "-"


def _connected(member: Mapping[str, Any]) -> str:
    return "self" if member.get("self") else _show(member.get("connected"))


def format_controller_quorum(answer: Answer) -> str:
    p = answer.payload
    text = f"\n#ClusterId\t{_show(p.get('clusterId'))}"
    text += f"\n#LeaderId\t{_show(p.get('leaderId'))}"
    text += f"\n#LeaderRaftId\t{_show(p.get('leaderRaftId'))}"
    text += f"\n#CommitIndex\t{_show(p.get('commitIndex'))}"
    for v in _members(p.get("voters")):
        text += (
            f"\n#Voter:\t{_show(v.get('raftId'))}\t{_show(v.get('apiAddress'))}"
            f"\tconnected={_connected(v)}\tmatchIndex={_show(v.get('matchIndex'))}"
        )
    for o in _members(p.get("observers")):
        text += (
            f"\n#Observer:\t{_show(o.get('raftId'))}\t{_show(o.get('apiAddress'))}"
            f"\tmatchIndex={_show(o.get('matchIndex'))}"
        )
    return text + "\n"


def controller_quorum_json(answer: Answer) -> dict[str, Any]:
    p = answer.payload
    obj: dict[str, Any] = {"address": answer.address}
    obj.update((key, p.get(key)) for key in ("clusterId", "leaderId", "leaderRaftId", "commitIndex"))
    for members in ("voters", "observers"):
        obj[members] = [dict(m) for m in _members(p.get(members))]
    return obj


def _voters_of(answer: Answer) -> list[str]:
    return [str(v) for v in answer.payload.get("voters") or []]


def format_add_peer(raft_id: str, answer: Answer) -> str:
    return f"add controller peer success! {raft_id} is a voter; voters: [{', '.join(_voters_of(answer))}]\n"


def add_peer_json(raft_id: str, answer: Answer) -> dict[str, Any]:
    return {"raftId": raft_id, "added": True, "remark": answer.remark, "voters": _voters_of(answer)}


def format_remove_peer(address: str, answer: Answer) -> str:
    said = f" ({answer.remark})" if answer.remark else ""
    return (
        f"remove controller peer success! {address} is not a voter{said}; "
        f"voters: [{', '.join(_voters_of(answer))}]\n"
    )


def remove_peer_json(address: str, answer: Answer) -> dict[str, Any]:
    return {"address": address, "removed": True, "remark": answer.remark, "voters": _voters_of(answer)}
