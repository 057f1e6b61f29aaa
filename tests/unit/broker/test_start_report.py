"""The broker's start report (docs/architecture.md §3.2): incarnations and the lossy rule (pure)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from mqha.broker.start_report import new_incarnation, start_report


def test_each_start_gets_a_new_32_hex_incarnation() -> None:
    seen = {new_incarnation() for _ in range(100)}
    assert len(seen) == 100 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in seen)


def test_a_confirm_offset_beyond_the_recovered_log_is_a_lossy_start() -> None:
    report = start_report(
        "x", clean_shutdown=False, confirm_offset_before_recovery=4440, recovered_max_offset=2215
    )
    assert report.lossy and report.lost_range == (2215, 4440)
    assert "LOSSY" in report.describe() and report.to_json() == {
        "incarnation": "x",
        "cleanShutdown": False,
        "lossyRecovery": True,
        "confirmOffsetBeforeRecovery": 4440,
        "recoveredMaxOffset": 2215,
    }


@given(st.integers(-1, 10**6), st.integers(0, 10**6), st.booleans())
def test_lossy_exactly_when_confirmed_data_is_gone(confirm: int, top: int, clean: bool) -> None:
    report = start_report(
        "x", clean_shutdown=clean, confirm_offset_before_recovery=confirm, recovered_max_offset=top
    )
    assert report.lossy == (confirm > top)
    assert report.clean_shutdown == clean and (report.lost_range is None) == (not report.lossy)
