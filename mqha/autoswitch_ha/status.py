"""``GET /v1/ha/status`` (HARuntimeInfo, docs/reference-behaviour.md §10.7), the ack lags and byte counts
of the metrics, read from the HA parts."""

from __future__ import annotations

from typing import Any

from mqha.autoswitch_ha.client import HAClient
from mqha.autoswitch_ha.keeper import SyncStateSetKeeper
from mqha.autoswitch_ha.links import SlaveLinks
from mqha.autoswitch_ha.replica import ReplicaStore
from mqha.role import BrokerRole


def runtime_info(
    role: BrokerRole, store: ReplicaStore, links: SlaveLinks, keeper: SyncStateSetKeeper, client: HAClient
) -> dict[str, Any]:
    """HARuntimeInfo as ``GET /v1/ha/status`` returns it."""
    max_offset = store.max_offset
    if role.is_master:
        local = keeper.local_set()
        connections = []
        for link in sorted(links, key=lambda item: item.slave_id or 0):
            ack = link.conn.ack_offset
            connections.append(
                {
                    "addr": link.peer,
                    "slaveBrokerId": link.slave_id,
                    "slaveAckOffset": ack,
                    "diff": max_offset - ack if ack >= 0 else max_offset,
                    "inSync": link.slave_id in local,
                    "transferredByteInSecond": link.sent.per_second,
                    "transferFromWhere": link.conn.transfer_from,
                    "state": link.conn.state.value,
                    "asyncLearner": link.conn.async_learner,
                    "slaveIncarnation": link.conn.incarnation,  # mqha (§8.5); null: unknown
                }
            )
        return {
            "master": True,
            "masterCommitLogMaxOffset": max_offset,
            "inSyncSlaveNums": max(0, len(local) - 1),
            "haConnectionInfo": connections,
            "haClientRuntimeInfo": None,
        }
    conn = client.conn
    return {
        "master": False,
        "masterCommitLogMaxOffset": None,
        "inSyncSlaveNums": 0,
        "haConnectionInfo": [],
        "haClientRuntimeInfo": {
            "masterAddr": client.master_address,
            "transferredByteInSecond": client.received.per_second,
            "maxOffset": max_offset,
            "lastReadTimestamp": client.last_read_wall_ms,
            "lastWriteTimestamp": client.last_write_wall_ms,
            "masterFlushOffset": conn.master_max_offset if conn is not None else -1,
            "isActivated": client.is_connected,
            "state": conn.state.value if conn is not None else None,
            "incarnation": client.incarnation,  # mqha: this process's, announced to the master
            "readRefusal": client.read_refusal(),  # mqha: null once verified against the master
        },
    }


def ack_lags(store: ReplicaStore, links: SlaveLinks) -> dict[int, int]:
    """Slave id → bytes the slave has not acked (metrics)."""
    top = store.max_offset
    return {sid: max(0, top - max(ack, 0)) for sid, ack in links.acks().items()}


class ByteCounter:
    """Counts the HA bytes sent and received in both roles (metrics)."""

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0

    def count(self, sent: int, received: int) -> None:
        self.sent += sent
        self.received += received


class HAStatus:
    """Reads the HA parts into the ``GET /v1/ha/status`` document and the metrics' ack lags."""

    def __init__(
        self,
        role: BrokerRole,
        store: ReplicaStore,
        links: SlaveLinks,
        keeper: SyncStateSetKeeper,
        client: HAClient,
        *,
        traffic: ByteCounter,
    ) -> None:
        self._role = role
        self._store = store
        self._links = links
        self._keeper = keeper
        self._client = client
        self.traffic = traffic

    def runtime_info(self) -> dict[str, Any]:
        """HARuntimeInfo as ``GET /v1/ha/status`` returns it."""
        return runtime_info(self._role, self._store, self._links, self._keeper, self._client)

    def ack_lags(self) -> dict[int, int]:
        """Slave id → bytes the slave has not acked (metrics)."""
        return ack_lags(self._store, self._links)
