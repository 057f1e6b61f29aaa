"""The fault schedule is a pure function of seed, kinds, duration and topology."""

from __future__ import annotations

import pytest

from mqha.chaos.schedule import (
    ALL_CONTROLLERS,
    ASYM_PARTITION,
    BITFLIP,
    BROKER,
    CLIENT_PARTITION,
    CLOCK,
    CONTROLLER,
    CONTROLLER_BRIDGE,
    CONTROLLER_LEADER,
    CONTROLLER_MAJORITY,
    CONTROLLERS,
    DELAY,
    DELAY_FACTORS,
    DISK_WIPE,
    FAULT_KINDS,
    GROUP,
    HOLD_RANGES,
    IN,
    JUMP,
    JUMP_SECONDS,
    KILL,
    LOSS,
    MASTER,
    MASTER_AND_LEADER,
    MASTER_FIRST,
    OUT,
    PARTITION,
    PAUSE,
    PLAN_HEADROOM,
    POWER_LOSS,
    RAFT_LOSS,
    RAFT_PARTITION,
    SETTLE_ESTIMATE,
    SHUFFLED,
    SKEW_SECONDS,
    WITH_CONTROLLER,
    WITH_LEADER,
    FaultStep,
    Topology,
    parse_kinds,
    plan,
    schedule_text,
)

TOPO = Topology.local(3, ["broker-a", "broker-b"], 3)


def test_local_topology_names_match_the_local_cluster() -> None:
    assert TOPO.controllers == ("n0", "n1", "n2")
    assert TOPO.brokers == (
        "broker-a-0",
        "broker-a-1",
        "broker-a-2",
        "broker-b-0",
        "broker-b-1",
        "broker-b-2",
    )
    assert TOPO.group_of("broker-b-1") == "broker-b"


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    a = plan(1, FAULT_KINDS, 600, TOPO)
    assert a == plan(1, FAULT_KINDS, 600, TOPO)
    assert schedule_text(a) == schedule_text(plan(1, FAULT_KINDS, 600, TOPO))
    assert a != plan(2, FAULT_KINDS, 600, TOPO)


def test_kinds_are_taken_in_turn() -> None:
    steps = plan(7, (KILL, PARTITION), 300, TOPO)
    assert [s.kind for s in steps[:4]] == [KILL, PARTITION, KILL, PARTITION]
    assert [s.index for s in steps] == list(range(1, len(steps) + 1))


def test_schedule_fills_the_duration_with_headroom_and_never_is_empty() -> None:
    for seed in range(20):
        steps = plan(seed, FAULT_KINDS, 120, TOPO)
        planned = sum(
            s.hold + s.gap + SETTLE_ESTIMATE[s.kind] + s.stagger * max(0, len(s.nodes) - 1) for s in steps
        )
        assert 120 < planned <= 120 * PLAN_HEADROOM  # the runner stops at the duration, never short of steps
        assert steps
    assert len(plan(0, (KILL,), 0.1, TOPO)) == 1  # a tiny duration still gets one step


def test_a_30_minute_run_plans_at_least_100_faults() -> None:
    assert len(plan(1, FAULT_KINDS, 1800, TOPO)) >= 100


def test_steps_are_well_formed() -> None:
    steps = plan(3, FAULT_KINDS, 3600, TOPO)
    assert {s.kind for s in steps} == set(FAULT_KINDS)
    for s in steps:
        low, high = HOLD_RANGES[s.kind]
        assert low <= s.hold <= high
        linked = (PARTITION, LOSS, ASYM_PARTITION, ALL_CONTROLLERS, DELAY, CLIENT_PARTITION, BITFLIP, CLOCK)
        assert (s.links != "") == (s.kind in linked)
        assert (s.fraction != 0) == (s.kind in (LOSS, DELAY, RAFT_LOSS, CLOCK))
        if s.kind == CLOCK:  # a jump past fileReservedTime, or a skew inside the signature window
            assert s.fraction in (JUMP_SECONDS if s.links == JUMP else SKEW_SECONDS)
        if s.kind == RAFT_LOSS:
            assert s.fraction == 0.8
        if s.kind == DELAY:
            assert s.fraction in DELAY_FACTORS
        if s.kind == CLIENT_PARTITION:
            assert s.target == MASTER and s.group in ("broker-a", "broker-b")
            assert len(s.nodes) == (1 if s.links == WITH_CONTROLLER else 0)
        if s.target == BROKER:
            assert len(s.nodes) == 1 and s.group == TOPO.group_of(s.nodes[0])
        if s.target in (MASTER, MASTER_AND_LEADER) and s.kind != CLIENT_PARTITION:
            assert s.nodes == () and s.group in ("broker-a", "broker-b")
        if s.target == CONTROLLER:
            assert len(s.nodes) == (2 if s.overlap else 1) and set(s.nodes) <= set(TOPO.controllers)
        assert (s.overlap != "") <= (s.kind == DISK_WIPE)
        if s.target == CONTROLLER_MAJORITY:
            assert len(s.nodes) == 2 and set(s.nodes) <= set(TOPO.controllers)
    # every menu entry shows up over a long run
    assert {(s.kind, s.target, s.links) for s in steps} >= {
        (KILL, MASTER, ""),
        (KILL, CONTROLLER_MAJORITY, ""),
        (PAUSE, MASTER_AND_LEADER, ""),
        (PARTITION, MASTER, "replication"),
        (PARTITION, BROKER, "all"),
        (LOSS, BROKER, "controller"),
        (RAFT_PARTITION, CONTROLLER_LEADER, ""),
        (RAFT_PARTITION, CONTROLLER_BRIDGE, ""),
        (ASYM_PARTITION, CONTROLLER_LEADER, OUT),
        (ASYM_PARTITION, CONTROLLER, IN),
        (ALL_CONTROLLERS, CONTROLLERS, KILL),
        (ALL_CONTROLLERS, CONTROLLERS, PAUSE),
        (DELAY, MASTER, "controller"),
        (DELAY, MASTER, "replication"),
        (RAFT_LOSS, CONTROLLERS, ""),
        (RAFT_LOSS, CONTROLLER_LEADER, ""),
        (CLIENT_PARTITION, MASTER, WITH_LEADER),
        (CLIENT_PARTITION, MASTER, WITH_CONTROLLER),
    }
    for s in steps:
        if s.target in (CONTROLLER_BRIDGE, CONTROLLER) and s.kind in (RAFT_PARTITION, ASYM_PARTITION):
            assert len(s.nodes) == 1
        if s.target == CONTROLLERS:
            assert s.nodes == TOPO.controllers


def test_majority_of_one_controller_is_that_controller() -> None:
    topo = Topology.local(1, ["broker-a"], 2)
    majorities = [s for s in plan(5, (KILL, PAUSE), 3600, topo) if s.target == CONTROLLER_MAJORITY]
    assert majorities and all(s.nodes == ("n0",) for s in majorities)


def test_parse_kinds() -> None:
    assert parse_kinds("kill, pause,kill") == (KILL, PAUSE)
    with pytest.raises(ValueError, match=r"unknown fault kind.*flood"):
        parse_kinds("kill,flood")
    with pytest.raises(ValueError, match="none given"):
        parse_kinds(" , ")


def test_plan_rejects_empty_inputs() -> None:
    with pytest.raises(ValueError):
        plan(1, (), 60, TOPO)
    with pytest.raises(ValueError):
        plan(1, (KILL,), 60, Topology((), ()))


def test_describe_and_category() -> None:
    step = FaultStep(2, LOSS, MASTER, 4.0, 1.5, group="broker-a", links="replication", fraction=0.2)
    assert step.category == "loss master[replication]"
    assert step.describe() == (
        "#2   drop 20% of chunks of master(broker-a) [replication links] for 4.0 s; then 1.5 s quiet"
    )
    kill = FaultStep(1, KILL, CONTROLLER_MAJORITY, 1.0, 2.0, nodes=("n0", "n2"))
    assert kill.category == "kill controller-majority"
    assert kill.hits_controllers and kill.controllers_only
    assert "kill -9 controller-majority(n0,n2), restart after 1.0 s" in kill.describe()
    assert not FaultStep(1, PAUSE, MASTER, 1.0, 1.0, group="broker-a").hits_controllers
    both = FaultStep(1, PAUSE, MASTER_AND_LEADER, 1.0, 1.0, group="broker-a")
    assert both.hits_controllers and not both.controllers_only  # a master too: not controllers only


def test_disk_wipes_hit_one_controller_sometimes_with_one_other_killed_or_paused() -> None:
    wipes = [s for s in plan(11, (DISK_WIPE,), 3600, TOPO) if s.kind == DISK_WIPE]
    assert {s.overlap for s in wipes} == {"", KILL, PAUSE}  # each variant shows up
    assert {s.nodes[0] for s in wipes} == set(TOPO.controllers)
    for s in wipes:
        assert s.target == CONTROLLER and s.hits_controllers
        assert len(s.nodes) == (2 if s.overlap else 1)  # never more than one other controller out
        assert len(set(s.nodes)) == len(s.nodes)
        assert HOLD_RANGES[DISK_WIPE][0] <= s.hold <= HOLD_RANGES[DISK_WIPE][1]


def test_disk_wipe_needs_three_controllers() -> None:
    with pytest.raises(ValueError, match="at least 3 controllers"):
        plan(1, (KILL, DISK_WIPE), 60, Topology.local(2, ["broker-a"], 2))
    assert plan(1, (KILL,), 60, Topology.local(2, ["broker-a"], 2))
    assert parse_kinds("disk-wipe,kill") == (DISK_WIPE, KILL)


def test_disk_wipe_category_and_description_name_the_overlap() -> None:
    alone = FaultStep(1, DISK_WIPE, CONTROLLER, 1.5, 2.0, nodes=("n1",))
    assert alone.category == "disk-wipe controller"
    assert "wipe the store of controller(n1), restart after 1.5 s, replace its voter;" in alone.describe()
    killed = FaultStep(2, DISK_WIPE, CONTROLLER, 1.0, 2.0, nodes=("n0", "n2"), overlap=KILL)
    assert killed.category == "disk-wipe controller+kill"
    assert "(kill -9 n2 until it is an observer)" in killed.describe()
    paused = FaultStep(3, DISK_WIPE, CONTROLLER, 1.0, 2.0, nodes=("n0", "n1"), overlap=PAUSE)
    assert paused.category == "disk-wipe controller+pause"
    assert "(SIGSTOP n1 until it is an observer)" in paused.describe()


def test_adding_disk_wipe_leaves_other_kinds_schedules_alone() -> None:
    # Only disk-wipe steps draw the overlap: a seed's schedule without them is what it was.
    steps = plan(4, (KILL, PAUSE), 300, TOPO)
    assert all(s.overlap == "" for s in steps)
    assert steps == plan(4, (KILL, PAUSE), 300, TOPO)


def test_disk_full_fills_one_replica_or_the_master() -> None:
    from mqha.chaos.schedule import DISK_FULL

    steps = plan(5, (DISK_FULL,), 600, TOPO)
    assert {s.target for s in steps} == {BROKER, MASTER}
    for s in steps:
        assert HOLD_RANGES[DISK_FULL][0] <= s.hold <= HOLD_RANGES[DISK_FULL][1]
        assert (len(s.nodes) == 1) == (s.target == BROKER) and s.group is not None
        assert "until ENOSPC" in s.describe()


def test_disk_full_needs_broker_stores_on_their_own_tmpfs() -> None:
    from mqha.chaos.disk_fill import MIN_STORE_TMPFS_MIB, disk_full_problem

    assert "--store-tmpfs-mib" in (disk_full_problem(0) or "")
    assert "never fills the machine's real disk" in (disk_full_problem(0) or "")
    assert "at least" in (disk_full_problem(MIN_STORE_TMPFS_MIB - 1) or "")


def test_power_loss_steps_hit_one_broker_a_master_or_a_whole_group_in_a_planned_order() -> None:
    steps = plan(5, (POWER_LOSS,), 3600, TOPO)
    targets = {s.target for s in steps}
    assert targets == {GROUP, MASTER, BROKER}
    orders = set()
    for s in steps:
        low, high = HOLD_RANGES[POWER_LOSS]
        assert low <= s.hold <= high
        if s.target == GROUP:
            assert s.group is not None and sorted(s.nodes) == sorted(dict(TOPO.groups)[s.group])
            assert s.order in (SHUFFLED, MASTER_FIRST) and s.stagger > 0
            orders.add(s.order)
            assert f"group({s.group})" in s.describe() and ",".join(s.nodes) in s.describe()
        else:
            assert (s.order, s.stagger) == ("", 0.0)
    assert orders == {SHUFFLED, MASTER_FIRST}
    first = next(s for s in steps if s.order == MASTER_FIRST)
    assert first.category == "power-loss group[master first]"
    assert "the master first" in first.describe()


def test_adding_power_loss_did_not_change_the_other_kinds_schedules() -> None:
    # The draws for power-loss happen only for its steps: old seeds replay the same faults.
    kinds = (KILL, PAUSE, PARTITION, LOSS, DISK_WIPE)
    assert all(s.order == "" and s.stagger == 0.0 for s in plan(1, kinds, 600, TOPO))
    assert schedule_text(plan(1, (DISK_WIPE,), 20, TOPO)).count("wipe the store") == 2


def test_clone_copies_the_store_of_a_master_or_a_replica() -> None:
    from mqha.chaos.schedule import CLONE

    steps = plan(7, (CLONE,), 600, TOPO)
    assert {s.target for s in steps} == {BROKER, MASTER}
    for s in steps:
        assert HOLD_RANGES[CLONE][0] <= s.hold <= HOLD_RANGES[CLONE][1]
        assert (len(s.nodes) == 1) == (s.target == BROKER) and s.group is not None
        assert "start a copy of the store of" in s.describe() and "unless refused" in s.describe()
