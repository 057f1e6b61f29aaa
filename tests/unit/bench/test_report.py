"""Benchmark report core: percentiles, ratios, targets, tables (no IO)."""

from __future__ import annotations

import pytest

from mqha.bench.report import Outcome, Target, fmt, format_table, percentile, ratio, summarize


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 1.0) == 100.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.5) is None


def test_summarize_reports_milliseconds() -> None:
    s = summarize([0.001, 0.002, 0.003, 0.004])
    assert s == {"n": 4, "p50_ms": 2.0, "p99_ms": 4.0, "max_ms": 4.0}
    assert summarize([]) == {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}


def test_ratio_is_none_when_a_side_is_missing() -> None:
    assert ratio(3.0, 2.0) == pytest.approx(1.5)
    assert ratio(None, 2.0) is None
    assert ratio(3.0, None) is None
    assert ratio(3.0, 0.0) is None


def test_target_verdicts() -> None:
    assert Target("tput", 1.2, 1.0, at_least=True).verdict == "met"
    assert Target("tput", 0.61, 1.0, at_least=True).verdict == "missed by 39%"
    assert Target("p50", 3.0, 2.0, at_least=False).verdict == "missed by 50%"
    assert Target("p50", 1.5, 2.0, at_least=False).met is True
    missing = Target("p50", None, 2.0, at_least=False)
    assert missing.met is None and missing.verdict == "not measured"
    assert Target("p50 s", 0.5, 1.0, at_least=False, unit=" s").row() == ("p50 s", "<= 1 s", "0.50 s", "met")


def test_fmt_and_table() -> None:
    assert fmt(None) == "-"
    assert fmt(32) == "32"
    assert fmt(1.234, ".2f", " ms") == "1.23 ms"
    table = format_table("title", ("a", "bb"), [(1, 2.25), ("x", None)])
    assert table.splitlines() == [
        "title",
        "",
        "| a | bb  |",
        "|---|-----|",
        "| 1 | 2.2 |",
        "| x | -   |",
    ]


def test_outcome_text_and_json_carry_targets() -> None:
    target = Target("tput", 0.5, 1.0, at_least=True)
    outcome = Outcome("x", ["table"], [target], {"figure": 1})
    assert outcome.text().startswith("table\n\nx: targets")
    assert outcome.as_json()["targets"][0]["verdict"] == "missed by 50%"
