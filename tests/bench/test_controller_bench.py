"""Controller figures: ``mqha bench controller`` (mqha/bench/controller.py) under pytest.

Run: ``.venv/bin/python -m pytest -m bench -s tests/bench/test_controller_bench.py``
(or ``scripts/bench.sh tests/bench/test_controller_bench.py``). Prints the tables (our 3-node
controller vs a 3-member etcd at 1, 8 and 32 clients, leader kill to next commit) and writes
``bench-results/controller.json``; asserts nothing about speed (targets are reported).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqha.bench import controller

pytestmark = pytest.mark.bench

RESULTS = Path(__file__).resolve().parents[2] / "bench-results" / "controller.json"


def test_controller_vs_etcd(tmp_path: Path) -> None:
    outcome = controller.run(tmp_path, quick=False)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome.as_json(), indent=2) + "\n")
    print("\n" + outcome.text() + f"\n  wrote {RESULTS}")
