"""When a ``clone`` copy still running fails the run: ``REFUSED_WITHIN`` after it serves (when its
claims begin), not after its spawn -- a loaded machine spends tens of seconds starting it (issue 45's
matrix runs: refused 29.6 s after the spawn at load 40)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import cast

from mqha.chaos.clones import REFUSED_WITHIN, STARTS_WITHIN, Clone
from mqha.cluster.processes import NodeProcess

SPAWNED = datetime.datetime(2026, 12, 7, 21, 58, 0).timestamp()


def _clone(tmp_path: Path, *lines: str) -> Clone:
    (tmp_path / "broker.log").write_text("".join(line + "\n" for line in lines))
    return Clone("broker-a-0", tmp_path, cast(NodeProcess, None), SPAWNED, 20000)


def test_a_copy_that_has_not_served_yet_gets_the_start_up_bound(tmp_path: Path) -> None:
    clone = _clone(tmp_path, "2026-12-07 21:58:20,000 INFO mqha.broker.store: store open: log [0, 506568)")
    assert clone.serving_at() is None
    assert clone.deadline() == SPAWNED + STARTS_WITHIN


def test_a_serving_copy_must_be_refused_within_the_bound_of_its_serving_line(tmp_path: Path) -> None:
    clone = _clone(
        tmp_path,
        "2026-12-07 21:58:20,000 INFO mqha.broker.store: store open: log [0, 506568)",
        "2026-12-07 21:58:25,500 INFO mqbroker: broker DefaultCluster/broker-a serving on 127.0.0.1:20000",
        "2026-12-07 21:58:29,250 INFO mqha.replicas_manager.client: controller leader: 127.0.0.1:10794",
        "mqbroker: BrokerId: 1 of broker-set: broker-a is held by another live process at ...",
    )
    assert clone.serving_at() == SPAWNED + 25.5
    assert clone.deadline() == SPAWNED + 25.5 + REFUSED_WITHIN
    assert clone.last_logged_at() == SPAWNED + 29.25
    assert "another live process" in clone.last_line()
