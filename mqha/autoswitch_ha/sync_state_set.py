"""The master's SyncStateSet decisions (docs/reference-behaviour.md §10.1, §10.4): caught-up times, shrink,
expand.

Pure: an immutable :class:`InSyncState` in, a new one (and maybe a set to propose to the controller)
out; time is an argument. The broker shell keeps one value per master term, feeds it the
``CaughtUp`` / ``SlaveAck`` / ``ConnectionClosed`` events of its HA connections and the controller's
confirmed sets, and reports every returned proposal with AlterSyncStateSet (docs/reference-behaviour.md §9.5).

While a proposal is in flight ("synchronizing") the effective set is the union of the confirmed
(local) set and the proposed (remote) one: acks are then awaited from both, so a put acknowledged
during the change is safe whichever set the controller ends up confirming.

Incarnations (KIP-903's lesson, docs/architecture.md §4): every slave process announces a fresh
incarnation on its HA connections. Membership is bound to the incarnation the master saw catch up
(``bound``): a member that comes back as another process is taken out of the set (and may rejoin as
itself once it catches up again), a caught-up time is only ever credited to the incarnation that
earned it, and a connection of unknown incarnation (``None``) is never caught up and never joins.
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
    (kept across disconnections, as in the reference), earned by the incarnation
    ``caught_up_incarnation`` names. ``bound``: member id → the incarnation its membership is bound to
    (the one the master saw catch up, or the first one it saw of a member it inherited), for the
    members of ``local_set`` ∪ ``remote_set``.
    """

    local_id: int
    local_set: frozenset[int]
    remote_set: frozenset[int] | None = None
    caught_up_ms: Mapping[int, int] = field(default_factory=dict)
    caught_up_incarnation: Mapping[int, str] = field(default_factory=dict)
    bound: Mapping[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "local_set", frozenset(self.local_set))
        if self.remote_set is not None:
            object.__setattr__(self, "remote_set", frozenset(self.remote_set))
        object.__setattr__(self, "caught_up_ms", _frozen(self.caught_up_ms))
        object.__setattr__(self, "caught_up_incarnation", MappingProxyType(dict(self.caught_up_incarnation)))
        object.__setattr__(self, "bound", MappingProxyType(dict(self.bound)))

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

        (The shell then recomputes confirmOffset, ``ack.compute_confirm_offset``.) Bindings of ids
        outside the confirmed set are dropped.
        """
        local = frozenset(confirmed)
        bound = {member: inc for member, inc in self.bound.items() if member in local}
        return replace(self, local_set=local, remote_set=None, bound=bound)

    def with_caught_up(self, slave_id: int, at_ms: int, incarnation: str | None) -> InSyncState:
        """Record that incarnation ``incarnation`` of ``slave_id`` was caught up at ``at_ms``; times
        only move forward for one incarnation, and another incarnation's time replaces it (never
        inherited). An unknown incarnation (None) is never caught up."""
        if incarnation is None:
            return self
        old = self.caught_up_ms.get(slave_id)
        same = self.caught_up_incarnation.get(slave_id) == incarnation
        if same and old is not None and old >= at_ms:
            return self
        return replace(
            self,
            caught_up_ms={**self.caught_up_ms, slave_id: at_ms},
            caught_up_incarnation={**self.caught_up_incarnation, slave_id: incarnation},
        )

    def _caught_up_time(self, member: int) -> int | None:
        """When ``member``'s bound incarnation (any, if unbound) was last caught up."""
        earned_by = self.caught_up_incarnation.get(member)
        if earned_by is None or self.bound.get(member, earned_by) != earned_by:
            return None
        return self.caught_up_ms.get(member)

    def _proposing(self, proposal: frozenset[int]) -> InSyncState:
        # A replaced proposal takes its bindings with it: only members of local ∪ proposal stay bound.
        kept = self.local_set | proposal
        bound = {member: inc for member, inc in self.bound.items() if member in kept}
        return replace(self, remote_set=proposal, bound=bound)

    # -- decisions (docs/reference-behaviour.md §10.4)
    # ---------------------------------------------------------------

    def maybe_shrink(
        self, now_ms: int, max_time_not_catchup_ms: int = DEFAULT_MAX_TIME_SLAVE_NOT_CATCHUP_MS
    ) -> tuple[InSyncState, frozenset[int] | None]:
        """The periodic check: drop slaves not caught up for longer than ``max_time_not_catchup_ms``
        and members that never connected (or whose bound incarnation never caught up). Returns the
        proposal (always holding the master) or None."""
        kept = set()
        for member in self.local_set:
            if member == self.local_id:
                kept.add(member)
                continue
            caught_up = self._caught_up_time(member)
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
        incarnation: str | None,
        confirm_offset: int,
        last_epoch_start_offset: int,
        async_learner: bool = False,
    ) -> tuple[InSyncState, frozenset[int] | None]:
        """On an ack from incarnation ``incarnation`` of ``slave_id``.

        * outside the local set: it joins once it reached the master's confirmOffset and the start of
          the master's current epoch; the proposal binds it to ``incarnation``. Async learners and
          connections of unknown incarnation never join.
        * a member: its first known incarnation binds an unbound member (one the master inherited
          with the set); another incarnation than the bound one takes the member out of the set (a
          restarted replica may hold less than its former self acknowledged; it rejoins as itself).

        As in the reference the proposal is re-made on every such ack until the controller confirms
        it; the shell may coalesce identical proposals in flight.
        """
        if async_learner or incarnation is None:
            if slave_id in self.local_set and slave_id != self.local_id:
                return self._drop_member(slave_id)
            return self, None
        if slave_id in self.local_set:
            bound = self.bound.get(slave_id)
            if bound is None:
                return replace(self, bound={**self.bound, slave_id: incarnation}), None
            if bound != incarnation:
                return self._drop_member(slave_id)
            return self, None
        if ack_offset < confirm_offset or ack_offset < last_epoch_start_offset:
            return self, None
        proposal = self.local_set | {slave_id}
        return replace(self, bound={**self.bound, slave_id: incarnation})._proposing(proposal), proposal

    def _drop_member(self, slave_id: int) -> tuple[InSyncState, frozenset[int] | None]:
        proposal = self.local_set - {slave_id}
        if self.remote_set == proposal:
            return self, proposal  # already in flight: the shell coalesces the repeat
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
