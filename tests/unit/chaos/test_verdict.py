"""Counts, recovery times, targets, the verdict table and the exit decision of a chaos run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mqha.chaos.agreement import Agreement
from mqha.chaos.client_checks import WriteLog
from mqha.chaos.declared import PowerCut, declared_ranges, never_fsynced
from mqha.chaos.schedule import (
    ALL_CONTROLLERS,
    BITFLIP,
    CONTROLLER_LEADER,
    CONTROLLERS,
    KILL,
    MASTER,
    PARTITION,
    PAUSE,
    FaultStep,
)
from mqha.chaos.verdict import (
    FaultOutcome,
    RunFacts,
    duplicated,
    expired_messages,
    failed_during,
    judge,
    lost_messages,
    percentile,
    recovery_time,
)
from mqha.client.results import SendResult, SendStatus

G = "broker-a"
INVARIANTS = {
    "lost_ack": 0,
    "replica_divergence": 0,
    "two_masters_in_epoch": 0,
    "read_uncommitted": 0,
    "duplicate": 1,
}


def send(
    msg: str,
    status: SendStatus = SendStatus.PUT_OK,
    *,
    offset: int | None = None,
    started: float = 0.0,
    done: float = 0.0,
    first_error: float | None = None,
    group: str = G,
) -> SendResult:
    return SendResult(
        msg, status, group, offset=offset, started_at=started, completed_at=done, first_error_at=first_error
    )


def test_percentile_nearest_rank() -> None:
    assert percentile([3.0], 50) == 3.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([2.0, 1.0], 99) == 2.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_recovery_counts_only_sends_that_started_or_failed_after_the_fault() -> None:
    sends = [
        send("in-flight", started=9.9, done=10.01),  # only crossed the instant: proves nothing
        send("retried", started=9.95, first_error=10.1, done=11.2),  # failed after it, then acked
        send("new", started=10.5, done=11.5),
        send("failed", SendStatus.UNKNOWN, started=10.2, done=10.3),
    ]
    assert recovery_time(10.0, sends) == pytest.approx(1.2)
    assert recovery_time(10.0, sends[:1]) is None
    assert recovery_time(12.0, sends) is None


def test_failed_during_counts_overlapping_failures() -> None:
    sends = [
        send("a", SendStatus.FLUSH_SLAVE_TIMEOUT, started=1.0, done=2.5),
        send("b", SendStatus.UNKNOWN, started=4.0, done=6.0),
        send("c", SendStatus.FAILED, started=7.0, done=8.0),
        send("d", started=2.0, done=3.0),
    ]
    assert failed_during(2.0, 5.0, sends) == 2
    assert failed_during(8.5, 9.0, sends) == 0


def test_lost_and_duplicated() -> None:
    logs = {G: {0: "m1", 100: "m2", 200: "m2"}, "broker-b": {0: "x"}}
    sends = [
        send("m1", offset=0),
        send("m2", offset=100),
        send("m3", offset=300),  # acked, not in the log: lost
        send("m4", offset=0),  # another message at its offset: lost
        send("m5", SendStatus.FLUSH_SLAVE_TIMEOUT, offset=400),  # not acknowledged: never lost
        send("x", offset=0, group="broker-b"),
        send("y", offset=0, group="broker-c"),  # a group without a final log: lost
    ]
    assert [s.msg_id for s in lost_messages(sends, logs)] == ["m3", "m4", "y"]
    assert duplicated(logs) == 1


def outcome(step: FaultStep, at: float, healed: float, whole: float | None) -> FaultOutcome:
    return FaultOutcome(step, ("broker-a-0",), (G,), at, healed, whole)


def facts(**changes: object) -> RunFacts:
    kill = FaultStep(1, KILL, MASTER, 1.0, 1.0, group=G)
    pause = FaultStep(2, PAUSE, MASTER, 3.0, 1.0, group=G)
    leader = FaultStep(3, PAUSE, CONTROLLER_LEADER, 3.0, 1.0)
    base = RunFacts(
        title="mqha chaos: test",
        planned=4,
        faults=(
            outcome(kill, 10.0, 11.0, 12.0),
            outcome(pause, 20.0, 23.0, 24.0),
            outcome(leader, 30.0, 33.0, 33.5),
        ),
        sends=(
            send("m1", offset=0, started=1.0, done=1.1),
            send("m2", offset=100, started=10.2, done=10.6),  # kill -> 0.6 s
            send("m3", SendStatus.UNKNOWN, started=19.0, done=22.0),
            send("m4", offset=200, started=21.0, done=23.1),  # pause -> 3.1 s
            send("m5", offset=300, started=30.5, done=30.6),  # leader pause -> 0.6 s, no failure
        ),
        reads=3,
        final_logs={G: {0: "m1", 100: "m2", 200: "m4", 300: "m5"}},
        engine="python",
        invariants=dict(INVARIANTS),
        check_problem=None,
        settled=True,
        heartbeat_timeout=1.5,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_clean_run_passes_with_the_table() -> None:
    verdict = judge(facts())
    assert verdict.ok and verdict.exit_code == 0 and verdict.reasons == ()
    text = verdict.text
    assert "faults injected: 3 of 4 planned (kill 1, pause 2)" in text
    assert "messages: sent 5  acked 4  unknown 1  failed 0  not-replicated 0  lost 0  duplicated 0" in text
    assert "reads: 3 delivered to consumers; read-uncommitted 0" in text
    lines = text.splitlines()
    kill = next(line for line in lines if line.strip().startswith("kill master"))
    assert kill.split()[2:6] == ["1", "0.60s", "0.60s", "0.60s"]
    assert kill.endswith("p50<=1s p99<=2s: met")
    pause = next(line for line in lines if line.strip().startswith("pause master"))
    assert "3.10s" in pause and pause.endswith("max<=3.5s: met")
    assert next(line for line in lines if "controller-leader" in line).endswith("no failed put: met")
    total = next(line for line in lines if line.strip().startswith("all "))
    assert total.split()[1:5] == ["3", "0.60s", "3.10s", "3.10s"]
    assert "  duplicate              counted 1 (not a failure)" in text
    assert text.rstrip().endswith("verdict: PASS")


def test_a_lost_message_fails_the_run() -> None:
    verdict = judge(facts(final_logs={G: {0: "m1", 100: "m2", 200: "m4"}}))
    assert not verdict.ok and verdict.exit_code == 1 and verdict.lost == 1
    assert verdict.reasons == ("1 acknowledged message(s) lost",)
    assert "verdict: FAIL -- 1 acknowledged message(s) lost" in verdict.text


def test_invariant_violations_fail_the_run_but_duplicates_do_not() -> None:
    assert judge(facts(invariants={**INVARIANTS, "duplicate": 7})).ok
    verdict = judge(facts(invariants={**INVARIANTS, "replica_divergence": 2}))
    assert verdict.reasons == ("invariant replica_divergence: 2 violation(s)",)
    assert "  replica_divergence     FAIL 2" in verdict.text


def test_a_missing_check_or_an_unsettled_cluster_fails_the_run() -> None:
    verdict = judge(facts(invariants=None, check_problem="export failed (exit 1)"))
    assert verdict.reasons == ("no invariant check: export failed (exit 1)",)
    assert judge(facts(invariants=None, engine="off")).ok  # asked not to check
    assert judge(facts(settled=False)).reasons == ("the cluster was not whole again after the final heal",)
    assert "no final master log could be read" in judge(facts(final_logs={})).reasons


def test_bitflip_steps_that_flipped_nothing_do_not_show_the_kind_injected() -> None:
    flip = FaultStep(4, BITFLIP, MASTER, 1.0, 1.0, group=G, links="running")
    ran = facts(faults=(outcome(flip, 40.0, 41.0, 41.5),), asked=(BITFLIP,), reached=(BITFLIP,))
    assert "not injected: bitflip: every step of it was skipped (no target found)" in judge(ran).text
    assert "not injected" not in judge(replace(ran, flips=1)).text


def test_targets_missed_are_reported_not_failed() -> None:
    slow = facts(
        sends=(
            send("m1", offset=0, started=1.0, done=1.1),
            send("m2", offset=100, started=10.2, done=12.5),  # kill -> 2.5 s
            send("m4", offset=200, started=21.0, done=26.0),  # pause -> 6 s
            send("m5", SendStatus.FLUSH_SLAVE_TIMEOUT, started=30.5, done=32.0),
            send("m6", offset=300, started=31.2, done=31.4),  # acked while m5 waited: served
        ),
        final_logs={G: {0: "m1", 100: "m2", 200: "m4", 300: "m6"}},
    )
    verdict = judge(slow)
    assert verdict.ok
    assert "p50<=1s p99<=2s: MISSED" in verdict.text
    assert "max<=3.5s: MISSED" in verdict.text
    assert "no failed put: MISSED" in verdict.text


def test_a_fault_with_no_later_ack_is_unrecovered() -> None:
    partition = FaultStep(4, PARTITION, MASTER, 3.0, 1.0, group=G, links="all")
    verdict = judge(facts(faults=(outcome(partition, 50.0, 53.0, None),)))
    line = next(line for line in verdict.text.splitlines() if "partition master[all]" in line)
    assert line.split()[2:8] == ["1", "-", "-", "-", "1", "0"]
    assert line.endswith("MISSED")


def test_controllers_that_disagree_fail_the_run_and_are_shown() -> None:
    agreed = judge(facts(controllers=Agreement(True, "n0,n1,n2 all voters")))
    assert agreed.ok and "controllers: agree: n0,n1,n2 all voters" in agreed.text
    split = judge(facts(controllers=Agreement(False, "n2 is observer, not a voter")))
    assert not split.ok
    assert "the controllers disagree: n2 is observer, not a voter" in split.reasons
    assert "controllers: DISAGREE: n2 is observer, not a voter" in split.text
    assert "controllers:" not in judge(facts()).text  # not checked: no line


def test_acks_below_the_final_log_start_expired_they_were_not_lost() -> None:
    """Retention deleted the front of the master's log: those acks are counted as expired, not lost; a
    missing message above the start still is a loss."""
    sends = [send(f"m{offset}", offset=offset) for offset in (0, 100, 200, 300)]
    final_logs = {G: {200: "m200"}}
    assert [s.offset for s in lost_messages(sends, final_logs)] == [300]
    assert expired_messages(sends, final_logs) == 2


def test_expired_messages_fail_a_run_in_which_nothing_may_expire() -> None:
    """A run shorter than fileReservedTime without a full disk: whatever retention deleted was deleted
    too young (the ``clock`` fault's planted bug); otherwise expired messages are shown, not a failure."""
    trimmed = {G: {100: "m2", 200: "m4", 300: "m5"}}  # m1 at offset 0 went
    shown = judge(facts(final_logs=trimmed))
    assert shown.ok and "expired by retention 1" in shown.text
    failed = judge(facts(final_logs=trimmed, retention_may_delete=False))
    assert not failed.ok
    assert failed.reasons == ("1 acknowledged message(s) deleted by retention before fileReservedTime",)
    assert judge(facts(retention_may_delete=False)).ok  # nothing expired


# --- power-loss: declared losses (never fsynced anywhere, declared by the controller) vs silent ones ---
def _power_run(
    declared: dict[str, list[tuple[int, int]]], lost_ack: int, read_uncommitted: int = 0
) -> RunFacts:
    # A whole-group cut at t=50: broker-a-0 had fsynced up to 300, the others up to 200.
    cut = PowerCut(
        4,
        G,
        ("broker-a-0", "broker-a-1", "broker-a-2"),
        True,
        50.0,
        {"broker-a-0": 300, "broker-a-1": 200, "broker-a-2": 200},
        3,
    )
    sends = (
        SendResult("m1", SendStatus.PUT_OK, G, offset=0, size=100, started_at=1.0, completed_at=1.1),
        SendResult("m2", SendStatus.PUT_OK, G, offset=200, size=100, started_at=40.0, completed_at=40.1),
        SendResult("m3", SendStatus.PUT_OK, G, offset=300, size=100, started_at=41.0, completed_at=41.1),
        SendResult("m4", SendStatus.PUT_OK, G, offset=400, size=100, started_at=42.0, completed_at=42.1),
        SendResult("m5", SendStatus.PUT_OK, G, offset=300, size=100, started_at=60.0, completed_at=60.1),
    )
    # The log after recovery: m1, m2 (fsynced on broker-a-0), then m5 at m3's old offset.
    return facts(
        sends=sends,
        final_logs={G: {0: "m1", 200: "m2", 300: "m5"}},
        invariants={**INVARIANTS, "lost_ack": lost_ack, "read_uncommitted": read_uncommitted},
        power_cuts=(cut,),
        declared=declared,
        reads_seen=((G, 0, "m1"), (G, 300, "m3"), (G, 300, "m5")),  # m3 was read before the cut
    )


def test_a_declared_loss_of_never_fsynced_acks_passes_and_is_counted_apart() -> None:
    verdict = judge(_power_run({G: [(300, 500)]}, lost_ack=2))
    assert verdict.ok, verdict.text
    assert (verdict.lost, verdict.declared) == (0, 2)  # m3, m4; m5 was acked after the cut
    assert " lost 0 " in verdict.text and "declared-lost 2" in verdict.text
    assert "acked but never fsynced on any replica 2, of which declared lost 2" in verdict.text
    assert "2, all of messages declared lost by the controller" in verdict.text


def test_a_read_of_a_declared_lost_message_fails_the_run() -> None:
    # Readers see only what the serving replica fsynced, which a power cut never takes.
    verdict = judge(_power_run({G: [(300, 500)]}, lost_ack=2, read_uncommitted=1))
    assert verdict.reasons == ("invariant read_uncommitted: 1 violation(s)",)


def test_an_undeclared_or_fsynced_loss_is_silent_and_fails() -> None:
    undeclared = judge(_power_run({}, lost_ack=2))
    assert not undeclared.ok and (undeclared.lost, undeclared.declared) == (2, 0)
    assert "invariant lost_ack: 2 violation(s)" in undeclared.reasons
    partly = judge(_power_run({G: [(400, 500)]}, lost_ack=2))  # only m4 declared
    assert not partly.ok and (partly.lost, partly.declared) == (1, 1)


def test_never_fsynced_needs_a_whole_group_cut_after_the_ack() -> None:
    cut = PowerCut(1, G, ("broker-a-0",), False, 50.0, {"broker-a-0": 0}, 1)
    acked = SendResult("m", SendStatus.PUT_OK, G, offset=100, size=50, completed_at=10.0)
    assert not never_fsynced(acked, [cut])  # one replica's power: the others still hold it
    whole = replace(cut, whole_group=True, flushed={"broker-a-0": 120, "broker-a-1": 150})
    assert not never_fsynced(acked, [whole])  # broker-a-1 had fsynced all of it
    assert never_fsynced(replace(acked, size=60), [whole])
    assert not never_fsynced(replace(acked, size=60, completed_at=60.0), [whole])  # acked after the cut


def test_declared_ranges_come_from_the_controller_events() -> None:
    rows = [
        {"type": "ElectMaster", "brokerName": G, "ackedDataLost": {"fromOffset": 300, "toOffset": 500}},
        {"type": "ElectMaster", "brokerName": G, "ackedDataLost": '{"fromOffset": 300, "toOffset": 500}'},
        {
            "type": "ElectMaster",
            "brokerName": "broker-b",
            "ackedDataLostFrom": 7,
            "ackedDataLostTo": 9,
        },
        {"type": "ElectMaster", "brokerName": G, "ackedDataLost": None},
        {"type": "AlterSyncStateSet", "brokerName": G},
    ]
    assert declared_ranges(rows) == {G: [(300, 500)], "broker-b": [(7, 9)]}


def test_lost_controller_writes_fail_the_run_and_unreadable_ones_are_not_a_pass() -> None:
    writes = WriteLog(acked=["chaos-probe-1", "chaos-probe-2"], unknown=["chaos-probe-3"])
    kept = judge(facts(controller_writes=writes, probe_topics={"chaos-probe-1", "chaos-probe-2"}))
    assert kept.ok and "2 acknowledged, 1 unknown, 0 refused; every acknowledged one applied" in kept.text
    lost = judge(facts(controller_writes=writes, probe_topics={"chaos-probe-1"}))
    assert not lost.ok and "1 acknowledged controller write(s) lost" in lost.reasons
    assert "1 acknowledged LOST, e.g. chaos-probe-2" in lost.text
    unread = judge(facts(controller_writes=writes, probe_topics=None))
    assert not unread.ok and "controller writes: NOT CHECKED" in unread.text


def test_puts_turned_away_during_a_controller_only_fault_fail_the_run() -> None:
    down = FaultStep(5, ALL_CONTROLLERS, CONTROLLERS, 3.0, 1.0, links=KILL)
    sends = (
        send("m1", offset=0, started=39.9, done=40.0),
        send("m2", offset=100, started=40.2, done=43.5, first_error=41.6),  # refused, retried, served
        send("m3", offset=200, started=43.6, done=43.7),
    )
    run = facts(
        faults=(outcome(down, 40.1, 43.1, 43.3),),
        sends=sends,
        final_logs={G: {0: "m1", 100: "m2", 200: "m3"}},
    )
    verdict = judge(run)
    assert not verdict.ok
    assert verdict.reasons == (
        "1 stretch(es) without acknowledged puts during controller-only faults (puts turned away)",
    )
    assert (
        "data plane during controller-only faults: 1 window(s); 1 stretch(es) NOT SERVED, longest 3.50 s"
        in verdict.text
    )
    # The same stretch with the put merely waiting for its answer passes.
    slow = judge(replace(run, sends=(sends[0], replace(sends[1], first_error_at=None), sends[2])))
    assert slow.ok
    assert "controller-only faults: 1 window(s); no put turned away in a stretch over 1 s" in slow.text
    # A master's fault is no controller-only fault: the same stretch after a kill of the master passes.
    kill = FaultStep(6, KILL, MASTER, 3.0, 1.0, group=G)
    assert judge(replace(run, faults=(outcome(kill, 40.1, 43.1, 43.3),))).ok
    # The facts' pause of the leader is one, without such a stretch: its line, no failure.
    assert "data plane during controller-only faults: 1 window(s); no put turned away" in judge(facts()).text


def test_a_copy_of_a_store_that_was_not_refused_fails_the_run() -> None:
    refused = judge(facts(clones="clones: 2 started, 2 refused and stopped"))
    assert refused.ok and "clones: 2 started, 2 refused and stopped" in refused.text
    ran = "a copy of broker-a-0's store ran 30 s without being refused, serving as MASTER at masterEpoch 2"
    verdict = judge(facts(clones="clones: 1 started, 0 refused and stopped", clone_problems=(ran,)))
    assert not verdict.ok and f"verdict: FAIL -- {ran}" in verdict.text
