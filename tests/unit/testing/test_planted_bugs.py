"""The planted bugs' registry and the store-level plants (``mqha.testing.planted_bugs``)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from mqha.broker.start_report import start_report
from mqha.chaos.schedule import FAULT_KINDS
from mqha.testing.planted_bugs import ACK_BEFORE_FSYNC_ENV, PLANTED, maybe_plant_store, planted_env

ARCHITECTURE = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"


def test_every_planted_bug_is_test_only_caught_by_a_fault_kind_and_documented() -> None:
    listed = re.findall(
        r"^- `([a-z-]+)`(?: \((?:broker|controller)\))?: ", ARCHITECTURE.read_text(), flags=re.MULTILINE
    )
    for name, bug in PLANTED.items():
        assert bug.env.startswith("MQHA_TEST_ONLY_") and bug.process in ("broker", "controller")
        assert bug.caught_by and set(bug.caught_by) <= set(FAULT_KINDS), name
        assert name in listed, f"{name} is not in the planted-bugs list of docs/architecture.md"
    assert planted_env(["full-disk-put-ok"]) == {"MQHA_TEST_ONLY_FULL_DISK_PUT_OK": "1"}


class _Store:
    def __init__(self) -> None:
        self.start_report = start_report(
            "a" * 32, clean_shutdown=False, confirm_offset_before_recovery=900, recovered_max_offset=700
        )
        self.flushed: list[int] = []

    async def flush_to(self, offset: int) -> None:
        self.flushed.append(offset)


def test_the_broker_that_acknowledges_before_its_fsync_skips_only_the_wait() -> None:
    store = _Store()
    maybe_plant_store(store, {})
    assert store.start_report.lossy and not store.start_report.clean_shutdown
    asyncio.run(store.flush_to(5))
    assert store.flushed == [5]

    hasty = _Store()
    maybe_plant_store(hasty, {ACK_BEFORE_FSYNC_ENV: "1"})
    asyncio.run(hasty.flush_to(5))
    assert hasty.flushed == [] and hasty.start_report.lossy  # answered without a flush; report as it was
