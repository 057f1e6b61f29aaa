"""``drops_for``: what a raft or asym partition drops among the controllers."""

from __future__ import annotations

import pytest

from mqha.chaos.controller_network import drops_for
from mqha.chaos.netfilter import Drop
from mqha.chaos.schedule import (
    ASYM_PARTITION,
    CONTROLLER,
    CONTROLLER_BRIDGE,
    CONTROLLER_LEADER,
    IN,
    KILL,
    OUT,
    RAFT_PARTITION,
    FaultStep,
)

CONTROLLERS = ("n0", "n1", "n2")


def step(kind: str, target: str, links: str = "") -> FaultStep:
    return FaultStep(1, kind, target, 3.0, 1.0, links=links)


def test_an_isolated_leader_is_cut_both_ways_from_the_others() -> None:
    drops = drops_for(step(RAFT_PARTITION, CONTROLLER_LEADER), ["n1"], CONTROLLERS)
    assert set(drops) == {Drop("n1", "n0"), Drop("n0", "n1"), Drop("n1", "n2"), Drop("n2", "n1")}


def test_a_bridge_keeps_its_links_and_cuts_the_others_from_each_other() -> None:
    drops = drops_for(step(RAFT_PARTITION, CONTROLLER_BRIDGE), ["n1"], CONTROLLERS)
    assert set(drops) == {Drop("n0", "n2"), Drop("n2", "n0")}


def test_an_asymmetric_partition_drops_one_direction() -> None:
    out = drops_for(step(ASYM_PARTITION, CONTROLLER, OUT), ["n2"], CONTROLLERS)
    assert set(out) == {Drop("n2", "n0"), Drop("n2", "n1")}
    into = drops_for(step(ASYM_PARTITION, CONTROLLER, IN), ["n2"], CONTROLLERS)
    assert set(into) == {Drop("n0", "n2"), Drop("n1", "n2")}


def test_other_kinds_are_not_network_faults() -> None:
    with pytest.raises(ValueError):
        drops_for(step(KILL, CONTROLLER), ["n0"], CONTROLLERS)
