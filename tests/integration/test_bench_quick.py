"""``mqha bench all --quick`` end to end: every benchmark prints its table and writes its JSON (``auth``
included: its authentication-on side must be accepted everywhere).

A smoke test (figures are printed, never asserted); the etcd side may be skipped when the package
cannot be fetched, and the run says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqha.bench.cli import NAMES

# Every benchmark once with tiny loads: 60-240 s of real clusters, so it is one of the slow runs
# (`pytest -m slow`), not in the default test run (the brief: benchmarks behind a marker).
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_bench_all_quick_prints_tables_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    mqha = Path(sys.executable).with_name("mqha")
    run = subprocess.run(
        [str(mqha), "bench", "all", "--quick", "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "MQHA_BENCH_DIR": str(tmp_path)},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["quick"] is True
    for name in NAMES:
        assert name in results, name
        assert f"{name}: targets" in run.stdout
        assert results[name]["targets"], name
    assert "| clients | ours ops/s | etcd ops/s |" in run.stdout
    assert results["controller"]["etcd_skipped"] or results["controller"]["etcd"]["32"]["ops_per_s"] > 0
    # Authentication on: the signed, token-bearing and Basic requests were all accepted.
    assert "| workload | clients | off ops/s | on ops/s |" in run.stdout
    auth = results["auth"]
    refusals = [
        kind
        for figures in (*auth["controller"].values(), {"put": auth["put"]["on"]})
        for by_round in figures.values()
        for round_ in by_round["rounds"]
        for kind in round_["errors"]
        if kind in ("NO_PERMISSION", "None")
    ]
    assert not refusals, refusals
    assert auth["catch_up"]["on"]["backlog_bytes"] > 0
