"""docs/reference-behaviour.md §6 election policy: every worked example, the strategy steps, and the total
order (ARCH §7)."""

from __future__ import annotations

import pytest

from mqha.controller.election import ElectionInputs, ElectionPolicy, ElectionResult, elect, rank_key
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.state import BrokerGroupState, ReplicaInfo

MAX = 2**31 - 1


def info(broker_id: int, epoch: int = -1, offset: int = -1, prio: int = MAX) -> BrokerLiveInfo:
    return BrokerLiveInfo("c", "g", broker_id, f"a{broker_id}", epoch, offset, -1, prio, 10_000, 0)


def run(
    sss: set[int],
    old: int | None,
    live: dict[int, BrokerLiveInfo | None],
    prefer: int | None = None,
    all_replicas: set[int] | None = None,
) -> ElectionResult:
    return elect(
        ElectionInputs(
            frozenset(sss),
            replicas=frozenset(all_replicas or ()),
            alive=frozenset(live),
            reports={b: i for b, i in live.items() if i is not None},
            old_master=old,
            prefer=prefer,
            unclean=all_replicas is not None,
        )
    )


ALL = {1: info(1), 2: info(2), 3: info(3)}


def test_6_example_all_alive_no_preference_keeps_old_master() -> None:
    assert run({1, 2, 3}, 1, ALL) == ElectionResult(1)


def test_6_example_master_dead_higher_epoch_wins() -> None:
    assert run({1, 2, 3}, 1, {2: info(2, 1, 2), 3: info(3, 0, 3)}) == ElectionResult(2)


def test_6_example_master_dead_equal_epoch_higher_offset_wins() -> None:
    assert run({1, 2, 3}, 1, {2: info(2, 1, 2), 3: info(3, 1, 3)}) == ElectionResult(3)


def test_6_example_equal_progress_lower_priority_value_wins() -> None:
    assert run({1, 2, 3}, 1, {2: info(2, 1, 3, 2), 3: info(3, 1, 3, 1)}) == ElectionResult(3)


def test_6_example_sss_only_dead_master_unclean_disabled_nothing() -> None:
    assert run({1}, 1, {2: info(2), 3: info(3)}) == ElectionResult(None)


def test_6_example_sss_only_dead_master_unclean_enabled_best_of_all() -> None:
    result = run({1}, 1, {2: info(2, 1, 5), 3: info(3, 1, 9)}, all_replicas={1, 2, 3})
    assert result == ElectionResult(3, unclean=True)


def test_6_example_designated_dead_nothing() -> None:
    assert run({1, 2, 3}, 1, {2: info(2), 3: info(3)}, prefer=1) == ElectionResult(None)


def test_6_example_designated_current_master_alive_is_the_old_master() -> None:
    assert run({1, 2, 3}, 1, ALL, prefer=1) == ElectionResult(1)


def test_6_step2_old_master_wins_over_better_ranked_brokers() -> None:
    assert run({1, 2}, 1, {1: info(1, 0, 0), 2: info(2, 9, 9)}) == ElectionResult(1)


def test_6_step3_designated_overrides_live_old_master() -> None:
    assert run({1, 2, 3}, 1, ALL, prefer=3) == ElectionResult(3)


def test_6_step3_designation_is_strict_within_a_pool_then_unclean_pool_tried() -> None:
    assert run({1, 2}, 1, {2: info(2), 3: info(3)}, prefer=3) == ElectionResult(None)
    assert run({1, 2}, 1, {2: info(2), 3: info(3)}, prefer=3, all_replicas={1, 2, 3}) == ElectionResult(
        3, True
    )


def test_6_sss_tried_before_all_replicas() -> None:
    # 3 (outside the SSS) is far ahead, but a live in-sync broker exists.
    result = run({1, 2}, 1, {2: info(2, 1, 1), 3: info(3, 9, 9)}, all_replicas={1, 2, 3})
    assert result == ElectionResult(2, unclean=False)


def test_6_no_alive_candidates_at_all() -> None:
    assert run({1, 2}, 1, {}, all_replicas={1, 2, 3}) == ElectionResult(None)


def test_17_8_deviation_ties_break_on_lowest_broker_id() -> None:
    same = {3: info(3, 1, 5, 1), 2: info(2, 1, 5, 1)}
    assert run({2, 3}, None, same) == ElectionResult(2)


def test_17_8_deviation_offsets_compared_without_32_bit_narrowing() -> None:
    # The gap 2**32 would be 0 as a Java int cast: a tie. Here the larger offset wins.
    assert run({2, 3}, None, {2: info(2, 1, 0), 3: info(3, 1, 2**32)}) == ElectionResult(3)


def test_missing_live_info_ranks_as_defaults() -> None:
    assert run({2, 3}, None, {2: None, 3: info(3, 0, 0)}) == ElectionResult(3)
    assert rank_key(5, None) == (1, 1, MAX, 5)


@pytest.mark.parametrize("unclean", [False, True])
def test_election_policy_binds_config_and_liveness(unclean: bool) -> None:
    group = BrokerGroupState(
        "c",
        "g",
        {i: ReplicaInfo(f"a{i}") for i in (1, 2, 3)},
        master_broker_id=1,
        master_epoch=1,
        sync_state_set=frozenset({1}),
        sync_state_set_epoch=1,
    )
    liveness = LivenessSnapshot.of(0, [info(2, 1, 1), info(3, 1, 2)])
    expected = ElectionResult(3, unclean=True) if unclean else ElectionResult(None)
    assert ElectionPolicy(unclean).elect(group, liveness) == expected
