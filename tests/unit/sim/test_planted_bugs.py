"""Every bug the simulator can express is caught within seconds, and the same runs pass without it.

The planted bugs of ``mqha.testing.planted_bugs`` and the bugs found the slow way (``mqha.sim.bugs``:
the master that resumed its epoch, 5d8df79; issue 25's learner acks and unreported lossy recovery);
``CAUGHT_AT`` is the first seed of a hunt from 0 that catches each (``mqha.sim.hunt``). A hunt starts
there and may go on a few seeds, so that a change of the cores that moves the interleavings does not
fail the test for the seed alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from mqha.sim.bugs import EXPRESSED, NOT_EXPRESSED, REPLAYED
from mqha.sim.hunt import PLANTS, hunt, simulation
from mqha.testing.planted_bugs import PLANTED

CAUGHT_AT = {
    "ack-before-replication": 1,
    "stale-leader": 9,  # the #7017 topology
    "ack-before-fsync": 2,
    "any-claim-stands": 4,
    "full-disk-put-ok": 4,
    "resumed-epoch": 1,  # 5d8df79
    "learner-acks": 20,  # issue 25
    "recovery-unreported": 6,  # issue 25
}


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.disable(logging.CRITICAL)  # the cores log every refusal the faults provoke
    yield
    logging.disable(logging.NOTSET)


def test_every_planted_bug_is_expressed_or_said_why_not() -> None:
    assert set(EXPRESSED) | set(NOT_EXPRESSED) == set(PLANTED)
    assert set(PLANTS) == set(EXPRESSED) | set(REPLAYED)


@pytest.mark.parametrize("bug", sorted(CAUGHT_AT))
def test_a_planted_bug_is_caught(bug: str) -> None:
    caught = hunt(bug, first=CAUGHT_AT[bug], max_seeds=10)
    assert caught.seed is not None, f"{bug} not caught in seeds {CAUGHT_AT[bug]}..+10"


@pytest.mark.parametrize("bug", sorted(CAUGHT_AT))
def test_the_same_run_holds_on_the_production_code(bug: str) -> None:
    outcome = simulation(CAUGHT_AT[bug], bug, planted=False).run()
    assert outcome.ok, outcome.violation


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(PLANTS))
def test_a_hunt_from_seed_zero_catches_every_bug(bug: str) -> None:
    caught = hunt(bug, max_seeds=300, budget_s=600)
    assert caught.seed is not None, f"{bug}: not caught in {caught.seeds_run} seeds"
