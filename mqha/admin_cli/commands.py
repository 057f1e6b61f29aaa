"""mqadmin core: the commands as data, argument -> HTTP call, and reply -> text or JSON. No I/O.

Everything the shell (``mqha.admin_cli.__main__``) needs to decide is here, as pure functions over values:

- ``COMMANDS``: every command with its options (RocketMQ names, docs/reference-behaviour.md §19) -- the shell
  builds its argparse parsers from this table, so ``-h`` and the docs cannot drift from what is accepted;
- ``*_call`` builders: the controller / broker HTTP request of each step (docs/architecture.md §3, §4);
- ``answer_from_http``: an HTTP answer -> :class:`Answer` (the ``{code, codeName, remark}`` envelope),
  and ``require_success`` -> :class:`CommandFailed` for anything but SUCCESS;
- ``leader_of``: where a metadata reply says the serving controller leader is;
- ``format_*``: the exact text lines of docs/reference-behaviour.md §19 (plus the electMaster member lines the
  reference never prints, docs/architecture.md §7) and ``*_json`` shapes for ``--json``;
- ``unknown_command_text``: the command list with the closest match (difflib).

Failures are values too: :class:`CommandFailed` carries a response code, its name and a remark, and
the exit status the shell returns. Codes are the controller's (``mqha.codes``) or a broker's; a
transport problem uses the RocketMQ client's numbers (10001 connect, 10002 timeout).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from mqha.codes import ResponseCode
from mqha.errors import RemoteProtocolError
from mqha.table_text import columns
from mqha.wire.controller_api import (
    ElectMasterPayload,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateDataPayload,
)

PROG = "mqadmin"
TOKEN_ENV = "MQHA_ADMIN_TOKEN"
DEFAULT_INTERVAL = 3.0  # docs/reference-behaviour.md §19: "-i" without a value repeats every 3 s

EXIT_OK = 0
EXIT_FAILED = 1  # a node answered, but not SUCCESS (or the answer says the target does not exist)
EXIT_USAGE = 2  # bad command line (argparse's own status for usage errors)
EXIT_UNREACHABLE = 3  # no listed node could be reached at all

# Transport failures have no server code. 10001 and 10002 are the RocketMQ client's numbers for the
# same cases; 10100 is mqadmin's own. Only CONNECT_FAILED is sure to have sent nothing.
CONNECT_FAILED = 10001  # no connection: the request was not sent
ACCESS_TIMEOUT = 10002  # sent (maybe), no answer in time
CONNECTION_LOST = 10100  # sent, the connection broke before a complete answer
_CLIENT_CODE_NAMES = {
    CONNECT_FAILED: "CONNECT_FAILED",
    ACCESS_TIMEOUT: "ACCESS_TIMEOUT",
    CONNECTION_LOST: "CONNECTION_LOST",
}


def code_name(code: int, given: str | None = None) -> str:
    if code in ResponseCode._value2member_map_:
        return ResponseCode(code).name
    return _CLIENT_CODE_NAMES.get(code) or given or f"CODE_{code}"


# --------------------------------------------------------------------------------------------------
# Failures


class UsageError(Exception):
    """The command line is wrong (exit 2 with the command's usage)."""


@dataclass(frozen=True)
class Failure:
    code: int
    remark: str
    address: str | None = None  # the node that answered (or could not be reached)
    name: str | None = None

    @property
    def code_name(self) -> str:
        return code_name(self.code, self.name)


class CommandFailed(Exception):
    """A step failed; the command ends with ``exit_code`` and ``failure`` on stderr."""

    def __init__(self, failure: Failure, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(f"{failure.code_name} ({failure.code}): {failure.remark}")
        self.failure = failure
        self.exit_code = exit_code


def failed(code: int, remark: str, address: str | None = None) -> CommandFailed:
    return CommandFailed(Failure(int(code), remark, address))


def unreachable(code: int, remark: str, address: str | None = None) -> CommandFailed:
    return CommandFailed(Failure(code, remark, address), EXIT_UNREACHABLE)


def failure_text(command: str, failure: Failure) -> str:
    """The stderr line of a failed command: its name, the code (number and name) and the remark."""
    where = f" (from {failure.address})" if failure.address else ""
    return f"{command} command failed: [{failure.code} {failure.code_name}] {failure.remark}{where}"


def failure_json(command: str, failure: Failure) -> str:
    return dumps(
        {
            "command": command,
            "code": failure.code,
            "codeName": failure.code_name,
            "remark": failure.remark,
            "address": failure.address,
        }
    )


def dumps(obj: Any) -> str:
    """``--json`` output: one compact JSON document per line (interval runs print one per round)."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=False)


# --------------------------------------------------------------------------------------------------
# The command table


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    dest: str
    help: str
    required: bool = False
    kind: str = "str"  # str | int | flag | interval
    metavar: str | None = None


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    options: tuple[Option, ...]
    mutating: bool = False  # needs the admin token when the controller has one
    epilog: str = ""


def _opt(*flags: str, dest: str, help: str, required: bool = False, kind: str = "str") -> Option:
    metavar = {"int": "N", "interval": "SECONDS", "flag": None}.get(kind, dest)
    return Option(tuple(flags), dest, help, required, kind, metavar)


_ADDR_HELP = "controller address host:port, or a ';' list (any of them finds the leader)"
_INTERVAL_HELP = f"repeat every SECONDS until interrupted ({DEFAULT_INTERVAL:g} when given without a value)"

COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "getControllerMetaData",
            "Show the controller group, its leader and peers as one controller sees them.",
            (_opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),),
        ),
        Command(
            "getSyncStateSet",
            "Show the master, epochs and SyncStateSet of broker sets, from the controller leader.",
            (
                _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
                _opt("-b", "--brokerName", dest="brokerName", help="broker set name"),
                _opt("-c", "--clusterName", dest="clusterName", help="every broker set of this cluster"),
                _opt("-i", "--interval", dest="interval", help=_INTERVAL_HELP, kind="interval"),
            ),
            epilog="One of -b or -c is required (-b wins when both are given).",
        ),
        Command(
            "getBrokerEpoch",
            "Show the epoch entries of every replica of a broker set (addresses from the controller).",
            (
                _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
                _opt("-b", "--brokerName", dest="brokerName", help="broker set name"),
                _opt("-c", "--clusterName", dest="clusterName", help="every broker set of this cluster"),
                _opt("-i", "--interval", dest="interval", help=_INTERVAL_HELP, kind="interval"),
            ),
            epilog="One of -b or -c is required. Replicas the controller reports not alive are skipped.",
        ),
        Command(
            "haStatus",
            "Show the HA runtime info of a broker, or of every master of a cluster.",
            (
                _opt(
                    "-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP + "; needed by -c"
                ),
                _opt("-b", "--brokerAddr", dest="brokerAddr", help="broker address host:port"),
                _opt("-c", "--clusterName", dest="clusterName", help="every master of this cluster"),
                _opt("-i", "--interval", dest="interval", help=_INTERVAL_HELP, kind="interval"),
            ),
            epilog="One of -b or -c is required; -c finds the masters through the controller (-a).",
        ),
        Command(
            "electMaster",
            "Elect the given broker as master of its set (admin-designated election).",
            (
                _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
                _opt(
                    "-b",
                    "--brokerId",
                    dest="brokerId",
                    help="controller broker id to elect",
                    required=True,
                    kind="int",
                ),
                _opt("-bn", "--brokerName", dest="brokerName", help="broker set name", required=True),
                _opt("-c", "--clusterName", dest="clusterName", help="cluster name", required=True),
            ),
            mutating=True,
        ),
        Command(
            "cleanBrokerMetadata",
            "Remove broker replicas (or a whole broker set) from the controller's metadata.",
            (
                _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
                _opt("-bn", "--brokerName", dest="brokerName", help="broker set name", required=True),
                _opt(
                    "-b",
                    "--brokerControllerIdsToClean",
                    dest="brokerControllerIdsToClean",
                    help="controller broker ids to remove, e.g. '1;2;3' (blank: the whole set)",
                ),
                _opt("-c", "--clusterName", dest="clusterName", help="cluster name (required unless -l)"),
                _opt(
                    "-l",
                    "--cleanLivingBroker",
                    dest="cleanLivingBroker",
                    kind="flag",
                    help="also clean living brokers (the whole set; the id list is ignored)",
                ),
            ),
            mutating=True,
        ),
        Command(
            "getControllerConfig",
            "Show the configuration of each listed controller.",
            (
                _opt(
                    "-a",
                    "--controllerAddress",
                    dest="controllerAddress",
                    help="controller address list host:port;host:port",
                    required=True,
                ),
            ),
        ),
        Command(
            "updateControllerConfig",
            "Change one configuration key on each listed controller.",
            (
                _opt(
                    "-a",
                    "--controllerAddress",
                    dest="controllerAddress",
                    help="controller address list host:port;host:port",
                    required=True,
                ),
                _opt("-k", "--key", dest="key", help="config key", required=True),
                _opt("-v", "--value", dest="value", help="config value", required=True),
            ),
            mutating=True,
        ),
    )
}


def command_list_text() -> str:
    lines = [f"usage: {PROG} <command> [options]   ({PROG} <command> -h for its options)", "", "Commands:"]
    lines += columns([(c.name, c.summary) for c in COMMANDS.values()], indent="  ")
    return "\n".join(lines) + "\n"


def closest_command(name: str) -> str | None:
    by_lower = {c.lower(): c for c in COMMANDS}
    if name.lower() in by_lower:  # a case slip is the most likely mistake
        return by_lower[name.lower()]
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.5)
    return by_lower[matches[0]] if matches else None


def unknown_command_text(name: str) -> str:
    best = closest_command(name)
    hint = f" Did you mean '{best}'?" if best else ""
    return f"{PROG}: unknown command '{name}'.{hint}\n\n" + command_list_text()


# --------------------------------------------------------------------------------------------------
# Arguments


def split_addresses(text: str | None) -> list[str]:
    """``"a;b; c;"`` -> ``["a", "b", "c"]`` (order kept, duplicates dropped); empty -> UsageError."""
    items = list(dict.fromkeys(part.strip() for part in (text or "").split(";") if part.strip()))
    if not items:
        raise UsageError("no controller address given (-a host:port or 'host:port;host:port')")
    for item in items:
        check_address(item)
    return items


def check_address(address: str) -> str:
    bare = address.removeprefix("http://")
    host, colon, port = bare.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"bad address {address!r}: expected host:port")
    return bare


def base_url(address: str) -> str:
    return "http://" + address.removeprefix("http://")


def check_clean_args(cluster_name: str | None, clean_living: bool) -> None:
    # The reference's own client-side rule and message (docs/reference-behaviour.md §19).
    if not clean_living and not (cluster_name or "").strip():
        raise UsageError("cleanLivingBroker option is false, clusterName option can not be empty.")


# --------------------------------------------------------------------------------------------------
# HTTP calls (docs/architecture.md §3 controller routes, §4 broker routes)


@dataclass(frozen=True)
class HttpCall:
    method: str
    path: str  # with the query string, already encoded
    body: Any = None
    write: bool = False  # a write is re-sent to a new leader only when it was surely not appended


def metadata_call() -> HttpCall:
    return HttpCall("GET", "/v1/controller/metadata")


def groups_call() -> HttpCall:
    return HttpCall("GET", "/v1/groups")


def sync_state_data_call(broker_names: Sequence[str]) -> HttpCall:
    query = urlencode([("brokerName", name) for name in broker_names])
    return HttpCall("GET", f"/v1/sync-state-data?{query}")


def elect_call(cluster_name: str, broker_name: str, broker_id: int) -> HttpCall:
    body = {"clusterName": cluster_name, "brokerId": broker_id, "designateElect": True}
    return HttpCall("POST", f"/v1/groups/{quote(broker_name, safe='')}/elect", body, write=True)


def clean_call(
    cluster_name: str | None, broker_name: str, ids_to_clean: str | None, clean_living: bool
) -> HttpCall:
    # The id list travels as the reference's "1;2;3" text: the controller validates it
    # (docs/reference-behaviour.md §5.10).
    body = {
        "clusterName": cluster_name or None,
        "brokerControllerIdsToClean": ids_to_clean if ids_to_clean and ids_to_clean.strip() else None,
        "cleanLivingBroker": clean_living,
    }
    return HttpCall("POST", f"/v1/groups/{quote(broker_name, safe='')}/clean", body, write=True)


def get_config_call() -> HttpCall:
    return HttpCall("GET", "/v1/controller/config")


def update_config_call(key: str, value: str) -> HttpCall:
    return HttpCall("PUT", "/v1/controller/config", {key: value}, write=True)


def broker_epochs_call() -> HttpCall:
    return HttpCall("GET", "/v1/epochs")


def broker_ha_status_call() -> HttpCall:
    return HttpCall("GET", "/v1/ha/status")


# --------------------------------------------------------------------------------------------------
# Answers


@dataclass(frozen=True)
class Answer:
    """One node's answer: the ``{code, codeName, remark}`` envelope and the rest as payload."""

    address: str
    http_status: int
    code: int
    remark: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS

    @property
    def code_name(self) -> str:
        return code_name(self.code, self.name)


def answer_from_http(address: str, http_status: int, body: Any) -> Answer:
    """Decode an answer; a body without the envelope is the node's fault (SYSTEM_ERROR)."""
    if (
        not isinstance(body, dict)
        or isinstance(body.get("code"), bool)
        or not isinstance(body.get("code"), int)
    ):
        shown = body if isinstance(body, str) else json.dumps(body)
        raise failed(
            ResponseCode.SYSTEM_ERROR,
            f"HTTP {http_status} without a response envelope: {shown[:200]}",
            address,
        )
    remark = body.get("remark")
    name = body.get("codeName")
    payload = {k: v for k, v in body.items() if k not in ("code", "codeName", "remark")}
    return Answer(
        address,
        http_status,
        body["code"],
        remark if isinstance(remark, str) else "",
        payload,
        name if isinstance(name, str) else None,
    )


_AUTH_HINT = f"pass --token or set {TOKEN_ENV}"


def require_success(answer: Answer) -> Answer:
    if answer.ok:
        return answer
    remark = answer.remark or "(no remark)"
    if is_token_refusal(answer):
        remark = f"{remark} ({_AUTH_HINT})"
    raise CommandFailed(Failure(answer.code, remark, answer.address, answer.name))


def is_token_refusal(answer: Answer) -> bool:
    """401: no token sent; 403 naming the token: a wrong one (a blacklisted config key is 403 too)."""
    return answer.http_status == 401 or (answer.http_status == 403 and "token" in answer.remark.lower())


def leader_of(answer: Answer) -> str | None:
    """The serving leader's API address according to a metadata answer, if it names one."""
    payload = answer.payload
    if payload.get("isLeader") is True:
        return str(payload.get("selfAddress") or answer.address)
    leader = payload.get("leaderAddress")
    return str(leader) if isinstance(leader, str) and leader else None


def may_resend(call: HttpCall, answer: Answer) -> bool:
    """After a not-leader answer: may the call go to another node?

    Reads always may. A write may only when the controller says it was not appended or committed;
    "its outcome is unknown" (mqha/controller/service.py) means it may still commit, so no second try.
    """
    if answer.code != ResponseCode.CONTROLLER_NOT_LEADER:
        return False
    return not call.write or "outcome is unknown" not in answer.remark


def _decode(cls: Any, obj: Any, address: str) -> Any:
    try:
        return cls.from_json(obj)
    except RemoteProtocolError as exc:
        raise failed(ResponseCode.SYSTEM_ERROR, f"malformed reply: {exc}", address) from None


def sync_state_table(answer: Answer) -> dict[str, ReplicasInfo]:
    payload: SyncStateDataPayload = _decode(SyncStateDataPayload, dict(answer.payload), answer.address)
    return dict(payload.replicas_info_table)


def broker_names_of_cluster(answer: Answer, cluster_name: str) -> list[str]:
    """Broker sets of ``cluster_name`` in a ``/v1/groups`` answer; none -> 2008."""
    clusters = answer.payload.get("clusters")
    names = clusters.get(cluster_name) if isinstance(clusters, dict) else None
    if not names:
        known = sorted(clusters) if isinstance(clusters, dict) else []
        raise failed(
            ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
            f"no broker set of cluster '{cluster_name}' is known to the controller"
            f" (clusters: {', '.join(known) or 'none'})",
            answer.address,
        )
    return sorted(str(name) for name in names)


def require_known_sets(table: Mapping[str, ReplicasInfo], names: Iterable[str], address: str) -> None:
    """The controller skips unknown names silently (docs/reference-behaviour.md §5.7); mqadmin reports
    them."""
    missing = [name for name in names if name not in table]
    if missing:
        raise failed(
            ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
            f"broker set {', '.join(repr(n) for n in missing)} is not known to the controller",
            address,
        )


@dataclass(frozen=True)
class ReplicaTarget:
    broker_name: str
    broker_id: int
    address: str
    alive: bool
    is_master: bool


def replica_targets(broker_name: str, info: ReplicasInfo) -> list[ReplicaTarget]:
    """Every registered replica of a set, the master first, then by broker id."""
    replicas = [*info.in_sync_replicas, *info.not_in_sync_replicas]
    targets = [
        ReplicaTarget(
            broker_name, r.broker_id, r.broker_address, r.alive, r.broker_id == info.master_broker_id
        )
        for r in replicas
    ]
    return sorted(targets, key=lambda t: (not t.is_master, t.broker_id))


def master_target(broker_name: str, info: ReplicasInfo) -> ReplicaTarget | None:
    if info.master_broker_id is None or not info.master_address:
        return None
    alive = any(r.alive for r in info.in_sync_replicas if r.broker_id == info.master_broker_id)
    return ReplicaTarget(broker_name, info.master_broker_id, info.master_address, alive, True)


# --------------------------------------------------------------------------------------------------
# Text output (docs/reference-behaviour.md §19). Absent values print as Java's "null".


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def format_controller_metadata(answer: Answer) -> str:
    p = answer.payload
    text = f"\n#ControllerGroup\t{_show(p.get('group'))}"
    text += f"\n#ControllerLeaderId\t{_show(p.get('leaderId'))}"
    text += f"\n#ControllerLeaderAddress\t{_show(p.get('leaderAddress'))}"
    for peer in peers_list(p.get("peers")):
        text += f"\n#Peer:\t{peer}"
    return text + "\n"


def peers_list(peers: Any) -> list[str]:
    return [part for part in str(peers or "").split(";") if part]


def controller_metadata_json(answer: Answer) -> dict[str, Any]:
    p = answer.payload
    return {
        "address": answer.address,
        "group": p.get("group"),
        "controllerLeaderId": p.get("leaderId"),
        "controllerLeaderAddress": p.get("leaderAddress"),
        "isLeader": p.get("isLeader"),
        "peers": peers_list(p.get("peers")),
    }


def replica_identity_text(replica: ReplicaIdentity) -> str:
    return (
        f"ReplicaIdentity{{brokerName='{replica.broker_name}', brokerId={replica.broker_id}, "
        f"brokerAddress='{replica.broker_address}', alive={_show(replica.alive)}}}"
    )


def format_sync_state_set(broker_name: str, info: ReplicasInfo) -> str:
    text = (
        f"\n#brokerName\t{broker_name}"
        f"\n#MasterBrokerId\t{_show(info.master_broker_id)}"
        f"\n#MasterAddr\t{_show(info.master_address)}"
        f"\n#MasterEpoch\t{info.master_epoch}"
        f"\n#SyncStateSetEpoch\t{info.sync_state_set_epoch}"
        f"\n#SyncStateSetNums\t{len(info.in_sync_replicas)}\n"
    )
    for replica in info.in_sync_replicas:
        text += f"\nInSyncReplica:\t{replica_identity_text(replica)}\n"
    for replica in info.not_in_sync_replicas:
        text += f"\nNotInSyncReplica:\t{replica_identity_text(replica)}\n"
    return text


def format_sync_state_sets(table: Mapping[str, ReplicasInfo]) -> str:
    return "".join(format_sync_state_set(name, table[name]) for name in sorted(table))


def sync_state_sets_json(table: Mapping[str, ReplicasInfo]) -> dict[str, Any]:
    return {"replicasInfoTable": {name: table[name].to_json() for name in sorted(table)}}


def epoch_entries(cache: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    """(epoch, startOffset, endOffset) with the last entry's end replaced by the broker's maxOffset."""
    entries = [
        (int(e["epoch"]), int(e["startOffset"]), int(e["endOffset"])) for e in cache.get("epochList") or []
    ]
    if entries and cache.get("maxOffset") is not None:
        epoch, start, _ = entries[-1]
        entries[-1] = (epoch, start, int(cache["maxOffset"]))
    return entries


def format_broker_epoch(address: str, cache: Mapping[str, Any]) -> str:
    text = (
        f"\n#clusterName\t{_show(cache.get('clusterName'))}"
        f"\n#brokerName\t{_show(cache.get('brokerName'))}"
        f"\n#brokerAddr\t{address}"
        f"\n#brokerId\t{_show(cache.get('brokerId'))}"
    )
    for epoch, start, end in epoch_entries(cache):
        text += f"\n#Epoch: EpochEntry{{epoch={epoch}, startOffset={start}, endOffset={end}}}"
    return text + "\n"


def broker_epoch_json(address: str, cache: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "brokerAddr": address,
        "clusterName": cache.get("clusterName"),
        "brokerName": cache.get("brokerName"),
        "brokerId": cache.get("brokerId"),
        "controllerBrokerId": cache.get("controllerBrokerId"),
        "epochList": [{"epoch": e, "startOffset": s, "endOffset": x} for e, s, x in epoch_entries(cache)],
        "maxOffset": cache.get("maxOffset"),
        "confirmOffset": cache.get("confirmOffset"),
    }


# haStatus of a master: one row per slave connection under this header.
HA_HEADER = (
    "#SlaveAddr",
    "#SlaveAckOffset",
    "#Diff",
    "#TransferSpeed(KB/s)",
    "#Status",
    "#TransferFromWhere",
)


def _ha_row(cells: Sequence[str]) -> str:
    addr, ack, diff, speed, status, source = cells
    return f"{addr:<32} {ack:>16} {diff:>16} {speed:>21} {status:<12} {source}".rstrip()


def kb_per_second(bytes_per_second: Any) -> str:
    return f"{float(bytes_per_second or 0) / 1024:.2f}"


def human_time(ms: Any, tz: _dt.tzinfo | None = None) -> str:
    """``2026-11-22 14:54:17,123`` in ``tz`` (local time when None); 0 or absent -> ``never``."""
    if not ms:
        return "never"
    moment = _dt.datetime.fromtimestamp(int(ms) / 1000, tz=tz or _dt.UTC)
    if tz is None:
        moment = moment.astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{moment.microsecond // 1000:03d}"


def format_ha_status(address: str, info: Mapping[str, Any], tz: _dt.tzinfo | None = None) -> str:
    if info.get("master"):
        connections = info.get("haConnectionInfo") or []
        text = (
            f"\n#MasterAddr\t{address}"
            f"\n#MasterCommitLogMaxOffset\t{_show(info.get('masterCommitLogMaxOffset'))}"
            f"\n#SlaveNum\t{len(connections)}"
            f"\n#InSyncSlaveNum\t{_show(info.get('inSyncSlaveNums'))}\n"
        )
        text += _ha_row(HA_HEADER) + "\n"
        for conn in connections:
            text += (
                _ha_row(
                    (
                        _show(conn.get("addr")),
                        _show(conn.get("slaveAckOffset")),
                        _show(conn.get("diff")),
                        kb_per_second(conn.get("transferredByteInSecond")),
                        "OK" if conn.get("inSync") else "Fall Behind",
                        _show(conn.get("transferFromWhere")),
                    )
                )
                + "\n"
            )
        return text
    client = info.get("haClientRuntimeInfo") or {}
    return (
        f"\n#MasterAddr\t{_show(client.get('masterAddr'))}"
        f"\n#CommitLogMaxOffset\t{_show(client.get('maxOffset'))}"
        f"\n#TransferSpeed(KB/s)\t{kb_per_second(client.get('transferredByteInSecond'))}"
        f"\n#LastReadTime\t{human_time(client.get('lastReadTimestamp'), tz)}"
        f"\n#LastWriteTime\t{human_time(client.get('lastWriteTimestamp'), tz)}"
        f"\n#MasterFlushOffset\t{_show(client.get('masterFlushOffset'))}\n"
    )


def ha_status_json(address: str, info: Mapping[str, Any]) -> dict[str, Any]:
    return {"brokerAddr": address, **info}


def elect_payload(answer: Answer) -> ElectMasterPayload:
    payload: ElectMasterPayload = _decode(ElectMasterPayload, dict(answer.payload), answer.address)
    return payload


def format_elect_master(cluster_name: str, broker_name: str, payload: ElectMasterPayload) -> str:
    text = (
        f"\n#ClusterName\t{cluster_name}"
        f"\n#BrokerName\t{broker_name}"
        f"\n#BrokerMasterAddr\t{_show(payload.master_address)}"
        f"\n#MasterEpoch\t{_show(payload.master_epoch)}"
        f"\n#SyncStateSetEpoch\t{_show(payload.sync_state_set_epoch)}\n"
    )
    # The member lines the reference never fills in (docs/architecture.md §7).
    members = payload.broker_member_group
    if members is not None:
        for broker_id in sorted(members.broker_addrs):
            text += f"\t#Broker\t{broker_id}\t{members.broker_addrs[broker_id]}\n"
    return text


def elect_master_json(cluster_name: str, broker_name: str, payload: ElectMasterPayload) -> dict[str, Any]:
    return {"clusterName": cluster_name, "brokerName": broker_name, **payload.to_json()}


def format_clean(broker_name: str) -> str:
    return f"clear broker {broker_name} metadata from controller success! \n"


def config_value_text(value: Any) -> str:
    if value is None:
        return ""
    return _show(value)


def format_controller_config(address: str, config: Mapping[str, Any]) -> str:
    text = f"============{address}============\n"
    for key in sorted(config):
        text += f"{key:<50}=  {config_value_text(config[key])}\n"
    return text


def controller_config_of(answer: Answer) -> dict[str, Any]:
    config = answer.payload.get("config")
    if not isinstance(config, dict):
        raise failed(ResponseCode.SYSTEM_ERROR, "malformed reply: no 'config' object", answer.address)
    return config


def format_update_config(addresses: Sequence[str], key: str, value: str) -> str:
    return f"update controller config success![{', '.join(addresses)}]\n{key} : {value}\n"
