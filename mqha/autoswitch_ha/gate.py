"""The HA layer's answers to the put and read paths (shell around the ``ack`` core;
docs/reference-behaviour.md §14, §15).

The effective confirm offset (what readers may see and heartbeats report) is
``ack.master_confirm_offset`` on an unfenced master, else the stored value; the stored value on a
master is ``ack.compute_confirm_offset`` over the local set and the links' acks. A put waits for the
replicas the ack policy needs (``ack.replica_ack_status``); the waiters are woken in offset order by
``check_waiters`` when acks arrive, and time out after ``slaveTimeout``.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Callable

from mqha.autoswitch_ha.ack import (
    AckPolicy,
    AckStatus,
    compute_confirm_offset,
    countable_acks,
    in_sync_ack_point,
    in_sync_refusal,
    master_confirm_offset,
    replica_ack_status,
)
from mqha.autoswitch_ha.eligible_release import EligibleRelease
from mqha.autoswitch_ha.events import SlaveAck
from mqha.autoswitch_ha.keeper import SyncStateSetKeeper
from mqha.autoswitch_ha.links import SlaveLinks
from mqha.autoswitch_ha.master import LogView
from mqha.autoswitch_ha.replica import ReplicaStore
from mqha.role import BrokerRole, Role


def _expire(future: asyncio.Future[AckStatus]) -> None:
    if not future.done():
        future.set_result(AckStatus.FLUSH_SLAVE_TIMEOUT)


class AckGate:
    """Answers the put path: enough in-sync replicas, the confirm offset, waiting for replica acks.

    Implements the store's ``ReplicationGate`` (``mqha.broker.access``)."""

    def __init__(
        self,
        store: ReplicaStore,
        role: BrokerRole,
        keeper: SyncStateSetKeeper,
        links: SlaveLinks,
        *,
        policy: AckPolicy,
        slave_timeout_ms: int,
        read_refusal: Callable[[], str | None] | None = None,
        release: EligibleRelease | None = None,
    ) -> None:
        self._store = store
        self.release = release if release is not None else EligibleRelease(None)
        self._slave_read_refusal = read_refusal  # the HA client's (lineage.slave_read_refusal)
        self._role = role
        self._keeper = keeper
        self._links = links
        self.policy = policy
        self._in_sync_point: int | None = None  # inSyncReplicas >= 2: what N copies hold (readers' limit)
        # What this master last exposed: a stop fences it before the last checkpoint is written, and
        # the stored value alone may never have moved (a one-replica set confirms its log end).
        self._last_exposed = -1
        self._slave_timeout_s = slave_timeout_ms / 1000
        self._waiters: list[tuple[int, int, asyncio.Future[AckStatus]]] = []
        self._seq = itertools.count()

    # -- confirm offset (docs/reference-behaviour.md §14, §10.5) -------------------------------------

    def _computed_confirm_offset(self) -> int:
        in_sync, local_id = self._keeper.in_sync, self._role.broker_id
        assert in_sync is not None and local_id is not None
        return compute_confirm_offset(
            master_max_offset=self._store.max_offset,
            sync_state_set=in_sync.sync_state_set,
            local_id=local_id,
            slave_acks=self.counted_acks(),
            stored_confirm_offset=self._store.stored_confirm_offset,
        )

    def counted_acks(self) -> dict[int, int]:
        """The live connections' acks that count (``ack.countable_acks``): no learner, and only the
        incarnation each member is bound to."""
        links = self._links
        return countable_acks(links.acks(), links.incarnations(), links.learners(), self._keeper.bound())

    def recompute_confirm_offset(self) -> None:
        if self._keeper.in_sync is not None and self._role.is_master:
            policy = self.policy
            if not policy.all_ack_in_sync_state_set and policy.in_sync_replicas >= 2:
                # Kept with the stored value (on each member's ack, each confirmed set, each start as
                # master): the ack handler compares confirm offsets before and after to tell slaves.
                # The stored value follows the in-sync point only: the every-member rule would store
                # the log end of a set shrunk to the master, which readers then saw while fewer than
                # N copies existed (mqha.sim seed 22).
                self._in_sync_point = self.in_sync_point()
                if self._in_sync_point is not None:
                    self._store.set_stored_confirm_offset(self._in_sync_point)
                return
            self._store.set_stored_confirm_offset(self._computed_confirm_offset())

    def take_slave_ack(self, event: SlaveAck) -> int:
        """A current slave's ack (the caller checked its link): the slave may join the local
        SyncStateSet, be bound to this incarnation, or leave it when it is another process than the one
        bound (the keeper decides); a member's ack moves the confirm offset. The confirm offset before."""
        in_sync = self._keeper.in_sync
        before = self.confirm_offset()
        last = self._store.epochs.last()
        self._keeper.expand(
            event.slave_id,
            event.offset,
            incarnation=event.incarnation,
            confirm_offset=before,
            last_epoch_start_offset=last.start_offset if last is not None else 0,
            async_learner=event.async_learner,
        )
        if in_sync is not None and event.slave_id in in_sync.local_set:
            self.recompute_confirm_offset()
        return before

    def confirm_offset(self) -> int:
        """The effective confirmOffset: what readers may see and what heartbeats report."""
        role, in_sync = self._role, self._keeper.in_sync
        if role.is_master and role.fenced:
            # Never below what was already exposed, never beyond the log (a truncation since).
            return max(self._store.stored_confirm_offset, min(self._last_exposed, self._store.max_offset))
        if role.is_master and in_sync is not None:
            stored = self._store.stored_confirm_offset
            policy = self.policy
            self._last_exposed = master_confirm_offset(
                all_ack_in_sync_state_set=policy.all_ack_in_sync_state_set,
                # The effective set: while an expansion is in flight the controller may already have
                # committed it, and a new member can be elected without what a one-member set exposes
                # (mqha.sim seed 212).
                local_sync_state_set=in_sync.sync_state_set,
                master_max_offset=self._store.max_offset,
                stored_confirm_offset=stored,
                # only read when nothing is stored yet; skip the walk over the links otherwise
                computed_confirm_offset=self._computed_confirm_offset() if stored < 0 else stored,
                in_sync_replicas=policy.in_sync_replicas,
                in_sync_point=self._in_sync_point,
            )
            return self._last_exposed
        return self._store.stored_confirm_offset

    def in_sync_point(self) -> int | None:
        """What an ``inSyncReplicas`` put waits for now: the N-th highest of the log end and the
        SyncStateSet members' counted acks (``ack.in_sync_ack_point``; None while fewer can ack)."""
        acks = self.counted_acks()
        members = self._keeper.sync_state_set() - {self._role.broker_id}
        return in_sync_ack_point(
            self._store.max_offset, (acks[m] for m in members if m in acks), self.policy.in_sync_replicas
        )

    def log_view(self) -> LogView:
        store = self._store
        return LogView(
            min_offset=store.min_offset,
            max_offset=store.max_offset,
            confirm_offset=self.confirm_offset(),
            epochs=store.epochs,
        )

    def log_changed(self) -> None:
        """The master's log grew (or its epochs or confirm offset changed): links may stream more."""
        if self._links:
            self._links.update_log(self.log_view())

    # -- the put path (docs/reference-behaviour.md §15) ----------------------------------------------

    def in_sync_refusal(self) -> str | None:
        """Why a put is refused before anything is written for too few in-sync replicas, or None."""
        return in_sync_refusal(self.policy, self._keeper.in_sync_replicas_nums())

    def read_refusal(self) -> str | None:
        """Why reads are refused now, or None: a slave serves only a log it verified against the
        master it follows (``lineage.slave_read_refusal``); a master always serves."""
        if self._role.role is not Role.SLAVE or self._slave_read_refusal is None:
            return None
        return self._slave_read_refusal()

    async def wait_for_replicas(self, next_offset: int) -> AckStatus:
        """Wait until the policy's replicas hold everything below ``next_offset``, or ``slaveTimeout``;
        then, before the first answer past the eligible replicas' credits, until the controller released
        them (``eligible_release``). Checked after the replica wait: a put that waited across a shrink
        is answered under the shrunk set, whose removed members the controller just credited."""
        status = await self._replicas_hold(next_offset)
        if status is AckStatus.OK and self.release.needed:
            released = self._role.is_master and await self.release.wait(self._slave_timeout_s)
            return AckStatus.OK if released else AckStatus.FLUSH_SLAVE_TIMEOUT
        return status

    async def _replicas_hold(self, next_offset: int) -> AckStatus:
        if not self.policy.needs_replica_wait:
            return AckStatus.OK
        if not self._role.is_master:
            return AckStatus.FLUSH_SLAVE_TIMEOUT
        status = replica_ack_status(
            self.policy,
            next_offset=next_offset,
            sync_state_set=self._keeper.sync_state_set(),
            slave_acks=self.counted_acks(),
        )
        if status is AckStatus.OK:
            return AckStatus.OK
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AckStatus] = loop.create_future()
        bisect.insort(self._waiters, (next_offset, next(self._seq), future))
        # A timer on the future itself (cheaper than wait_for, which runs once per put).
        timer = loop.call_later(self._slave_timeout_s, _expire, future)
        try:
            return await future
        finally:
            timer.cancel()

    def check_waiters(self) -> None:
        """Wake the puts whose replicas caught up. Satisfaction is monotonic in the offset, so walk
        from the lowest and stop at the first that must keep waiting."""
        waiters = self._waiters
        if not waiters:
            return
        if not self._role.is_master:
            self.fail_waiters()
            return
        sss = self._keeper.sync_state_set()
        acks = self.counted_acks()
        done = 0
        for next_offset, _, future in waiters:
            if future.done():
                done += 1
                continue
            status = replica_ack_status(
                self.policy, next_offset=next_offset, sync_state_set=sss, slave_acks=acks
            )
            if status is not AckStatus.OK:
                break
            future.set_result(AckStatus.OK)
            done += 1
        del waiters[:done]

    def fail_waiters(self) -> None:
        for _, _, future in self._waiters:
            if not future.done():
                future.set_result(AckStatus.FLUSH_SLAVE_TIMEOUT)
        self._waiters.clear()
