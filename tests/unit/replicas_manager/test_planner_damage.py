"""A replica that knows a damaged commit-log record reports itself incomplete (docs/architecture.md §4.7)."""

from __future__ import annotations

from dataclasses import replace

from mqha.replicas_manager import actions as act
from mqha.replicas_manager.hooks import BrokerProgress, BrokerStart
from mqha.replicas_manager.planner import ReplicasPlanner
from tests.unit.replicas_manager.test_planner import CFG, running_master, running_slave

START = BrokerStart("ab" * 16, clean_shutdown=True, lossy_recovery=False, confirm_offset_before_recovery=900)


def planner() -> ReplicasPlanner:
    p = ReplicasPlanner(replace(CFG, start=START))
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 2), None)
    return p


def test_a_damaged_replica_heartbeats_lossy_with_its_log_ending_at_the_damage() -> None:
    p = planner()
    p.on_local_progress(BrokerProgress(last_epoch=3, max_offset=4096, confirm_offset=2048))
    sound = p.heartbeat_request()
    assert (sound.max_offset, sound.lossy_recovery) == (4096, False)
    p.on_local_progress(BrokerProgress(last_epoch=3, max_offset=4096, confirm_offset=2048, damaged_from=1000))
    damaged = p.heartbeat_request()
    assert (damaged.max_offset, damaged.lossy_recovery) == (1000, True)
    assert damaged.confirm_offset == 2048 and damaged.incarnation == START.incarnation
    assert START.lossy_recovery is False  # the start report itself is unchanged
    p.on_local_progress(BrokerProgress(last_epoch=3, max_offset=4096, confirm_offset=2048))
    assert p.heartbeat_request().lossy_recovery is False  # repaired: complete again


def test_a_damage_change_makes_any_role_heartbeat_at_once() -> None:
    for p in (running_slave(), running_master()):
        assert not any(isinstance(a, act.SendHeartbeat) for a in p.tick(1))
        assert p.on_damage_changed(2) == []
        assert any(isinstance(a, act.SendHeartbeat) for a in p.tick(2))
