"""The master's SyncStateSet decisions (docs/reference-behaviour.md §10.1, §10.4): caught-up times, shrink,
expand.

Pure: an immutable :class:`InSyncState` in, a new one (and maybe a set to propose to the controller)
out; time is an argument. The broker shell keeps one value per master term, feeds it the
``CaughtUp`` / ``SlaveAck`` / ``ConnectionClosed`` events of its HA connections and the controller's
confirmed sets, and reports every returned proposal with AlterSyncStateSet (docs/reference-behaviour.md §9.5).

While a proposal is in flight ("synchronizing") the effective set is the union of the confirmed
(local) set and the proposed (remote) one: acks are then awaited from both, so a put acknowledged
during the change is safe whichever set the controller ends up confirming.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

DEFAULT_MAX_TIME_SLAVE_NOT_CATCHUP_MS = 15_000
"""``haMaxTimeSlaveNotCatchup``."""


def _frozen(mapping: Mapping[int, int]) -> Mapping[int, int]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, kw_only=True)
class InSyncState:
    """The master's view of its SyncStateSet.

    ``local_set``: confirmed by the controller. ``remote_set``: proposed and not yet confirmed
    (``None`` when nothing is in flight). ``caught_up_ms``: slave id → last time it was caught up
    (kept across disconnections, as in the reference).
    """

    local_id: int
    local_set: frozenset[int]
    remote_set: frozenset[int] | None = None
    caught_up_ms: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "local_set", frozenset(self.local_set))
        if self.remote_set is not None:
            object.__setattr__(self, "remote_set", frozenset(self.remote_set))
        object.__setattr__(self, "caught_up_ms", _frozen(self.caught_up_ms))

    @classmethod
    def for_master(cls, local_id: int, confirmed_set: Iterable[int]) -> InSyncState:
        return cls(local_id=local_id, local_set=frozenset(confirmed_set))

    # -- queries (docs/reference-behaviour.md §10.1)
    # -----------------------------------------------------------------

    @property
    def is_synchronizing(self) -> bool:
        return self.remote_set is not None

    @property
    def sync_state_set(self) -> frozenset[int]:
        """``getSyncStateSet()``: local ∪ remote while synchronizing, else local."""
        return self.local_set | self.remote_set if self.remote_set is not None else self.local_set

    @property
    def in_sync_replicas_nums(self) -> int:
        """``inSyncReplicasNums()``: max(|local|, |remote|) while synchronizing, else |local|."""
        if self.remote_set is not None:
            return max(len(self.local_set), len(self.remote_set))
        return len(self.local_set)

    # -- inputs -------------------------------------------------------------------------------

    def with_confirmed_set(self, confirmed: Iterable[int]) -> InSyncState:
        """``setSyncStateSet``: the controller confirmed a set; nothing is in flight any more.

        (The shell then recomputes confirmOffset, ``ack.compute_confirm_offset``.)
        """
        return replace(self, local_set=frozenset(confirmed), remote_set=None)

    def with_caught_up(self, slave_id: int, at_ms: int) -> InSyncState:
        """Record that ``slave_id`` was caught up at ``at_ms``; times only move forward."""
        old = self.caught_up_ms.get(slave_id)
        if old is not None and old >= at_ms:
            return self
        return replace(self, caught_up_ms={**self.caught_up_ms, slave_id: at_ms})

    def _proposing(self, proposal: frozenset[int]) -> InSyncState:
        return replace(self, remote_set=proposal)

    # -- decisions (docs/reference-behaviour.md §10.4)
    # ---------------------------------------------------------------

    def maybe_shrink(
        self, now_ms: int, max_time_not_catchup_ms: int = DEFAULT_MAX_TIME_SLAVE_NOT_CATCHUP_MS
    ) -> tuple[InSyncState, frozenset[int] | None]:
        """The periodic check: drop slaves not caught up for longer than ``max_time_not_catchup_ms``
        and members that never connected. Returns the proposal (always holding the master) or None."""
        kept = set()
        for member in self.local_set:
            if member == self.local_id:
                kept.add(member)
                continue
            caught_up = self.caught_up_ms.get(member)
            if caught_up is None or now_ms - caught_up > max_time_not_catchup_ms:
                continue  # never connected, or lagging too long
            kept.add(member)
        kept.add(self.local_id)
        proposal = frozenset(kept)
        if proposal >= self.local_set:
            return self, None
        return self._proposing(proposal), proposal

    def maybe_expand(
        self,
        slave_id: int,
        ack_offset: int,
        *,
        confirm_offset: int,
        last_epoch_start_offset: int,
        async_learner: bool = False,
    ) -> tuple[InSyncState, frozenset[int] | None]:
        """On an ack: a slave outside the local set joins once it reached the master's confirmOffset
        and the start of the master's current epoch. Async learners never join.

        As in the reference the proposal is re-made on every such ack until the controller confirms
        it; the shell may coalesce identical proposals in flight.
        """
        if async_learner or slave_id in self.local_set:
            return self, None
        if ack_offset < confirm_offset or ack_offset < last_epoch_start_offset:
            return self, None
        proposal = self.local_set | {slave_id}
        return self._proposing(proposal), proposal

    def on_connection_lost(self, slave_id: int) -> tuple[InSyncState, frozenset[int] | None]:
        """A slave's connection closed: drop it from the set at once (its caught-up time is kept)."""
        if slave_id not in self.local_set or slave_id == self.local_id:
            return self, None
        proposal = self.local_set - {slave_id}
        return self._proposing(proposal), proposal


def caught_up_time(
    *,
    ack_offset: int,
    last_master_max_offset: int,
    last_transfer_ms: int | None,
    master_max_offset: int,
    now_ms: int,
) -> int | None:
    """When an ack shows the slave caught up (docs/reference-behaviour.md §10.4), or None.

    The slave is caught up if it acked everything the master held when the last batch was sent:
    as of now if it acked the master's current end, else as of that batch's send time.
    """
    if ack_offset < last_master_max_offset:
        return None
    if ack_offset >= master_max_offset:
        return now_ms
    return last_transfer_ms
