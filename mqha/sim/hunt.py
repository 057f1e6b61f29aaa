"""Hunting a planted bug: run seeds until the invariants catch it, and say how fast.

``PLANTS`` names, for each bug the model expresses, the faults that expose it (every other fault
rate of the seed's draw is kept): a hunt is a sweep over seeds, as a chaos run's is.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from mqha.sim.bugs import Bugs
from mqha.sim.run import Simulation, choose

_SYNC_ALL_ACK = {"sync_flush": True}

PLANTS: dict[str, dict[str, object]] = {
    "ack-before-replication": {"leader_split": 0.03, "crash": 0.02},
    "stale-leader": {"leader_split": 0.1, "partition": 0.0},
    "ack-before-fsync": {"group_power_loss": 0.02, **_SYNC_ALL_ACK},
    "any-claim-stands": {"clone": 0.02},
    "full-disk-put-ok": {"disk_full": 0.03},
    "resumed-epoch": {"crash": 0.03, "power_loss": 0.02},
    "learner-acks": {"partition": 0.2, "crash": 0.05, "learner": True},
    "recovery-unreported": {"group_power_loss": 0.03, "sync_flush": False},
}
"""Per bug: fault rates raised for its hunt (``sync_flush``/``learner`` force the broker config)."""


@dataclass(frozen=True)
class Caught:
    """How a hunt for one bug ended: the seed that caught it (None: none did), and how long it took."""

    bug: str
    seed: int | None  # None: not caught within the budget
    seeds_run: int
    seconds: float
    violation: str | None


def simulation(seed: int, bug: str | None, *, planted: bool = True) -> Simulation:
    """The run of ``seed`` with ``bug``'s faults raised and the bug planted (``planted=False``: the
    same run on the production code; no bug: the seed as drawn)."""
    if bug is None:
        return Simulation(seed)
    config, faults, learner = choose(seed)
    raised = dict(PLANTS[bug])
    sync_flush = bool(raised.pop("sync_flush", config.sync_flush))
    learner = bool(raised.pop("learner", learner))
    faults = dataclasses.replace(faults, **raised)  # type: ignore[arg-type]
    bugs = Bugs.planted([bug] if planted else [])
    return Simulation(seed, bugs, faults=faults, sync_flush=sync_flush, learner=learner)


def hunt(bug: str, first: int = 0, max_seeds: int = 500, budget_s: float = 60.0) -> Caught:
    started = time.perf_counter()
    for count, seed in enumerate(range(first, first + max_seeds), start=1):
        outcome = simulation(seed, bug).run()
        elapsed = time.perf_counter() - started
        if not outcome.ok:
            return Caught(bug, seed, count, elapsed, outcome.violation)
        if elapsed > budget_s:
            return Caught(bug, None, count, elapsed, None)
    return Caught(bug, None, max_seeds, time.perf_counter() - started, None)
