"""Invariants of the epoch core (docs/reference-behaviour.md §12, §13): truncation safety, determinism, codec
round trip.

Truncation safety needs histories that real replicas can hold: for arbitrary histories one epoch may
carry two different start offsets (docs/reference-behaviour.md §13 case D), and then no truncation can make
them agree. So those properties run a small simulated broker set: elections (clean or not) append epochs,
masters (including deposed ones that have not noticed yet) write, and slaves handshake with the current
master exactly as docs/reference-behaviour.md §13 says, through ``find_consistent_point``. Every byte is
labelled with the epoch and offset it was written at, so "the logs agree" is checked on data, not only on
histories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.epoch.codec import decode_epoch_file, encode_epoch_file
from mqha.epoch.history import EpochHistory, find_consistent_point
from mqha.errors import MqhaError
from mqha.ids import MAX_OFFSET
from tests.strategies import (
    EPOCH_SIM_REPLICAS,
    EpochSimElect,
    EpochSimOperation,
    EpochSimSync,
    EpochSimWrite,
    epoch_append_calls,
    epoch_histories,
    epoch_sim_operations,
)

# -- the simulated broker set -------------------------------------------------------------


@dataclass
class Replica:
    history: EpochHistory = field(default_factory=EpochHistory)
    log: list[tuple[int, int]] = field(default_factory=list)
    """One label per byte: (epoch that wrote it, offset it was written at)."""
    believes_master: bool = False

    @property
    def max_offset(self) -> int:
        return len(self.log)

    def closed_history(self) -> EpochHistory:
        # docs/reference-behaviour.md §13 step 2: the last entry ends at the replica's max offset.
        return self.history.with_last_end(self.max_offset)


@dataclass
class Handshake:
    local: EpochHistory
    remote: EpochHistory
    local_log: list[tuple[int, int]]
    remote_log: list[tuple[int, int]]
    point: int | None


@dataclass
class BrokerSet:
    replicas: list[Replica] = field(default_factory=lambda: [Replica() for _ in range(EPOCH_SIM_REPLICAS)])
    epoch: int = 0
    master: int | None = None
    handshakes: list[Handshake] = field(default_factory=list)

    def run(self, operations: list[EpochSimOperation]) -> None:
        # A healthy start (every replica holding epoch 1's first bytes) keeps most runs from
        # degenerating into failovers to empty replicas, which no handshake can fix.
        bootstrap: list[EpochSimOperation] = [EpochSimElect(0, clean=False), EpochSimWrite(0, 10)]
        bootstrap += [EpochSimSync(i, 1.0) for i in range(1, len(self.replicas))]
        for operation in bootstrap + operations:
            match operation:
                case EpochSimElect(replica, clean):
                    self.elect(self.failover_candidate() if clean else replica)
                case EpochSimWrite(replica, length):
                    self.write(replica, length)
                case EpochSimSync(replica, fraction):
                    self.sync(replica, fraction)
            for replica in self.replicas:
                assert_history_describes_log(replica)

    def failover_candidate(self) -> int:
        def rank(index: int) -> tuple[int, int, int]:
            replica = self.replicas[index]
            return (replica.history.last_epoch(), replica.max_offset, -index)

        return max((i for i in range(len(self.replicas)) if i != self.master), key=rank)

    def elect(self, index: int) -> None:
        replica = self.replicas[index]
        self.epoch += 1
        replica.history = replica.history.append(self.epoch, replica.max_offset)
        replica.believes_master = True
        self.master = index

    def write(self, index: int, length: int) -> None:
        replica = self.replicas[index]
        if replica.believes_master:
            epoch, start = replica.history.last_epoch(), replica.max_offset
            replica.log.extend((epoch, offset) for offset in range(start, start + length))

    def sync(self, index: int, fraction: float) -> None:
        if self.master is None or self.master == index:
            return
        slave, master = self.replicas[index], self.replicas[self.master]
        local, remote = slave.closed_history(), master.closed_history()
        if not slave.history or slave.max_offset == 0:
            # docs/reference-behaviour.md §13 step 1 (new replica: truncate nothing), widened to any replica
            # without data: by the letter of the spec a deposed master that never wrote, holding only (E, 0),
            # fails every handshake with a master whose history lacks E.
            point: int | None = 0
        else:
            point = find_consistent_point(local, remote)
        self.handshakes.append(Handshake(local, remote, list(slave.log), list(master.log), point))
        if point is None:
            # docs/reference-behaviour.md §13 step 3: the handshake fails and is retried; nothing changes
            return
        slave.believes_master = False
        slave.log = slave.log[:point]
        slave.history = slave.history.truncate_suffix_by_offset(point)
        until = point + round(fraction * (master.max_offset - point))
        slave.log.extend(master.log[point:until])
        for entry in master.history:
            if point <= entry.start_offset < until:
                slave.history = slave.history.append(entry.epoch, entry.start_offset)


def assert_history_describes_log(replica: Replica) -> None:
    """Every byte of the log lies in the history entry of the epoch that wrote it."""
    for offset, (epoch, _) in enumerate(replica.log):
        entry = replica.history.find_by_offset(offset)
        assert entry is not None and entry.epoch == epoch, (offset, epoch, replica.history)


def cut_at(history: EpochHistory, point: int) -> EpochHistory:
    return history.truncate_suffix_by_offset(point).with_last_end(point)


# -- truncation safety (docs/reference-behaviour.md §13)
# ----------------------------------------------------------


@settings(deadline=None, max_examples=300)
@given(epoch_sim_operations())
def test_truncating_both_at_the_consistent_point_leaves_agreeing_histories_spec_13(
    operations: list[EpochSimOperation],
) -> None:
    broker_set = BrokerSet()
    broker_set.run(operations)
    for handshake in broker_set.handshakes:
        if handshake.point is None:
            continue
        point = handshake.point
        assert point <= min(len(handshake.local_log), len(handshake.remote_log))
        local, remote = cut_at(handshake.local, point), cut_at(handshake.remote, point)
        shared = {e.epoch for e in local} & {e.epoch for e in remote}
        for epoch in shared:
            assert local.find_by_epoch(epoch) == remote.find_by_epoch(epoch), (epoch, local, remote)
        # Stronger, and true for histories real replicas hold: the cut histories are identical.
        assert local == remote
        # The point of it all: the bytes below the point are the same bytes on both replicas.
        assert handshake.local_log[:point] == handshake.remote_log[:point]


@settings(deadline=None, max_examples=300)
@given(epoch_sim_operations())
def test_replicas_sharing_an_epoch_hold_the_same_bytes_in_it_spec_13(
    operations: list[EpochSimOperation],
) -> None:
    broker_set = BrokerSet()
    broker_set.run(operations)
    replicas = broker_set.replicas
    for a in replicas:
        for b in replicas:
            point = find_consistent_point(a.closed_history(), b.closed_history())
            if point is not None:
                assert a.log[:point] == b.log[:point]


@given(epoch_histories(), epoch_histories())
def test_consistent_point_cut_makes_the_matched_epoch_the_common_last_entry_spec_12_2(
    local: EpochHistory, remote: EpochHistory
) -> None:
    # Holds for any two histories, realistic or not.
    point = find_consistent_point(local, remote)
    if point is None:
        assert all(
            (other := remote.find_by_epoch(e.epoch)) is None or other.start_offset != e.start_offset
            for e in local
        )
        return
    local_cut, remote_cut = cut_at(local, point), cut_at(remote, point)
    if local_cut and remote_cut:
        assert local_cut.last() == remote_cut.last()
        assert local_cut.last().end_offset == point  # type: ignore[union-attr]


@given(epoch_histories(closed=True))
def test_a_history_is_consistent_with_itself_up_to_its_end_spec_12_2(history: EpochHistory) -> None:
    last = history.last()
    expected = None if last is None else last.end_offset
    assert find_consistent_point(history, history) == expected


# -- append ---------------------------------------------------------------------------------


def replay(calls: list[tuple[int, int]]) -> tuple[EpochHistory, list[str]]:
    history, outcomes = EpochHistory(), []
    for epoch, start in calls:
        try:
            history = history.append(epoch, start)
            outcomes.append("ok")
        except MqhaError as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
    return history, outcomes


@given(epoch_append_calls())
def test_replaying_the_same_appends_is_deterministic_spec_12_2(calls: list[tuple[int, int]]) -> None:
    assert replay(calls) == replay(list(calls))


@given(epoch_append_calls())
def test_appended_histories_strictly_increase_in_epoch_and_start_spec_12_2(
    calls: list[tuple[int, int]],
) -> None:
    history = EpochHistory()
    for epoch, start in calls:
        try:
            history = history.append(epoch, start)
        except MqhaError:
            continue
        assert history.last() is not None
        assert (history.last().epoch, history.last().start_offset) == (epoch, start)  # type: ignore[union-attr]
    entries = history.entries
    for before, after in pairwise(entries):
        assert before.epoch < after.epoch
        assert before.start_offset < after.start_offset
        assert before.end_offset == after.start_offset
    assert not entries or entries[-1].end_offset == MAX_OFFSET


# -- truncation against a naive model ------------------------------------------------------


@given(epoch_histories(), st.integers(-1, 5_000))
def test_truncations_match_their_definitions_spec_12_2(history: EpochHistory, value: int) -> None:
    pairs = history.pairs()
    assert history.truncate_suffix_by_offset(value).pairs() == [p for p in pairs if p[1] < value]
    assert history.truncate_suffix_by_epoch(value).pairs() == [p for p in pairs if p[0] < value]
    kept = [e for e in history.entries[:-1] if e.end_offset > value] + list(history.entries[-1:])
    assert history.truncate_prefix_by_offset(value).entries == tuple(kept)
    for cut in (history.truncate_suffix_by_offset(value), history.truncate_suffix_by_epoch(value)):
        assert not cut or cut.last().end_offset == MAX_OFFSET  # type: ignore[union-attr]


@given(epoch_histories(), st.integers(0, 5_000))
def test_find_by_offset_matches_a_linear_scan_spec_12_2(history: EpochHistory, offset: int) -> None:
    expected = next((e for e in history if e.start_offset <= offset < e.end_offset), None)
    assert history.find_by_offset(offset) == expected


# -- codec ----------------------------------------------------------------------------------


@given(epoch_histories())
def test_encode_decode_round_trips_the_stored_pairs_spec_12_1(history: EpochHistory) -> None:
    decoded = decode_epoch_file(encode_epoch_file(history), "epochFileCheckpoint")
    # End offsets are not stored: the decoded last entry is open again.
    assert decoded == EpochHistory.from_pairs(history.pairs())
    assert encode_epoch_file(decoded) == encode_epoch_file(history)
