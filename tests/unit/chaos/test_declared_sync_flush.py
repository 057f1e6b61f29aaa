"""Under SYNC_FLUSH a broker fsyncs before it acknowledges: an acknowledged message that no replica had
fsynced when its whole group lost power broke the flush contract, and the run fails even when the
controller declared the range lost (``mqha.chaos.declared``; the planted ``ack-before-fsync``)."""

from __future__ import annotations

from dataclasses import replace

from mqha.chaos.verdict import RunFacts, judge
from tests.unit.chaos.test_verdict import G, _power_run


def _sync(run: RunFacts) -> RunFacts:
    return replace(run, power_cuts=tuple(replace(c, sync_flush=True) for c in run.power_cuts))


def test_a_declared_loss_under_sync_flush_is_a_loss() -> None:
    run = _power_run({G: [(300, 500)]}, lost_ack=2)
    assert judge(run).ok  # the same run under ASYNC_FLUSH: declared, not a failure
    verdict = judge(_sync(run))
    assert not verdict.ok and (verdict.lost, verdict.declared) == (2, 0), verdict.text
    assert verdict.reasons[:2] == (
        "2 acknowledged message(s) lost",
        "invariant lost_ack: 2 violation(s)",
    )
    assert "acked but never fsynced on any replica 2, of which declared lost 0" in verdict.text
