"""``drops_for``: what a raft or asym partition drops among the controllers."""

from __future__ import annotations

import pytest

from mqha.chaos.controller_network import CLIENTS, drops_for
from mqha.chaos.netfilter import Drop
from mqha.chaos.schedule import (
    ASYM_PARTITION,
    CLIENT_PARTITION,
    CONTROLLER,
    CONTROLLER_BRIDGE,
    CONTROLLER_LEADER,
    IN,
    KILL,
    MASTER,
    OUT,
    RAFT_LOSS,
    RAFT_PARTITION,
    WITH_LEADER,
    FaultStep,
)
from mqha.chaos.schedule import CONTROLLERS as ALL

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


def test_raft_loss_drops_80_percent_between_the_hit_controller_and_the_others() -> None:
    lossy = FaultStep(1, RAFT_LOSS, CONTROLLER_LEADER, 3.0, 1.0, fraction=0.8)
    drops = drops_for(lossy, ["n0"], CONTROLLERS)
    assert set(drops) == {Drop(a, b, 80) for a, b in (("n0", "n1"), ("n1", "n0"), ("n0", "n2"), ("n2", "n0"))}
    everywhere = drops_for(
        FaultStep(1, RAFT_LOSS, ALL, 3.0, 1.0, fraction=0.8), list(CONTROLLERS), CONTROLLERS
    )
    assert len(everywhere) == 6 and all(d.percent == 80 for d in everywhere)


def test_a_client_partition_keeps_the_clients_with_the_old_master_and_one_controller() -> None:
    step_ = FaultStep(1, CLIENT_PARTITION, MASTER, 3.0, 1.0, links=WITH_LEADER, group="a")
    drops = set(drops_for(step_, ["a-0", "n1"], CONTROLLERS, ("a-0", "a-1", "a-2", "b-0")))
    cut = {"a-1", "a-2", "b-0", "n0", "n2"}
    assert {d.receiver for d in drops if d.sender == CLIENTS} == cut
    assert {d.sender for d in drops if d.receiver == CLIENTS} == cut
    assert {(d.sender, d.receiver) for d in drops if CLIENTS not in (d.sender, d.receiver)} == {
        ("n1", "n0"),
        ("n0", "n1"),
        ("n1", "n2"),
        ("n2", "n1"),
    }
    assert all(d.percent == 100 for d in drops)
