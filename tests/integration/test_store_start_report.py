"""The broker store's start report on real files (docs/architecture.md §3.2, §9.3): a clean restart, a kill,
and a log cut behind a confirm offset (a power cut's lost tail) with its one WARNING line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mqha.broker.commitlog import MessageDraft
from mqha.broker.store import BrokerStore
from mqha.chaos.power_loss import cut_unflushed
from tests.integration.ha_nodes import broker_config


def filled(root: Path, count: int) -> tuple[BrokerStore, list[int]]:
    store = BrokerStore.open_config(broker_config(root))
    offsets = [store.log.append(MessageDraft("t", b"x" * 100)).offset for _ in range(count)]
    store.log.flush()
    store.save_confirm_offset(store.max_offset)
    return store, offsets


def test_a_clean_restart_is_not_lossy(tmp_path: Path) -> None:
    store, _ = filled(tmp_path, 10)
    first = store.start_report.incarnation
    top = store.max_offset
    store.close(top)
    again = BrokerStore.open_config(broker_config(tmp_path))
    report = again.start_report
    assert report.clean_shutdown and not report.lossy and report.incarnation != first
    assert (report.confirm_offset_before_recovery, report.recovered_max_offset) == (top, top)
    again.close()


def test_a_log_cut_behind_the_confirm_offset_is_lossy_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, offsets = filled(tmp_path, 5)  # flushed
    offsets += [store.log.append(MessageDraft("t", b"x" * 100)).offset for _ in range(5)]  # not flushed
    top = store.max_offset
    store.save_confirm_offset(top)  # confirmed (acknowledged by the set), not fsynced by this replica
    # As after a kill -9: the flusher stops and nothing is closed cleanly (no CLEAN mark is written).
    store.log._stop.set()
    if store.log._flusher is not None:
        store.log._flusher.join(5)
    store.checkpoint.close()
    store.log._checkpoint_fd = -1
    assert cut_unflushed(tmp_path).flushed_offset == offsets[5]  # the power cut
    with caplog.at_level(logging.WARNING, logger="mqha.broker.store"):
        reopened = BrokerStore.open_config(broker_config(tmp_path))
    report = reopened.start_report
    assert report.lossy and not report.clean_shutdown
    assert (report.confirm_offset_before_recovery, report.recovered_max_offset) == (top, offsets[5])
    assert reopened.stored_confirm_offset == offsets[5]  # clamped into the recovered log
    lossy_lines = [r for r in caplog.records if "LOSSY RECOVERY" in r.getMessage()]
    assert len(lossy_lines) == 1 and lossy_lines[0].levelno == logging.WARNING
    assert f"[{offsets[5]}, {top})" in lossy_lines[0].getMessage()
    reopened.close()
