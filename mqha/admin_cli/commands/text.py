"""mqadmin's output: the exact text lines of docs/reference-behaviour.md §19 (plus the electMaster
member lines the reference never prints, docs/architecture.md §7) and the ``--json`` shapes."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

from mqha.admin_cli.commands.calls import Answer, decode_reply
from mqha.admin_cli.commands.failures import failed
from mqha.codes import ResponseCode
from mqha.wire.controller_api import (
    ElectMasterPayload,
    ReplicaIdentity,
    ReplicasInfo,
)


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
    payload: ElectMasterPayload = decode_reply(ElectMasterPayload, dict(answer.payload), answer.address)
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
