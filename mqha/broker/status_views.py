"""The broker's ``/v1/status`` and ``/v1/epochs`` documents (docs/architecture.md §4,
docs/reference-behaviour.md §9.8), read from the broker's parts. SHELL (no IO of its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mqha.broker.hooks_impl import BrokerRuntime
from mqha.broker.metrics import ack_mode
from mqha.ids import MAX_OFFSET


class BrokerStatusViews:
    """Assembles the broker's status and epoch documents (the server wraps them in its envelope)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        runtime: BrokerRuntime,
        *,
        replicas_status: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.role = runtime.role
        self.store = runtime.store
        self.ha = runtime.ha
        self.replicas_status = replicas_status
        self.ack_mode = ack_mode(runtime.ha.gate.policy)

    def epochs(self) -> dict[str, Any]:
        """``GET /v1/epochs``: the epoch file, the open last entry ending at the log's top."""
        role = self.role
        top = self.store.max_offset
        entries = [
            {
                "epoch": e.epoch,
                "startOffset": e.start_offset,
                "endOffset": top if e.end_offset == MAX_OFFSET else e.end_offset,
            }
            for e in self.store.epochs
        ]
        return {
            "clusterName": self.config["brokerClusterName"],
            "brokerName": self.config["brokerName"],
            "brokerId": role.role_broker_id,
            "controllerBrokerId": role.broker_id,
            "epochList": entries,
            "maxOffset": top,
            "confirmOffset": self.ha.gate.confirm_offset(),
        }

    def status(self) -> dict[str, Any]:
        """``GET /v1/status``: role, offsets, SyncStateSet and the replicas manager's own view."""
        rt, role, keeper = self.runtime, self.role, self.ha.keeper
        master = role.master
        body: dict[str, Any] = {
            "clusterName": self.config["brokerClusterName"],
            "brokerName": self.config["brokerName"],
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
            "lastEpoch": self.store.epochs.last_epoch(),
            "syncStateSet": sorted(keeper.sync_state_set()),
            "localSyncStateSet": sorted(keeper.local_set()),
            "syncStateSetEpoch": role.sync_state_set_epoch,
            "minOffset": self.store.min_offset,
            "maxOffset": self.store.max_offset,
            "confirmOffset": self.ha.gate.confirm_offset(),
            "flushedOffset": self.store.log.flushed_offset,
            "ackMode": self.ack_mode,
        }
        if self.replicas_status is not None:
            try:
                body["replicasManager"] = dict(self.replicas_status())
            except Exception as exc:  # status must not fail because a sub-part does
                body["replicasManager"] = {"error": str(exc)}
        return body
