"""The election rule of docs/architecture.md §3.2 (KIP-966's ELR): completeness, waiting, declared loss and
designation, exhaustively over small sets (Hypothesis), plus the watermark's sources."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.controller.election import (
    WAIT_FOREVER,
    ElectionInputs,
    ElectionPolicy,
    ElectionResult,
    elect,
    election_watermark,
    rank_key,
)
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.state import BrokerGroupState, ReplicaInfo

MAX = 2**31 - 1
IDS = [1, 2, 3, 4]


def info(
    broker_id: int, epoch: int = 1, offset: int = -1, prio: int = MAX, **extra: object
) -> BrokerLiveInfo:
    return BrokerLiveInfo("c", "g", broker_id, f"a{broker_id}", epoch, offset, -1, prio, 10_000, 0, **extra)  # type: ignore[arg-type]


def lossy(broker_id: int, offset: int, epoch: int = 1) -> BrokerLiveInfo:
    """A replica that restarted after losing its tail (its start report says so)."""
    return info(broker_id, epoch=epoch, offset=offset, lossy_recovery=True)


def run(
    sss: set[int],
    live: dict[int, BrokerLiveInfo],
    *,
    old: int | None = None,
    elr: dict[int, int] | None = None,
    watermark: int = -1,
    prefer: int | None = None,
    all_replicas: set[int] | None = None,
    waited_ms: int | None = None,
    timeout_ms: int = 300_000,
    joined: dict[int, str] | None = None,
    registered: set[int] | None = None,
) -> ElectionResult:
    return elect(
        ElectionInputs(
            frozenset(sss),
            replicas=frozenset(registered or ()) | frozenset(all_replicas or ()),
            alive=frozenset(live),
            reports=live,
            old_master=old,
            prefer=prefer,
            unclean=all_replicas is not None,
            eligible=elr or {},
            watermark=watermark,
            waited_ms=waited_ms,
            wait_timeout_ms=timeout_ms,
            joined_as=joined or {},
        )
    )


# --------------------------------------------------------------------------------------------------
# Worked cases: the power-cut scenario of issue 25 and its variants.


def test_lossy_old_master_alone_waits_for_the_healthy_elr_slaves() -> None:
    # SSS shrank to {1} with confirm offset 4440 (2 and 3 credited); 1 came back with its log cut to 2215.
    result = run({1}, {1: lossy(1, 2215)}, old=1, elr={2: 4440, 3: 4440}, watermark=4440)
    assert result == ElectionResult(None, watermark=4440, waiting_for=(2, 3), incomplete=(1,))
    assert "2, 3" in result.describe_wait() and "4440" in result.describe_wait()


def test_a_returning_healthy_slave_is_elected_over_the_lossy_master() -> None:
    live = {1: lossy(1, 2215), 3: info(3, offset=4440)}
    assert run({1}, live, old=1, elr={2: 4440, 3: 4440}, watermark=4440) == ElectionResult(3, watermark=4440)


def test_the_lossy_old_master_is_not_kept_when_a_complete_replica_is_alive() -> None:
    live = {1: lossy(1, 2215, epoch=5), 2: info(2, epoch=4, offset=4440)}
    assert run({1, 2}, live, old=1, watermark=4440).broker_id == 2


def test_after_the_timeout_the_longest_log_is_elected_and_the_loss_declared() -> None:
    live = {1: lossy(1, 2215)}
    result = run({1}, live, old=1, elr={2: 4440}, watermark=4440, waited_ms=300_000)
    assert result == ElectionResult(1, watermark=4440, lost=(2215, 4440))


def test_nobody_to_wait_for_elects_at_once_declaring_the_loss() -> None:
    # 2's credit is below the watermark: it cannot hold [credit, W), so there is nobody worth waiting for.
    live = {1: lossy(1, 2215)}
    assert run({1}, live, old=1, elr={2: 1000}, watermark=4440).lost == (2215, 4440)


def test_wait_forever_and_never_wait() -> None:
    live = {1: lossy(1, 10)}
    assert run({1, 2}, live, watermark=20, waited_ms=10**9, timeout_ms=WAIT_FOREVER).waiting
    assert not run({1, 2}, live, watermark=20, timeout_ms=0).waiting


def test_a_sync_state_set_member_still_in_the_process_it_joined_with_is_complete() -> None:
    # Its last heartbeat predates the master's last ack point, but being in the set, it holds it.
    live = {2: info(2, offset=90, incarnation="x")}
    assert run({1, 2}, live, old=1, watermark=100, joined={2: "x"}) == ElectionResult(2, watermark=100)
    # Restarted since it joined (a stale checkpoint can hide a lost tail): judged by its offset.
    assert run({1, 2}, live, old=1, watermark=100, joined={2: "w"}).waiting_for == (1,)
    assert run({1, 2}, live, old=1, watermark=100).waiting_for == (1,)  # nothing known of it
    # An ELR member is judged by its offset: it left the set, so later acks may be missing.
    assert run({1}, {2: info(2, offset=90)}, old=1, elr={2: 80}, watermark=100).waiting_for == (1,)
    assert run({1}, {2: info(2, offset=90)}, old=1, elr={2: 80}, watermark=100, timeout_ms=0).lost == (
        90,
        100,
    )


def test_nobody_alive_is_no_candidate_not_a_wait() -> None:
    assert run({1, 2}, {}, watermark=20) == ElectionResult(None, watermark=20)


def test_designated_incomplete_broker_is_obeyed_declaring_the_loss() -> None:
    live = {1: info(1, offset=10), 2: info(2, offset=30)}
    assert run({1, 2}, live, old=1, watermark=30, prefer=1) == ElectionResult(1, watermark=30, lost=(10, 30))


def test_designated_elr_member_is_allowed_without_unclean() -> None:
    live = {3: info(3, offset=30)}
    assert run({1}, live, elr={3: 30}, watermark=30, prefer=3) == ElectionResult(3, watermark=30)


def test_unknown_watermark_is_the_reference_policy() -> None:
    live = {2: info(2, 1, 2), 3: info(3, 0, 3)}
    assert run({1, 2, 3}, live, old=1) == ElectionResult(2)


# --------------------------------------------------------------------------------------------------
# Properties over every small set.


@st.composite
def situations(draw: st.DrawFn) -> dict[str, object]:
    registered = IDS
    sss = draw(st.sets(st.sampled_from(registered), max_size=4))
    outside = [b for b in registered if b not in sss]
    elr_ids = draw(st.sets(st.sampled_from(outside), max_size=4)) if outside else set()
    offsets = st.integers(-1, 12)
    elr = {b: draw(offsets) for b in sorted(elr_ids)}
    alive_ids = draw(st.sets(st.sampled_from(registered), max_size=4))
    live = {
        b: info(
            b,
            epoch=draw(st.integers(0, 2)),
            offset=draw(offsets),
            prio=draw(st.integers(0, 2)),
            lossy_recovery=draw(st.booleans()),
            incarnation=draw(st.sampled_from(["x", "y", None])),
        )
        for b in sorted(alive_ids)
    }
    joined = {b: draw(st.sampled_from(["x", "y"])) for b in sorted(sss) if draw(st.booleans())}
    return {
        "sss": sss,
        "live": live,
        "old": draw(st.one_of(st.none(), st.sampled_from(sorted(sss)) if sss else st.none())),
        "elr": elr,
        "watermark": draw(offsets),
        "all_replicas": draw(st.one_of(st.none(), st.just(set(registered)))),
        "waited_ms": draw(st.one_of(st.none(), st.integers(0, 20))),
        "timeout_ms": draw(st.sampled_from([0, 10, WAIT_FOREVER])),
        "joined": joined,
    }


def _pools(s: dict[str, object]) -> list[int]:
    sss, elr, every = s["sss"], s["elr"], s["all_replicas"]
    assert isinstance(sss, set) and isinstance(elr, dict)
    return sorted(sss | set(elr) | (every if isinstance(every, set) else set()))


def _complete(s: dict[str, object]) -> Callable[[int], bool]:
    live, watermark, sss, joined = s["live"], s["watermark"], s["sss"], s["joined"]
    assert isinstance(live, dict) and isinstance(watermark, int) and isinstance(sss, set)
    assert isinstance(joined, dict)

    def complete(b: int) -> bool:
        if b not in live:
            return False
        same_process = b in sss and live[b].incarnation is not None and joined.get(b) == live[b].incarnation
        return same_process or live[b].max_offset >= watermark

    return complete


@settings(max_examples=300, deadline=None)
@given(situations())
def test_never_an_incomplete_candidate_while_a_complete_one_is_alive(s: dict[str, object]) -> None:
    result = run(**s)  # type: ignore[arg-type]
    complete = _complete(s)
    if any(complete(b) for b in _pools(s)):
        assert result.broker_id is not None and complete(result.broker_id)
        assert result.lost is None and not result.waiting


@settings(max_examples=300, deadline=None)
@given(situations())
def test_waits_only_for_an_eligible_replica_that_is_not_alive(s: dict[str, object]) -> None:
    result = run(**s)  # type: ignore[arg-type]
    if not result.waiting:
        return
    sss, elr, live, w = s["sss"], s["elr"], s["live"], s["watermark"]
    assert isinstance(sss, set) and isinstance(elr, dict) and isinstance(live, dict)
    assert result.broker_id is None and s["timeout_ms"] != 0
    assert not any(_complete(s)(b) for b in _pools(s))
    assert result.incomplete  # someone alive could have been elected by declaring a loss
    every = s["all_replicas"] or set()
    for b in result.waiting_for:
        assert b not in live and (b in sss or b in every or elr[b] >= w)  # type: ignore[operator]


@settings(max_examples=300, deadline=None)
@given(situations())
def test_a_declared_loss_is_exactly_what_the_new_master_lacks(s: dict[str, object]) -> None:
    result = run(**s)  # type: ignore[arg-type]
    if result.lost is None:
        return
    live, w = s["live"], s["watermark"]
    assert isinstance(live, dict) and result.broker_id is not None
    top = live[result.broker_id].max_offset
    assert top < w and result.lost == (max(top, 0), w)
    assert not any(_complete(s)(b) for b in _pools(s))
    # The most advanced log among the alive candidates.
    alive = [b for b in _pools(s) if b in live]
    assert result.broker_id == min(alive, key=lambda b: rank_key(b, live[b]))


@settings(max_examples=300, deadline=None)
@given(situations(), st.sampled_from(IDS))
def test_a_designated_election_is_obeyed_at_once(s: dict[str, object], prefer: int) -> None:
    result = run(**s, prefer=prefer)  # type: ignore[arg-type]
    live, w = s["live"], s["watermark"]
    assert isinstance(live, dict) and isinstance(w, int)
    if prefer in _pools(s) and prefer in live:
        assert result.broker_id == prefer and not result.waiting
        assert (result.lost is not None) == (live[prefer].max_offset < w)
    else:
        assert result.broker_id is None and not result.waiting


@settings(max_examples=300, deadline=None)
@given(situations())
def test_no_wait_once_the_timeout_has_passed(s: dict[str, object]) -> None:
    timeout = s["timeout_ms"]
    assert isinstance(timeout, int)
    if timeout == WAIT_FOREVER:
        return
    assert not run(**{**s, "waited_ms": timeout}).waiting  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# The watermark's sources (soft ones only while the set's masterEpoch stays).


def _group(**changes: object) -> BrokerGroupState:
    base = BrokerGroupState(
        "c", "g", {b: ReplicaInfo(f"a{b}") for b in (1, 2, 3)}, 1, 4, frozenset({1, 2}), 6, {}, 100
    )
    from dataclasses import replace

    return replace(base, **changes)  # type: ignore[arg-type]


def test_watermark_takes_the_replicated_value_the_master_ack_point_and_recovery_confirms() -> None:
    group = _group()
    # Recovery reports of processes first heard in this masterEpoch count, alive or not; older ones
    # were folded into the replicated watermark when the epoch moved on.
    live = LivenessSnapshot(0, {}, recoveries={("g", 2): (4, 150), ("g", 3): (3, 999), ("h", 1): (4, 777)})
    assert election_watermark(group, live) == 150
    with_master = LivenessSnapshot(0, {}, {"g": (4, 170)}, recoveries=live.recoveries)
    assert election_watermark(group, with_master) == 170
    stale_master = LivenessSnapshot(0, {}, {"g": (3, 500)}, recoveries=live.recoveries)
    assert election_watermark(group, stale_master) == 150


def test_policy_waits_for_the_sss_member_and_elects_it_when_back() -> None:
    group = _group(master_broker_id=None, master_epoch=5, sync_state_set=frozenset({2}), acked_watermark=100)
    lossy = info(
        1, offset=50, lossy_recovery=True, confirm_offset_before_recovery=100, first_seen_master_epoch=5
    )
    policy = ElectionPolicy(unclean_recovery_timeout_ms=1000)
    assert policy.elect(group, LivenessSnapshot.of(0, [lossy])).broker_id is None  # not in a pool
    group = _group(
        master_broker_id=None, master_epoch=5, sync_state_set=frozenset({1, 2}), acked_watermark=100
    )
    waiting = policy.elect(group, LivenessSnapshot.of(0, [lossy]))
    assert waiting.waiting_for == (2, 3) and waiting.watermark == 100  # 3 is down: it may have more
    back = LivenessSnapshot.of(0, [lossy, info(2, offset=100)])
    assert policy.elect(group, back, waited_ms=10) == ElectionResult(2, watermark=100)
    assert policy.elect(group, LivenessSnapshot.of(0, [lossy]), waited_ms=1000).lost == (50, 100)


def test_a_declared_loss_takes_the_longest_alive_log_even_outside_the_pools() -> None:
    # The lossy master is the only member; replica 2 left the set (its credit released) but has more.
    live = {1: lossy(1, 80), 2: info(2, offset=95)}
    result = run({1}, live, old=1, watermark=100, registered={1, 2, 3}, timeout_ms=0)
    assert result == ElectionResult(2, unclean=True, watermark=100, lost=(95, 100))


def test_before_declaring_a_loss_the_election_waits_for_every_replica_that_is_down() -> None:
    live = {1: lossy(1, 80), 3: info(3, offset=60)}
    result = run({1}, live, old=1, watermark=100, registered={1, 2, 3}, timeout_ms=10)
    assert result.waiting_for == (2,) and result.broker_id is None and result.incomplete == (1, 3)
    after = run({1}, live, old=1, watermark=100, registered={1, 2, 3}, waited_ms=10, timeout_ms=10)
    assert after == ElectionResult(1, watermark=100, lost=(80, 100))


def test_without_a_member_alive_an_outsider_is_never_elected_unless_unclean() -> None:
    live = {2: info(2, offset=95)}
    assert run({1}, live, old=1, watermark=100, registered={1, 2}, timeout_ms=0).broker_id is None
