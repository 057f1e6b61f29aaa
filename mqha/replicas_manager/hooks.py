"""The contract between the ReplicasManager and the broker it runs in (docs/reference-behaviour.md §9, §10).

The ReplicasManager (controller agent) decides *when* the broker changes role or SyncStateSet; the
broker (store + AutoSwitchHA shells) carries the change out. The broker implements ``BrokerHooks``;
the ReplicasManager implements ``SyncStateSetReporter`` for the HA layer's shrink/expand proposals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mqha.role import MasterInfo

__all__ = ["BrokerHooks", "BrokerProgress", "BrokerStart", "MasterInfo", "SyncStateSetReporter"]


@dataclass(frozen=True)
class BrokerProgress:
    """What a heartbeat reports of the broker's log: last epoch, max offset, confirm offset.

    docs/reference-behaviour.md §9.7; the last epoch is the epoch file's (-1 if it is empty).
    """

    last_epoch: int
    max_offset: int
    confirm_offset: int
    ack_point: int | None = None
    """The offset every acknowledged put reached under the put policy: the confirm offset with
    ``allAckInSyncStateSet``, the ``inSyncReplicas``-th highest of the SyncStateSet's acks otherwise;
    None when puts do not wait for replicas (sent with SyncStateSet proposals, docs/architecture.md §3.2)."""
    damaged_from: int | None = None
    """The offset of the first damaged commit-log record this replica knows (docs/architecture.md
    §4.7), None when none: its heartbeats then report ``lossyRecovery`` and ``maxOffset`` no higher, so
    the controllers never take it for a complete replica."""


@dataclass(frozen=True)
class BrokerStart:
    """How this broker process started, as register and heartbeat report it (docs/architecture.md §3.2).

    The broker's ``mqha.broker.start_report.StartReport``, in the fields the controller API carries."""

    incarnation: str
    clean_shutdown: bool
    lossy_recovery: bool
    confirm_offset_before_recovery: int

    def request_fields(self) -> dict[str, object]:
        """The register / heartbeat request fields (snake_case keyword arguments)."""
        return {
            "incarnation": self.incarnation,
            "clean_shutdown": self.clean_shutdown,
            "lossy_recovery": self.lossy_recovery,
            "confirm_offset_before_recovery": max(-1, self.confirm_offset_before_recovery),
        }


class BrokerHooks(Protocol):
    """Implemented by the broker process; every method is called on the broker's event loop."""

    def progress(self) -> BrokerProgress: ...

    def set_broker_controller_id(self, broker_id: int) -> None:
        """The controller-assigned id is known (from the identity file or a fresh apply-id)."""

    async def change_to_master(
        self, epoch: int, sync_state_set_epoch: int, sync_state_set: frozenset[int]
    ) -> bool:
        """Become (or stay) master for ``epoch`` (docs/reference-behaviour.md §9.6, §10.2). False = refused
        (epoch below the epoch file's last epoch); the ReplicasManager then keeps its old role
        (docs/architecture.md §7)."""

    async def change_to_slave(self, master: MasterInfo, epoch: int) -> bool:
        """Follow ``master`` for ``epoch`` (docs/reference-behaviour.md §9.6, §10.3). False = refused."""

    def apply_sync_state_set(self, sync_state_set: frozenset[int], sync_state_set_epoch: int) -> None:
        """A SyncStateSet confirmed by the controller (newer epoch only; docs/reference-behaviour.md §9.5
        changeSyncStateSet)."""

    def maybe_shrink_sync_state_set(self) -> frozenset[int]:
        """The master's periodic check (docs/reference-behaviour.md §10.4 shrink): the set the HA layer wants
        now."""

    def set_fenced(self, fenced: bool) -> None:
        """Fenced = not registered/unfenced yet: every put and read is rejected (docs/reference-behaviour.md
        §9)."""

    def stop_following(self, epoch: int) -> None:
        """A slave stops replicating: the set's master was cleared at ``epoch`` (docs/architecture.md
        §3.2)."""


class SyncStateSetReporter(Protocol):
    """Implemented by the ReplicasManager; the broker's HA layer calls it on expand or connection loss."""

    def report_sync_state_set(self, proposed: frozenset[int]) -> None:
        """Ask the controller for ``proposed`` (AlterSyncStateSet); fire-and-forget, merged if repeated."""
