"""Shared Hypothesis strategies, grouped by package."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from mqha.epoch.history import EpochHistory

# -- epoch ----------------------------------------------------------------------------------


@st.composite
def epoch_pairs(draw: st.DrawFn, max_size: int = 8) -> list[tuple[int, int]]:
    """Valid ``(epoch, start_offset)`` lists: both strictly increasing, as an epoch file holds."""
    size = draw(st.integers(0, max_size))
    epoch = draw(st.integers(0, 5))
    start = draw(st.integers(0, 1_000))
    pairs = []
    for _ in range(size):
        pairs.append((epoch, start))
        epoch += draw(st.integers(1, 3))
        start += draw(st.integers(1, 500))
    return pairs


@st.composite
def epoch_histories(draw: st.DrawFn, max_size: int = 8, closed: bool | None = None) -> EpochHistory:
    """Valid histories; ``closed`` True/False forces the last entry closed/open, None draws it."""
    history = EpochHistory.from_pairs(draw(epoch_pairs(max_size)))
    last = history.last()
    if last is not None and (closed if closed is not None else draw(st.booleans())):
        history = history.with_last_end(last.start_offset + draw(st.integers(0, 500)))
    return history


def epoch_append_calls(max_size: int = 20) -> st.SearchStrategy[list[tuple[int, int]]]:
    """``(epoch, start)`` append arguments from small ranges, so equal and backward values are common."""
    call = st.tuples(st.integers(0, 8), st.integers(0, 6).map(lambda n: n * 100))
    return st.lists(call, max_size=max_size)


@dataclass(frozen=True)
class EpochSimElect:
    """A replica becomes master of a new epoch.

    ``clean``: a failover; the current master is deemed dead (it may live on as a zombie) and the
    most advanced other replica (highest last epoch, then max offset) wins, as the controller's
    policy would pick. Otherwise ``replica`` wins whatever it holds (unclean election).
    """

    replica: int
    clean: bool


@dataclass(frozen=True)
class EpochSimWrite:
    """Replica ``replica`` appends ``length`` bytes if it believes it is a master (zombies too)."""

    replica: int
    length: int


@dataclass(frozen=True)
class EpochSimSync:
    """Replica ``replica`` handshakes with the current master (docs/reference-behaviour.md §13) and copies
    part of its lead."""

    replica: int
    fraction: float


EPOCH_SIM_REPLICAS = 3


EpochSimOperation = EpochSimElect | EpochSimWrite | EpochSimSync


def epoch_sim_operations(max_size: int = 60) -> st.SearchStrategy[list[EpochSimOperation]]:
    """Operations on ``EPOCH_SIM_REPLICAS`` simulated replicas, driving the epoch property tests."""
    replica = st.integers(0, EPOCH_SIM_REPLICAS - 1)
    elect = st.builds(EpochSimElect, replica, st.booleans())
    write = st.builds(EpochSimWrite, replica, st.integers(1, 50))
    sync = st.builds(EpochSimSync, replica, st.sampled_from([0.0, 0.25, 0.5, 1.0]))
    # Repeated branches weight the draw: elections are rare, replication is frequent.
    operation = st.one_of(elect, write, write, sync, sync, sync)
    return st.lists(operation, max_size=max_size)
