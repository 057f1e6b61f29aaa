"""The broker's role facts, held once per broker process (kernel; docs/reference-behaviour.md §9, §10).

:class:`BrokerRole` is the one owner of what this broker *is* right now: MASTER / SLAVE / NONE, the
master it follows or is, the master epoch and SyncStateSet epoch it accepted, its controller broker
id and whether it is fenced. The broker's hooks (``mqha.broker.hooks_impl``) are its only writer,
through the methods below; the store's put and read paths, the HA layer, the metrics and the HTTP
API read its fields (plain attributes: the put path reads them once per request).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from mqha.ids import MASTER_ROLE_ID


class Role(Enum):
    """Names what a broker is right now: MASTER, SLAVE, or NONE before it is told."""

    NONE = "NONE"  # not told yet (fresh start, or the ReplicasManager has not decided)
    MASTER = "MASTER"
    SLAVE = "SLAVE"


# RocketMQ's ``brokerRole`` names (docs/reference-behaviour.md §9.8)
_ROCKETMQ_ROLE = {Role.MASTER: "SYNC_MASTER", Role.SLAVE: "SLAVE", Role.NONE: "NONE"}


@dataclass(frozen=True)
class MasterInfo:
    """Where the current master is; ``ha_address`` comes from the controller (docs/architecture.md §7)."""

    broker_id: int
    address: str
    ha_address: str | None


class BrokerRole:
    """Holds the broker's role facts; only the broker hooks call the methods that change them."""

    __slots__ = ("broker_id", "fenced", "master", "master_epoch", "role", "sync_state_set_epoch")

    def __init__(self) -> None:
        self.role = Role.NONE
        # docs/reference-behaviour.md §9: a broker starts fenced until the ReplicasManager registers it
        self.fenced = True
        self.broker_id: int | None = None  # the controller-assigned id
        self.master: MasterInfo | None = None
        self.master_epoch = 0
        self.sync_state_set_epoch = 0

    # -- reads -----------------------------------------------------------------------------------

    @property
    def is_master(self) -> bool:
        return self.role is Role.MASTER

    @property
    def master_address(self) -> str | None:
        """The master's client API address while this broker is a slave (for the 503 of a put)."""
        return self.master.address if self.role is Role.SLAVE and self.master is not None else None

    @property
    def master_ha_address(self) -> str | None:
        """The HA address this broker follows while it is a slave."""
        return self.master.ha_address if self.role is Role.SLAVE and self.master is not None else None

    @property
    def role_broker_id(self) -> int:
        """``brokerId`` as the reference reports it: 0 on the master, else the controller id (-1 unknown)."""
        if self.role is Role.MASTER:
            return MASTER_ROLE_ID
        return self.broker_id if self.broker_id is not None else -1

    @property
    def rocketmq_role(self) -> str:
        """RocketMQ ``brokerRole`` name."""
        return _ROCKETMQ_ROLE[self.role]

    # -- writes (the broker hooks only) ------------------------------------------------------------

    def set_fenced(self, fenced: bool) -> None:
        self.fenced = fenced

    def set_broker_id(self, broker_id: int) -> None:
        self.broker_id = broker_id

    def to_master(self, epoch: int, sync_state_set_epoch: int, address: str, ha_address: str) -> None:
        assert self.broker_id is not None  # the HA layer refuses a master role without it
        self.role = Role.MASTER
        self.master = MasterInfo(self.broker_id, address, ha_address)
        self.master_epoch = epoch
        self.sync_state_set_epoch = max(self.sync_state_set_epoch, sync_state_set_epoch)

    def to_slave(self, master: MasterInfo, epoch: int) -> None:
        self.role = Role.SLAVE
        self.master = master
        self.master_epoch = epoch

    def accept_sync_state_set_epoch(self, epoch: int) -> bool:
        """Move to SyncStateSet epoch ``epoch`` unless it is older than the last one (then False)."""
        if epoch < self.sync_state_set_epoch:
            return False
        self.sync_state_set_epoch = epoch
        return True
