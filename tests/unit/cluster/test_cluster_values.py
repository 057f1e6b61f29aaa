"""Cluster and demo cores: names, the status table, recovery statistics, CLI settings (no IO)."""

from __future__ import annotations

import pytest

from mqha.cluster.checking import analysis_lines
from mqha.cluster.commands import _settings
from mqha.cluster.demo import _bar
from mqha.cluster.failover import Distribution, ms
from mqha.cluster.nodes import NodeStatus, format_status_table, group_names


def test_group_names_follow_rocketmq_samples() -> None:
    assert group_names(3) == ["broker-a", "broker-b", "broker-c"]
    assert group_names(28)[-2:] == ["broker-aa", "broker-ab"]


def test_status_table_shows_roles_offsets_and_down_nodes() -> None:
    table = format_status_table(
        [
            NodeStatus("n0", "controller", "127.0.0.1:1", 11, "running", "LEADER"),
            NodeStatus(
                "broker-a-0",
                "broker",
                "127.0.0.1:2",
                12,
                "running",
                "MASTER",
                group="broker-a",
                broker_id=1,
                master_epoch=3,
                max_offset=900,
                confirm_offset=800,
                sync_state_set=(1, 2),
            ),
            NodeStatus("broker-a-1", "broker", "127.0.0.1:3", None, "down", "-", group="broker-a"),
            NodeStatus("broker-a-2", "broker", "127.0.0.1:4", 14, "paused", "-", group="broker-a"),
        ]
    )
    lines = table.splitlines()
    assert lines[0].split() == [
        "NODE",
        "ROLE",
        "CTRL_ID",
        "EPOCH",
        "MAX_OFFSET",
        "CONFIRM",
        "SYNC_STATE_SET",
        "ADDRESS",
        "PID",
    ]
    assert lines[1].split() == ["n0", "LEADER", "-", "-", "-", "-", "-", "127.0.0.1:1", "11"]
    assert lines[2].split() == ["broker-a-0", "MASTER", "1", "3", "900", "800", "{1,2}", "127.0.0.1:2", "12"]
    assert lines[3].split()[:2] == ["broker-a-1", "DOWN"]
    assert lines[4].split()[:2] == ["broker-a-2", "PAUSED"]


def test_distribution_summary_and_histogram() -> None:
    dist = Distribution((0.012, 0.030, 0.025, 0.8, 0.031))
    assert dist.median == 0.030
    assert dist.maximum == 0.8
    assert dist.minimum == 0.012
    assert dist.percentile(100) == 0.8
    assert dist.summary() == "n=5  min 12 ms  median 30 ms  p90 800 ms  max 800 ms"
    histogram = dist.histogram(width=10)
    assert [line.split("|")[1].split()[-1] for line in histogram] == ["1", "3", "1"]
    assert histogram[1].strip().startswith("20 ms-50 ms")


def test_ms_formatting() -> None:
    assert ms(0.0042) == "4.2 ms"
    assert ms(0.25) == "250 ms"


def test_progress_bar_is_clamped() -> None:
    assert _bar(0.5, width=4) == "[##..]"
    assert _bar(3.0, width=4) == "[####]"
    assert _bar(-1.0, width=2) == "[..]"


def test_analysis_lines_keep_verdict_and_invariants_only() -> None:
    text = "\n".join(
        [
            "WARNING: Using incubator modules",
            "26/11/22 WARN NativeCodeLoader: ...",
            "mqha analyze: OK -- every invariant holds",
            "tables: acks=3",
            "  lost_ack               ok -- ...",
            "  duplicate              counted 1 (not a failure)",
            "      brokerName=broker-a, msgId=X, offsets=[1, 2]",
            "INFO py4j.clientserver: Closing down clientserver connection",
        ]
    )
    assert analysis_lines(text) == [
        "mqha analyze: OK -- every invariant holds",
        "tables: acks=3",
        "  lost_ack               ok -- ...",
        "  duplicate              counted 1 (not a failure)",
    ]


def test_cli_settings() -> None:
    assert _settings(["a=1", " b = x=y "], "--broker-set") == {"a": "1", "b": "x=y"}
    with pytest.raises(SystemExit, match="key=value"):
        _settings(["novalue"], "--broker-set")
