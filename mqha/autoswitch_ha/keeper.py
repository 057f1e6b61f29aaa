"""The master's SyncStateSet upkeep (shell state around the ``sync_state_set`` core;
docs/reference-behaviour.md §10.4, §9.5)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from mqha.autoswitch_ha.sync_state_set import InSyncState

log = logging.getLogger(__name__)

REPORT_REPEAT_MS = 1000


class Reporter(Protocol):
    """Takes SyncStateSet proposals to the controller (the ReplicasManager is one)."""

    def report_sync_state_set(self, proposed: frozenset[int]) -> None: ...


class SyncStateSetKeeper:
    """Keeps the master's :class:`InSyncState` and reports its proposals to the controller agent.

    Every decision is a core call (``maybe_expand / maybe_shrink / on_connection_lost / with_caught_up /
    with_confirmed_set``); this class holds the current value and sends the proposals the core returns
    to the ``Reporter`` (the ReplicasManager), an identical proposal at most once a second."""

    def __init__(
        self, clock: Callable[[], int], max_time_slave_not_catchup_ms: int, reporter: Reporter | None
    ) -> None:
        self._clock = clock
        self._max_lag_ms = max_time_slave_not_catchup_ms
        self._reporter = reporter
        self.in_sync: InSyncState | None = None  # None unless this broker is (becoming) master
        self._last_report: tuple[frozenset[int], int] | None = None

    def set_max_time_slave_not_catchup(self, ms: int) -> None:
        """``haMaxTimeSlaveNotCatchup`` changed by ``updateBrokerConfig``: the next check uses it."""
        self._max_lag_ms = ms

    def sync_state_set(self) -> frozenset[int]:
        return self.in_sync.sync_state_set if self.in_sync is not None else frozenset()

    def local_set(self) -> frozenset[int]:
        return self.in_sync.local_set if self.in_sync is not None else frozenset()

    def in_sync_replicas_nums(self) -> int:
        return self.in_sync.in_sync_replicas_nums if self.in_sync is not None else 0

    # -- role changes ------------------------------------------------------------------------------

    def start_master(self, local_id: int, sync_state_set: frozenset[int], *, was_master: bool) -> None:
        """docs/reference-behaviour.md §10.2: a master already keeps its caught-up times."""
        if was_master and self.in_sync is not None:
            self.in_sync = self.in_sync.with_confirmed_set(sync_state_set)
        else:
            self.in_sync = InSyncState.for_master(local_id, sync_state_set)
        self._last_report = None

    def stop_master(self) -> None:
        self.in_sync = None

    # -- inputs ------------------------------------------------------------------------------------

    def confirmed(self, sync_state_set: frozenset[int]) -> bool:
        """A set confirmed by the controller; False when this broker keeps no set (not master)."""
        if self.in_sync is None:
            return False
        self.in_sync = self.in_sync.with_confirmed_set(sync_state_set)
        self._last_report = None
        return True

    def shrink(self) -> tuple[frozenset[int], bool]:
        """The periodic check: (the set wanted now, whether it is a shrink proposal)."""
        assert self.in_sync is not None
        state, proposal = self.in_sync.maybe_shrink(self._clock(), self._max_lag_ms)
        self.in_sync = state
        if proposal is not None:
            log.info("SyncStateSet shrink proposed: %s -> %s", sorted(state.local_set), sorted(proposal))
            return proposal, True
        return state.local_set, False

    def caught_up(self, slave_id: int, at_ms: int, incarnation: str | None) -> None:
        if self.in_sync is not None:
            self.in_sync = self.in_sync.with_caught_up(slave_id, at_ms, incarnation)

    def bound(self) -> Mapping[int, str]:
        """Member id → the incarnation its membership is bound to (``InSyncState.bound``)."""
        return self.in_sync.bound if self.in_sync is not None else {}

    def expand(
        self,
        slave_id: int,
        offset: int,
        *,
        incarnation: str | None,
        confirm_offset: int,
        last_epoch_start_offset: int,
        async_learner: bool,
    ) -> None:
        """A slave acked ``offset``: one outside the local set may join, a member of another
        incarnation than the bound one leaves (the core returns None when nothing changes)."""
        assert self.in_sync is not None
        was_member = slave_id in self.in_sync.local_set
        state, proposal = self.in_sync.maybe_expand(
            slave_id,
            offset,
            incarnation=incarnation,
            confirm_offset=confirm_offset,
            last_epoch_start_offset=last_epoch_start_offset,
            async_learner=async_learner,
        )
        self.in_sync = state
        if proposal is None:  # the common case, on every ack: nothing to format or report
            return
        if was_member:
            why = f"member {slave_id} is now another process (incarnation {incarnation})"
        else:
            why = f"slave {slave_id} (incarnation {incarnation}) caught up at {offset}"
        self._report(proposal, why)

    def connection_lost(self, slave_id: int) -> None:
        assert self.in_sync is not None
        state, proposal = self.in_sync.on_connection_lost(slave_id)
        self.in_sync = state
        self._report(proposal, f"connection to slave {slave_id} lost")

    def _report(self, proposal: frozenset[int] | None, why: str) -> None:
        if proposal is None or self._reporter is None:
            return
        now = self._clock()
        last = self._last_report
        if last is not None and last[0] == proposal and now - last[1] < REPORT_REPEAT_MS:
            return
        self._last_report = (proposal, now)
        log.info("SyncStateSet change proposed (%s): %s", why, sorted(proposal))
        try:
            self._reporter.report_sync_state_set(proposal)
        except Exception:
            log.exception("reporting the SyncStateSet %s failed", sorted(proposal))
