"""Random failovers, zombie writes and partial replication across three replicas (docs/reference-behaviour.md
§11, §13).

Hypothesis drives elections (clean: the most advanced replica by last epoch then max offset, as
the controller's policy would pick; unclean: the second or third in that ranking), writes (by the
master, or by a deposed master never told, leaving unreplicated tails) and syncs of a replica with
the current master, some cut after a few round trips. Every handshake must cut the replica exactly
at the longest prefix it shares byte for byte with the master (never keep a foreign byte, never
drop a shared one); after every sync the replica holds exactly the master's bytes and epochs over
its range; a failed handshake (docs/reference-behaviour.md §13 case D) happens only when nothing is shared,
and is repaired by wiping the replica. At the end every replica converges to the master.
"""

from dataclasses import dataclass

from hypothesis import event, given, settings
from hypothesis import strategies as st

from mqha.autoswitch_ha.events import ResetLog
from mqha.autoswitch_ha.master import MasterConfig
from mqha.autoswitch_ha.slave import decide_truncation
from mqha.autoswitch_ha.state import ERROR
from tests.scenarios.ha.harness import Pair, Replica, assert_replica_of

REPLICAS = 3


@dataclass(frozen=True)
class Elect:
    rank: int  # 0: the most advanced replica wins (clean); 1, 2: a less advanced one (unclean)


@dataclass(frozen=True)
class Write:
    zombie: bool  # False: the current master writes; True: a deposed master that was never told
    count: int
    size: int


@dataclass(frozen=True)
class Sync:
    replica: int
    rounds: int | None  # None: until idle; else cut after that many round trips
    batch_size: int


replica_ids = st.integers(0, REPLICAS - 1)


def operations(clean_only: bool) -> st.SearchStrategy[list]:
    elect = st.builds(Elect, st.just(0) if clean_only else replica_ids)
    write = st.builds(Write, st.booleans(), st.integers(1, 6), st.integers(5, 300))
    sync = st.builds(Sync, replica_ids, st.none() | st.integers(0, 5), st.integers(1, 1200))
    # Writes and syncs outnumber elections, so epochs carry data and replicas overlap before failing over.
    return st.lists(st.one_of(elect, write, write, sync, sync), min_size=5, max_size=40)


class Cluster:
    def __init__(self) -> None:
        self.replicas = [Replica(f"r{i}", i + 1) for i in range(REPLICAS)]
        self.believes_master = [False] * REPLICAS
        self.master: int | None = None
        self.epoch = 0
        self.wipes = 0
        self.resets = 0

    def elect(self, op: Elect) -> None:
        # The controller's ranking: last epoch, then max offset, then the lower id (docs/architecture.md §7).
        ranked = sorted(
            range(REPLICAS),
            key=lambda i: (-self.replicas[i].epochs.last_epoch(), -self.replicas[i].max_offset, i),
        )
        winner = ranked[op.rank]
        self.epoch += 1
        self.replicas[winner].become_master(self.epoch)
        self.master = winner
        self.believes_master[winner] = True

    def write(self, op: Write) -> None:
        if op.zombie:
            writers = [i for i in range(REPLICAS) if self.believes_master[i] and i != self.master]
        else:
            writers = [] if self.master is None else [self.master]
        for writer in writers[:1]:
            self.replicas[writer].write(op.count, op.size)

    def sync(self, replica: int, rounds: int | None, batch_size: int) -> None:
        if self.master is None or replica == self.master:
            return
        master, slave = self.replicas[self.master], self.replicas[replica]
        self.believes_master[replica] = False  # changeToSlave
        local, local_max, local_min = slave.epochs, slave.max_offset, slave.min_offset
        cuts = len(slave.truncations)
        agreed = common_prefix(slave, master)
        pair = Pair(master, slave, master_config=MasterConfig(transfer_batch_size=batch_size))
        if rounds is None:
            pair.pump()
        else:
            for _ in range(rounds):
                pair.step()
            pair.cut()
        if pair.s.state is ERROR and pair.truncation is None:
            # Only a genuine divergence may fail a handshake (docs/reference-behaviour.md §13 case D); repair
            # by hand.
            assert decide_truncation(local, local_max, master.epochs, master.max_offset, local_min) is None
            event(f"handshake failed, common prefix {'empty' if agreed == 0 else 'not empty'}")
            slave.wipe()
            self.wipes += 1
            event("handshake failed: no consistent point")
            return
        assert not [c for c in pair.closed if c.error is not None], pair.closed
        if any(isinstance(e, ResetLog) for e in pair.slave_events):
            # No consistent point: the replica emptied itself and re-synced from the master's log start
            # (docs/architecture.md §4, "A slave with no consistent point").
            decision = decide_truncation(local, local_max, master.epochs, master.max_offset, local_min)
            assert decision is not None and decision.reset
            self.resets += 1
            event("no consistent point: emptied and re-synced")
            assert_replica_of(slave, master)
            return
        if pair.truncation is not None:  # cut before the handshake finished: the replica is untouched
            # Safety: never keep a byte the master does not hold; and cut nothing the logs share.
            assert pair.truncation.offset == agreed, (pair.truncation, agreed)
            assert_replica_of(slave, master)
            if len(slave.truncations) > cuts:
                event("handshake cut data")

    def converge(self) -> None:
        if self.master is None:
            self.elect(Elect(0))
        for replica in range(REPLICAS):
            self.sync(replica, None, 4096)
            if (
                replica != self.master
                and not self.replicas[replica].epochs
                and self.replicas[replica].max_offset == 0
            ):
                self.sync(replica, None, 4096)  # after a wipe
        master = self.replicas[self.master]
        for replica in self.replicas:
            if replica is not master:
                assert replica.messages == master.messages, f"{replica.name} did not converge"
                assert_replica_of(replica, master)


def common_prefix(slave: Replica, master: Replica) -> int:
    """The end of the longest prefix of ``slave``'s log that ``master`` holds byte for byte."""
    end = slave.min_offset
    for offset in sorted(slave.messages):
        if master.messages.get(offset) != slave.messages[offset]:
            break
        end = offset + len(slave.messages[offset])
    return end


def run(ops: list) -> Cluster:
    cluster = Cluster()
    for op in ops:
        if isinstance(op, Elect):
            cluster.elect(op)
        elif isinstance(op, Write):
            cluster.write(op)
        else:
            cluster.sync(op.replica, op.rounds, op.batch_size)
    cluster.converge()
    return cluster


@settings(max_examples=150, deadline=None)
@given(operations(clean_only=False))
def test_any_failover_history_converges_to_the_master(ops) -> None:
    run(ops)


@settings(max_examples=150, deadline=None)
@given(operations(clean_only=True))
def test_clean_elections_never_need_a_manual_repair(ops) -> None:
    cluster = run(ops)
    assert cluster.wipes == 0 and cluster.resets == 0
