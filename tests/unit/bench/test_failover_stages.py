"""Failover stages from recorded history (no IO)."""

from __future__ import annotations

from datetime import datetime

import pytest

from mqha.bench.failover import History, cycle_stages, detection_times


def test_detection_times_match_only_the_group() -> None:
    lines = [
        "2025-01-02 03:04:05,120 INFO c: electing a new master for broker-a (master 1 inactive)",
        "2025-01-02 03:04:05,130 INFO c: electing a new master for broker-b (master 1 inactive)",
        "2025-01-02 03:04:06,000 INFO c: broker broker-a/2 (127.0.0.1:1) missed its heartbeat "
        "timeout of 1500 ms",
        "no timestamp: electing a new master for broker-a (x)",
    ]
    base = datetime(2025, 1, 2, 3, 4, 5).timestamp() * 1000
    assert [t - base for t in detection_times(lines, "broker-a")] == pytest.approx([120.0, 1000.0])


def test_cycle_stages_follow_the_new_epoch() -> None:
    history = History(
        detections=[900.0, 1006.0],
        elections=[(500, 2), (1008, 3), (1008, 3), (1500, 4)],
        roles=[(400, 2), (1012, 3)],
        acks=[(999, 2), (1010, 2), (1017, 3), (1020, 3)],
    )
    stages = cycle_stages(1000, 2, history)
    assert stages == pytest.approx(
        {"detection": 0.006, "election": 0.008, "ready": 0.012, "rerouted": 0.017, "new_epoch": 3}
    )


def test_cycle_stages_without_an_election_are_unknown() -> None:
    history = History(detections=[], elections=[(500, 2)], roles=[], acks=[])
    assert cycle_stages(1000, 2, history) == {
        "detection": None,
        "election": None,
        "ready": None,
        "rerouted": None,
    }
