"""The broker's ``/v1/status`` and ``/v1/epochs`` documents (docs/architecture.md §4,
docs/reference-behaviour.md §9.8), read from the broker's parts. SHELL (no IO of its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mqha import __version__
from mqha.broker.hooks_impl import BrokerRuntime
from mqha.broker.metrics import ack_mode
from mqha.ids import MAX_OFFSET

if TYPE_CHECKING:
    from mqha.broker.access import DiskCheck


class BrokerStatusViews:
    """Assembles the broker's status and epoch documents (the server wraps them in its envelope)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        runtime: BrokerRuntime,
        *,
        replicas_status: Callable[[], Mapping[str, Any]] | None = None,
        disk: DiskCheck | None = None,
    ) -> None:
        self._config = config
        self._disk = disk
        self._runtime = runtime
        self._replicas_status = replicas_status
        self._ack_mode = ack_mode(runtime.ha.gate.policy)

    def epochs(self) -> dict[str, Any]:
        """``GET /v1/epochs``: the epoch file, the open last entry ending at the log's top."""
        role, store, config = self._runtime.role, self._runtime.store, self._config
        top = store.max_offset
        entries = [
            {
                "epoch": e.epoch,
                "startOffset": e.start_offset,
                "endOffset": top if e.end_offset == MAX_OFFSET else e.end_offset,
            }
            for e in store.epochs
        ]
        return {
            "clusterName": config["brokerClusterName"],
            "brokerName": config["brokerName"],
            "brokerId": role.role_broker_id,
            "controllerBrokerId": role.broker_id,
            "epochList": entries,
            "maxOffset": top,
            "confirmOffset": self._runtime.ha.gate.confirm_offset(),
        }

    def status(self) -> dict[str, Any]:
        """``GET /v1/status``: role, offsets, SyncStateSet and the replicas manager's own view."""
        rt, config = self._runtime, self._config
        role, store, ha = rt.role, rt.store, rt.ha
        master = role.master
        body: dict[str, Any] = {
            "clusterName": config["brokerClusterName"],
            "brokerName": config["brokerName"],
            "brokerAddress": rt.address,
            "haAddress": rt.ha_address,
            "role": role.role.value,
            "brokerRole": role.rocketmq_role,
            "brokerId": role.role_broker_id,
            "controllerBrokerId": role.broker_id,
            "fenced": role.fenced,
            "masterBrokerId": master.broker_id if master is not None else None,
            "masterAddress": master.address if master is not None else None,
            "masterHaAddress": master.ha_address if master is not None else None,
            "masterEpoch": role.master_epoch,
            "lastEpoch": store.epochs.last_epoch(),
            "syncStateSet": sorted(ha.keeper.sync_state_set()),
            "localSyncStateSet": sorted(ha.keeper.local_set()),
            "syncStateSetEpoch": role.sync_state_set_epoch,
            "minOffset": store.min_offset,
            "maxOffset": store.max_offset,
            "confirmOffset": ha.gate.confirm_offset(),
            "flushedOffset": store.log.flushed_offset,
            "ackMode": self._ack_mode,
            "startReport": store.start_report.to_json(),  # docs/architecture.md §3.2
            "totalReplicas": config["totalReplicas"],
            "brokerVersionDesc": f"mqha {__version__}",
        }
        # docs/architecture.md §4 "Reads on a slave": null while reads are served, else why not.
        body["readRefusal"] = ha.gate.read_refusal()
        if self._disk is not None:  # docs/architecture.md §4.2: puts refused; a full slave stores nothing
            body["diskFull"] = self._disk.is_full()
            body["diskUsedRatio"] = round(self._disk.used, 4)
        if self._replicas_status is not None:
            try:
                body["replicasManager"] = dict(self._replicas_status())
            except Exception as exc:  # status must not fail because a sub-part does
                body["replicasManager"] = {"error": str(exc)}
        return body
