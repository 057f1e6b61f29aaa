"""mqadmin's HTTP calls (docs/architecture.md §3 controller routes, §4 broker routes) and what
its answers mean: the response envelope, success, leader hints, resends and typed payloads."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from mqha.admin_cli.commands.failures import TOKEN_ENV, CommandFailed, Failure, code_name, failed
from mqha.codes import ResponseCode
from mqha.errors import RemoteProtocolError
from mqha.wire.controller_api import (
    ReplicasInfo,
    SyncStateDataPayload,
)


@dataclass(frozen=True)
class HttpCall:
    """One HTTP request to a controller or broker, and whether a new leader may be sent it again."""

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


def decode_reply(cls: Any, obj: Any, address: str) -> Any:
    try:
        return cls.from_json(obj)
    except RemoteProtocolError as exc:
        raise failed(ResponseCode.SYSTEM_ERROR, f"malformed reply: {exc}", address) from None


def sync_state_table(answer: Answer) -> dict[str, ReplicasInfo]:
    payload: SyncStateDataPayload = decode_reply(SyncStateDataPayload, dict(answer.payload), answer.address)
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
    """One replica of a broker set that a command asks directly (its address and role)."""

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
