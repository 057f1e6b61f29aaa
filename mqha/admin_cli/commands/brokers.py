"""mqadmin's broker commands (pure): clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig --
their calls to the broker API (docs/architecture.md §4) and RocketMQ's output lines (docs/architecture.md §6).

RocketMQ asks a name server for the brokers; mqha asks the controllers of ``-a`` (``/v1/groups`` and
the sync-state data) and then each broker's own API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mqha.admin_cli.commands.calls import Answer, HttpCall, ReplicaTarget
from mqha.admin_cli.commands.failures import failed
from mqha.admin_cli.commands.text import config_value_text
from mqha.codes import ResponseCode

CLUSTER_LIST_FORMAT = "{:<22}  {:<22}  {:<4}  {:<22} {:<16}  {:<8}  {:<10}\n"
CLUSTER_LIST_HEADER = CLUSTER_LIST_FORMAT.format(
    "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#SPACE", "#ACTIVATED"
)
"""RocketMQ's clusterList columns that mqha has (no TPS, timer or page-cache columns)."""


def broker_status_call() -> HttpCall:
    return HttpCall("GET", "/v1/status")


def broker_config_call() -> HttpCall:
    return HttpCall("GET", "/v1/config")


def update_broker_config_call(key: str, value: str) -> HttpCall:
    return HttpCall("PUT", "/v1/config", {key: value}, write=True)


def clusters_of(groups: Answer) -> dict[str, list[str]]:
    """``/v1/groups``: cluster name -> its broker set names, sorted."""
    clusters = groups.payload.get("clusters")
    if not isinstance(clusters, dict):
        return {}
    return {str(c): sorted(str(n) for n in names) for c, names in sorted(clusters.items())}


def role_broker_id(target: ReplicaTarget) -> int:
    """The BID RocketMQ's clusterList shows: 0 for the master, the controller's id for a slave."""
    return 0 if target.is_master else target.broker_id


def cluster_list_row(cluster: str, target: ReplicaTarget, status: Mapping[str, Any] | None) -> str:
    space = "-" if status is None or status.get("diskUsedRatio") is None else f"{status['diskUsedRatio']:.4f}"
    version = "-" if status is None else str(status.get("brokerVersionDesc", "-"))
    return CLUSTER_LIST_FORMAT.format(
        cluster,
        target.broker_name,
        role_broker_id(target),
        target.address,
        version,
        space,
        config_value_text(activated(status)),
    )


def activated(status: Mapping[str, Any] | None) -> bool:
    """Serving: registered (not fenced) and a master or slave."""
    return status is not None and not status.get("fenced", True) and status.get("role") in ("MASTER", "SLAVE")


def cluster_list_entry(
    cluster: str, target: ReplicaTarget, status: Mapping[str, Any] | None
) -> dict[str, Any]:
    return {
        "clusterName": cluster,
        "brokerName": target.broker_name,
        "brokerId": role_broker_id(target),
        "controllerBrokerId": target.broker_id,
        "brokerAddr": target.address,
        "alive": target.alive,
        "version": None if status is None else status.get("brokerVersionDesc"),
        "diskUsedRatio": None if status is None else status.get("diskUsedRatio"),
        "activated": activated(status),
    }


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), inner, out)
    else:
        out[prefix] = value


def status_table(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``/v1/status`` as RocketMQ's brokerStatus key-value table: nested objects flattened with dots,
    lists as text, the envelope left out."""
    out: dict[str, Any] = {}
    _flat("", {k: v for k, v in payload.items() if k not in ("code", "codeName", "remark")}, out)
    return {key: out[key] for key in sorted(out)}


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(config_value_text(v) for v in value) + "]"
    return config_value_text(value)


def format_broker_status(payload: Mapping[str, Any], address: str | None = None) -> str:
    """RocketMQ's lines: ``%-32s: %s`` per key; with ``-c`` each line starts with the broker address."""
    table = status_table(payload)
    if address is None:
        return "".join(f"{key:<32}: {_value(value)}\n" for key, value in table.items())
    return "".join(f"{address:<24} {key:<32}: {_value(value)}\n" for key, value in table.items())


def config_of(answer: Answer) -> dict[str, Any]:
    config = answer.payload.get("config")
    if not isinstance(config, dict):
        raise failed(ResponseCode.SYSTEM_ERROR, "malformed reply: no 'config' object", answer.address)
    return config


def broker_config_banner(target: ReplicaTarget | None, address: str, master: str | None) -> str:
    """getBrokerConfig banners as RocketMQ: the address (-b), ``Master: A``, ``My Master: M=====Slave: A``."""
    if target is None:
        return f"============{address}============\n"
    if target.is_master:
        return f"============Master: {address}============\n"
    return f"============My Master: {master or '-'}=====Slave: {address}============\n"


def format_broker_config(banner: str, config: Mapping[str, Any]) -> str:
    text = banner
    for key in sorted(config):
        text += f"{key:<50}=  {config_value_text(config[key])}\n"
    return text + "\n"


def format_update_broker_config(addresses: Sequence[str]) -> str:
    return "".join(f"update broker config success, {address}\n" for address in addresses)
