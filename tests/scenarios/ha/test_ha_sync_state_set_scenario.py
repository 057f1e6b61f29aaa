"""A master with two slaves: the events of its HA connections drive the SyncStateSet and put acks
(docs/reference-behaviour.md §10.4, §10.5, §14, §15), wired the way the broker shell will wire them."""

from mqha.autoswitch_ha.ack import (
    AckPolicy,
    AckStatus,
    check_in_sync_replicas,
    compute_confirm_offset,
    master_confirm_offset,
    replica_ack_status,
)
from mqha.autoswitch_ha.events import CaughtUp, ConnectionClosed, SlaveAck
from mqha.autoswitch_ha.sync_state_set import InSyncState
from tests.scenarios.ha.harness import Pair, Replica

ALL_ACK = AckPolicy(all_ack_in_sync_state_set=True, min_in_sync_replicas=1)


class MasterShell:
    """The bits of the broker's master side this scenario needs: SSS state, acks, confirmOffset."""

    def __init__(self, log: Replica) -> None:
        self.log = log
        self.sss = InSyncState.for_master(log.broker_id, {log.broker_id})
        self.acks: dict[int, int] = {}
        self.confirm = -1
        self.proposals: list[frozenset[int]] = []
        self.seen: dict[int, int] = {}  # events already consumed per pair

    def computed(self) -> int:
        return compute_confirm_offset(
            master_max_offset=self.log.max_offset,
            sync_state_set=self.sss.sync_state_set,
            local_id=self.log.broker_id,
            slave_acks=self.acks,
            stored_confirm_offset=self.confirm,
        )

    def confirm_offset(self) -> int:
        """What the store reports (getConfirmOffset, docs/reference-behaviour.md §14)."""
        return master_confirm_offset(
            all_ack_in_sync_state_set=True,
            local_sync_state_set=self.sss.local_set,
            master_max_offset=self.log.max_offset,
            stored_confirm_offset=self.confirm,
            computed_confirm_offset=self.computed(),
        )

    def absorb(self, pair: Pair) -> None:
        """Consume the master-side events a pair produced since the last call."""
        start = self.seen.get(id(pair), 0)
        for event in pair.master_events[start:]:
            if isinstance(event, CaughtUp):
                self.sss = self.sss.with_caught_up(event.slave_id, event.at_ms, event.incarnation)
            elif isinstance(event, SlaveAck):
                self.acks[event.slave_id] = event.offset
                if event.slave_id in self.sss.local_set:
                    self.confirm = self.computed()  # recomputed on acks of local members (§10.5)
                self.sss, proposal = self.sss.maybe_expand(
                    event.slave_id,
                    event.offset,
                    incarnation=event.incarnation,
                    confirm_offset=self.confirm_offset(),
                    last_epoch_start_offset=self.log.epochs.last().start_offset,
                    async_learner=event.async_learner,
                )
                self._propose(proposal)
            elif isinstance(event, ConnectionClosed) and pair.m.slave_id is not None:
                self.acks.pop(pair.m.slave_id, None)
                self.sss, proposal = self.sss.on_connection_lost(pair.m.slave_id)
                self._propose(proposal)
        self.seen[id(pair)] = len(pair.master_events)

    def _propose(self, proposal: frozenset[int] | None) -> None:
        if proposal is not None and (not self.proposals or self.proposals[-1] != proposal):
            self.proposals.append(proposal)

    def controller_confirms(self) -> None:
        self.sss = self.sss.with_confirmed_set(self.proposals[-1])
        self.confirm = self.computed()  # and on setSyncStateSet

    def put_status(self) -> AckStatus:
        return replica_ack_status(
            ALL_ACK,
            next_offset=self.log.max_offset,
            sync_state_set=self.sss.sync_state_set,
            slave_acks=self.acks,
        )


def test_slaves_join_as_they_catch_up_and_leave_when_their_connection_drops() -> None:
    a, b, c = Replica("a", 1), Replica("b", 2), Replica("c", 3)
    a.become_master(1)
    shell = MasterShell(a)
    assert check_in_sync_replicas(ALL_ACK, shell.sss.in_sync_replicas_nums) is AckStatus.OK
    a.write(10)
    assert shell.put_status() is AckStatus.OK  # alone in the set: the master's write is enough

    # b connects and catches up: with a one-member set the confirm offset is the max offset (§14), so
    # b joins once it acked everything.
    ab = Pair(a, b).pump()
    shell.absorb(ab)
    assert shell.proposals == [{1, 2}]
    assert shell.sss.sync_state_set == {1, 2} and shell.sss.in_sync_replicas_nums == 2
    shell.controller_confirms()
    assert shell.confirm == 1000

    # a put now waits for b's ack
    a.write(1)
    assert shell.put_status() is AckStatus.WAIT
    ab.refresh()
    ab.pump()
    shell.absorb(ab)
    assert shell.put_status() is AckStatus.OK and shell.confirm == 1100

    # c catches up; while its expansion is in flight the union {1,2,3} must ack
    ac = Pair(a, c).pump()
    shell.absorb(ac)
    assert shell.proposals[-1] == {1, 2, 3} and shell.sss.is_synchronizing
    a.write(1)
    for pair in (ab,):
        pair.refresh()
        pair.pump()
        shell.absorb(pair)
    assert shell.put_status() is AckStatus.WAIT  # c has not acked 1200 yet
    ac.refresh()
    ac.pump()
    shell.absorb(ac)
    assert shell.put_status() is AckStatus.OK
    shell.controller_confirms()
    assert shell.sss.local_set == {1, 2, 3} and shell.confirm == 1200

    # c's connection drops: an immediate shrink proposal, but puts keep waiting on c until confirmed
    ac.cut()
    shell.absorb(ac)
    assert shell.proposals[-1] == {1, 2}
    a.write(1)
    ab.refresh()
    ab.pump()
    shell.absorb(ab)
    assert shell.put_status() is AckStatus.WAIT
    assert shell.confirm_offset() == 1200  # a member without a connection holds confirmOffset
    shell.controller_confirms()
    assert shell.put_status() is AckStatus.OK and shell.confirm == 1300


def test_periodic_shrink_drops_a_connected_slave_that_stopped_catching_up() -> None:
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    shell = MasterShell(a)
    ab = Pair(a, b).pump()
    shell.absorb(ab)
    shell.controller_confirms()
    assert shell.sss.local_set == {1, 2}
    for now in range(1_000, 10_001, 1_000):  # idle and caught up: the master keeps recording it
        ab.tick(now)
        ab.pump()
    shell.absorb(ab)
    assert shell.sss.caught_up_ms[2] == 10_000
    assert shell.sss.maybe_shrink(now_ms=25_000) == (shell.sss, None)
    sss, proposal = shell.sss.maybe_shrink(now_ms=25_001)  # 15 s without catching up
    assert proposal == {1} and sss.sync_state_set == {1, 2}
