"""Elections of a set that acknowledges by count (``inSyncReplicas`` = N, no allAck; docs/architecture.md
§3.2): fresh reports, the longest log, and when the alive members cannot be known to hold everything."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.controller.election import ElectionInputs, ElectionPolicy, ElectionResult, elect
from mqha.controller.liveness import AckRule, BrokerLiveInfo, LivenessSnapshot
from mqha.controller.state import BrokerGroupState, ReplicaInfo

MAX = 2**31 - 1
LOST_AT = 1000  # the set lost its master then: reports from before are stale


def info(broker_id: int, offset: int, reported_ms: int = LOST_AT + 10, epoch: int = 1) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "c",
        "g",
        broker_id,
        f"a{broker_id}",
        epoch,
        offset,
        -1,
        MAX,
        10_000,
        reported_ms,
        reported_ms=reported_ms,
    )


def run(
    live: dict[int, BrokerLiveInfo],
    *,
    sss: frozenset[int] = frozenset({1, 2, 3}),
    old: int | None = 1,
    needed: int | None = 2,
    watermark: int = 100,
    waited_ms: int | None = 50,
    joined: dict[int, str] | None = None,
    timeout_ms: int = 300_000,
) -> ElectionResult:
    return elect(
        ElectionInputs(
            sss,
            replicas=sss,
            alive=frozenset(live),
            reports=live,
            old_master=old,
            watermark=watermark,
            waited_ms=waited_ms,
            wait_timeout_ms=timeout_ms,
            joined_as=joined or {},
            acks_needed=needed,
            fresh_since_ms=LOST_AT,
        )
    )


EVERYONE_JOINED = {1: "i1", 2: "i2", 3: "i3"}


def test_the_soak_case_the_longest_member_wins_not_the_lower_id() -> None:
    # Both joined the set in their current process; 3 holds the master's last acknowledgements.
    live = {2: info(2, 480), 3: info(3, 660)}
    assert run(live, joined=EVERYONE_JOINED) == ElectionResult(3, watermark=100)


def test_with_all_ack_membership_still_vouches() -> None:
    live = {2: info(2, 480), 3: info(3, 660)}
    # Every member holds every acknowledgement: 2 is complete as the process that joined; rank by report.
    assert run(live, joined=EVERYONE_JOINED, needed=None).broker_id == 3
    stale = {2: info(2, 480, reported_ms=0), 3: info(3, 480, reported_ms=0)}
    assert run(stale, joined=EVERYONE_JOINED, needed=None).broker_id == 2  # no wait for reports


def test_stale_reports_make_the_set_wait_for_them_without_clearing_anything() -> None:
    live = {2: info(2, 480, reported_ms=LOST_AT - 1), 3: info(3, 480)}
    result = run(live, joined=EVERYONE_JOINED)
    assert result == ElectionResult(None, watermark=100, waiting_for=(2,), incomplete=(3,), reports=True)
    assert "reports" in result.describe_wait() and "2" in result.describe_wait()


def test_the_first_attempt_has_no_fresh_report_yet() -> None:
    live = {2: info(2, 480, reported_ms=LOST_AT), 3: info(3, 660, reported_ms=LOST_AT)}
    result = elect(
        ElectionInputs(
            frozenset({1, 2, 3}),
            alive=frozenset(live),
            reports=live,
            old_master=1,
            acks_needed=2,
            fresh_since_ms=LOST_AT + 1,  # the attempt's own time: nothing arrived since
        )
    )
    assert result.waiting_for == (2, 3) and result.reports


def test_a_member_that_never_reports_is_waited_for_only_until_it_would_have_expired() -> None:
    live = {2: info(2, 480, reported_ms=0), 3: info(3, 660)}
    assert run(live, waited_ms=9_999).waiting
    assert run(live, waited_ms=10_000) == ElectionResult(3, watermark=100)


def test_with_n_2_a_down_member_may_hold_what_the_alive_ones_lack() -> None:
    live = {2: info(2, 660)}  # 3 is down: the acks after 2 fell behind may be on 1 and 3 only
    result = run(live)
    assert result.broker_id is None and result.waiting_for == (1, 3) and not result.reports
    # The wait ends as the rule says (uncleanRecoveryTimeoutMills): the longest alive, any loss declared.
    assert run(live, timeout_ms=0, watermark=700) == ElectionResult(2, watermark=700, lost=(660, 700))


def test_with_n_3_one_down_member_still_leaves_a_copy_alive() -> None:
    live = {2: info(2, 480), 3: info(3, 660), 4: info(4, 500)}
    assert run(live, sss=frozenset({1, 2, 3, 4, 5}), needed=3) == ElectionResult(3, watermark=100)


def test_with_n_1_the_longest_alive_log_wins_at_once() -> None:
    live = {2: info(2, 480)}
    assert run(live, needed=1) == ElectionResult(2, watermark=100)


def test_an_alive_old_master_needs_no_reports() -> None:
    live = {1: info(1, 100, reported_ms=0), 2: info(2, 480, reported_ms=0)}
    assert run(live) == ElectionResult(1, watermark=100)


def test_a_known_watermark_beyond_every_alive_log_is_still_a_declared_loss() -> None:
    live = {2: info(2, 480), 3: info(3, 660)}
    result = run(live, watermark=700, timeout_ms=0)
    assert result == ElectionResult(3, watermark=700, lost=(660, 700))


@settings(max_examples=300, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 50), min_size=2, max_size=4),
    needed=st.integers(2, 4),
)
def test_with_fresh_reports_and_every_member_alive_the_elected_log_is_the_longest(
    offsets: list[int], needed: int
) -> None:
    live = {i + 2: info(i + 2, offset) for i, offset in enumerate(offsets)}
    sss = frozenset({1, *live})
    result = run(live, sss=sss, needed=needed, watermark=0, joined={b: f"i{b}" for b in sss})
    assert result.broker_id is not None and live[result.broker_id].max_offset == max(offsets)
    assert result.lost is None


def test_the_policy_reads_the_rule_and_the_wait_start_from_the_view() -> None:
    group = BrokerGroupState(
        "c",
        "g",
        replicas={b: ReplicaInfo(f"a{b}") for b in (1, 2, 3)},
        master_broker_id=1,
        master_epoch=1,
        sync_state_set=frozenset({1, 2, 3}),
    )
    live = {2: info(2, 480), 3: info(3, 660)}
    view = LivenessSnapshot(
        LOST_AT + 60,
        {("g", b): i for b, i in live.items()},
        member_incarnations={("g", 2): "i2", ("g", 3): "i3"},
        ack_rules={"g": AckRule(False, 2)},
    )
    assert ElectionPolicy().elect(group, view, waited_ms=60).broker_id == 3
    assert ElectionPolicy().elect(group, view, waited_ms=None).reports  # its first attempt


def test_a_cleared_master_still_counts_as_one_down_member() -> None:
    # A whole-group power cut cleared the master; the two healthy slaves are back with everything.
    live = {2: info(2, 4840), 3: info(3, 4840)}
    assert run(live, old=None, watermark=4840) == ElectionResult(2, watermark=4840)
    assert run({2: info(2, 4840)}, old=None, watermark=4840).broker_id is None  # 1 and 3 down: unknowable


def fenced(broker_id: int, offset: int, known: int) -> BrokerLiveInfo:
    return replace(info(broker_id, offset), known_master_epoch=known)


def after_clearing(live: dict[int, BrokerLiveInfo]) -> ElectionResult:
    """An attempt once the master (epoch 8) was cleared at 9."""
    return elect(
        ElectionInputs(
            frozenset({1, 2, 3}),
            alive=frozenset(live),
            reports=live,
            acks_needed=2,
            fence_epoch=9,
            waited_ms=10,
        )
    )


def test_reports_count_only_from_behind_the_fence_of_the_cleared_epoch() -> None:
    # 3 still reports epoch 8, so the old master may still get its acks (the soak's zombie master under a
    # delay fault), however fresh the report.
    live = {2: fenced(2, 480, 9), 3: fenced(3, 480, 8)}
    result = after_clearing(live)
    assert result.waiting_for == (3,) and result.reports
    live[3] = fenced(3, 660, 9)
    assert after_clearing(live) == ElectionResult(3)


def test_before_the_master_is_cleared_no_report_is_behind_a_fence() -> None:
    live = {2: fenced(2, 480, 8), 3: fenced(3, 660, 8)}
    assert run(live, waited_ms=None).waiting_for == (2, 3)
