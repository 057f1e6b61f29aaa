"""The HA layer's settings (docs/reference-behaviour.md §16.3 keys, plus the listen address and, with
``authenticationEnabled``, the credentials of the authenticated handshake, docs/architecture.md §4.1)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqha.autoswitch_ha.ack import AckPolicy
from mqha.autoswitch_ha.master import MasterConfig
from mqha.autoswitch_ha.slave import SlaveConfig
from mqha.security.credentials import InnerCredentials, parse_inner_credentials
from mqha.security.tls import client_context, server_context


@dataclass(frozen=True)
class HAConfig:
    """The HA layer's settings: the keys of docs/reference-behaviour.md §16.3, plus the listen address."""

    listen_host: str = "0.0.0.0"
    listen_port: int = 10912
    heartbeat_interval_ms: int = 5000
    housekeeping_interval_ms: int = 20000
    transfer_batch_size: int = 32768
    max_time_slave_not_catchup_ms: int = 15000
    flow_control: bool = False
    max_transfer_bytes_per_s: int = 100 * 1024 * 1024
    mapped_file_size: int = 1024 * 1024 * 1024
    slave_timeout_ms: int = 3000
    all_ack_in_sync_state_set: bool = False
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    sync_from_last_file: bool = False
    async_learner: bool = False
    reconnect_delay_ms: int = 1000
    # TLS on the HA port (docs/architecture.md §12.5): the master serves with one, the slave verifies.
    server_ssl: ssl.SSLContext | None = field(default=None, compare=False, repr=False)
    client_ssl: ssl.SSLContext | None = field(default=None, compare=False, repr=False)
    credentials: InnerCredentials | None = None
    """``innerClientAuthenticationCredentials`` when ``authenticationEnabled``: both ends of every HA
    connection prove them before any log data moves. None: the handshake of today, byte for byte."""
    auth_timeout_ms: int = 5000
    """How long the authentication exchange may take before the connection is closed."""
    max_pending_connections: int = 64
    """``haMaxPendingConnections``: peers the master holds at once before their HANDSHAKE."""

    @classmethod
    def from_broker_config(cls, config: Mapping[str, Any]) -> HAConfig:
        return cls(
            listen_host=config.get("haListenHost", "0.0.0.0"),
            listen_port=config["haListenPort"],
            heartbeat_interval_ms=config["haSendHeartbeatInterval"],
            housekeeping_interval_ms=config["haHousekeepingInterval"],
            transfer_batch_size=config["haTransferBatchSize"],
            max_time_slave_not_catchup_ms=config["haMaxTimeSlaveNotCatchup"],
            flow_control=config["haFlowControlEnable"],
            max_transfer_bytes_per_s=config["maxHaTransferByteInSecond"],
            mapped_file_size=config["mappedFileSizeCommitLog"],
            slave_timeout_ms=config["slaveTimeout"],
            all_ack_in_sync_state_set=config["allAckInSyncStateSet"],
            in_sync_replicas=config["inSyncReplicas"],
            min_in_sync_replicas=config["minInSyncReplicas"],
            sync_from_last_file=config["syncFromLastFile"],
            async_learner=config["asyncLearner"],
            max_pending_connections=config["haMaxPendingConnections"],
            server_ssl=server_context(config),
            client_ssl=client_context(config),
            credentials=(
                parse_inner_credentials(config["innerClientAuthenticationCredentials"])
                if config.get("authenticationEnabled")
                else None
            ),
        )

    @property
    def ack_policy(self) -> AckPolicy:
        return AckPolicy(
            all_ack_in_sync_state_set=self.all_ack_in_sync_state_set,
            in_sync_replicas=self.in_sync_replicas,
            min_in_sync_replicas=self.min_in_sync_replicas,
        )

    @property
    def master_config(self) -> MasterConfig:
        return MasterConfig(
            transfer_batch_size=self.transfer_batch_size,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            housekeeping_interval_ms=self.housekeeping_interval_ms,
            mapped_file_size=self.mapped_file_size,
        )

    @property
    def slave_config(self) -> SlaveConfig:
        return SlaveConfig(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            housekeeping_interval_ms=self.housekeeping_interval_ms,
            sync_from_last_file=self.sync_from_last_file,
            async_learner=self.async_learner,
            mapped_file_size=self.mapped_file_size,
        )
