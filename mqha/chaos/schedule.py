"""The fault schedule of a chaos run: seed + fault kinds + duration + topology -> fault steps (core).

Pure: no clock, no IO. The same inputs always give the same list, so ``--seed N`` replays a run's
faults (which role is hit, for how long, on which links). Roles that only exist at run time -- the
master of a group, the controller leader -- are named here and resolved by the runner when the step
starts; nodes that do not depend on the run (a random broker, a controller majority) are chosen here.

A step is: inject, hold for ``hold`` seconds, heal (restart / SIGCONT / unblock), wait until the
cluster is whole again, then wait ``gap`` seconds before the next step.

A ``disk-wipe`` step kills a controller, wipes its store and, after ``hold``, restarts it and brings
it back through the disk-replacement procedure (docs/raft.md §10). Sometimes (``overlap``)
one other controller is killed or paused at the same moment and healed once the wiped one runs as an
observer: a minority of the controllers is wiped, and for a while a second one is out too.

A ``disk-full`` step fills the file system of one broker's store (a random replica, or the master)
with a filler file until ``ENOSPC`` and, after ``hold``, deletes it (``mqha.chaos.disk_fill``); the
stores must be on their own small file systems (``--store-tmpfs-mib``).

A ``raft-partition`` step splits the controllers with the kernel's packet filter (``mqha.chaos.netfilter``):
the leader of the moment, or one controller chosen here, against the others; or, as a *bridge*, two
controllers cut from each other while a third (chosen here) still talks to both. An
``asym-partition`` step drops one direction only between the leader of the moment (or a chosen
controller) and the other controllers: what it sends (``out``) or what it receives (``in``). The
brokers keep reaching every controller. An ``all-controllers`` step kills (``kill``) or pauses
(``pause``) every controller at once: the data plane must keep serving without them.

A ``bitflip`` step flips one bit of one message record in a commit-log segment other than the last
of one broker (a random replica, or the master), stopped (SIGKILL, flip, restart after ``hold``) or
running (``mqha.chaos.bitflips``): the replica must find the damage and repair it from another one.

A ``clock`` step moves the wall clock of one process (``mqha.chaos.clock_faults``, through the shim of
``shim/``): a *jump* of a broker (the master, or one chosen here) ``fraction`` seconds ahead (83 or 100
hours: past ``fileReservedTime``), or a *skew* of a broker or a controller by a few seconds (inside the
signature window); after ``hold`` it is put back. Only the wall clock moves, never the monotonic one.

A ``power-loss`` step cuts the power of one broker (a random replica, or the master) or of every
replica of a group at once: SIGKILL, then each store loses exactly its un-fsynced commit-log writes
(``mqha.chaos.power_loss``), then after ``hold`` the nodes come back one by one, ``stagger`` seconds
apart, in the order planned here (``nodes``), or with the master of the moment first
(``order == MASTER_FIRST``: the replica that lost the most, when the others had flushed, returns alone).

A ``clone`` step copies the store of a running replica (usually the master) and starts the copy as
another process with its own ports (``mqha.chaos.clones``): it claims a live replica's broker id and
must be refused and stop on its own; one still running at the heal fails the run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

KILL = "kill"
PAUSE = "pause"
PARTITION = "partition"
LOSS = "loss"
DISK_WIPE = "disk-wipe"
DISK_FULL = "disk-full"
POWER_LOSS = "power-loss"
RAFT_PARTITION = "raft-partition"
ASYM_PARTITION = "asym-partition"
ALL_CONTROLLERS = "all-controllers"
DELAY = "delay"
RAFT_LOSS = "raft-loss"
CLIENT_PARTITION = "client-partition"
BITFLIP = "bitflip"
CLOCK = "clock"
CLONE = "clone"
FAULT_KINDS = (
    KILL,
    PAUSE,
    PARTITION,
    LOSS,
    DISK_WIPE,
    DISK_FULL,
    POWER_LOSS,
    RAFT_PARTITION,
    ASYM_PARTITION,
    ALL_CONTROLLERS,
    DELAY,
    RAFT_LOSS,
    CLIENT_PARTITION,
    BITFLIP,
    CLOCK,
    CLONE,
)
PACKET_FILTER_KINDS = frozenset({RAFT_PARTITION, ASYM_PARTITION, RAFT_LOSS, CLIENT_PARTITION})
"""Kinds that need the kernel's packet filter (root and nft)."""
DISK_WIPE_MIN_CONTROLLERS = 3  # the others must keep the cluster (and a quorum to change voters)
WIPE_OVERLAPS = ("", "", KILL, PAUSE)  # what hits one other controller meanwhile ("": nothing)

# Targets: which node(s) a step hits.
BROKER = "broker"  # a broker chosen here (any group)
MASTER = "master"  # the master of ``group`` when the step starts
CONTROLLER = "controller"  # a controller chosen here
CONTROLLER_LEADER = "controller-leader"  # the Raft leader when the step starts
CONTROLLER_MAJORITY = "controller-majority"  # a majority of the controllers, chosen here
CONTROLLERS = "controllers"  # every controller at once
CONTROLLER_BRIDGE = "controller-bridge"  # raft-partition: the others cut from each other, this one between
MASTER_AND_LEADER = "master+controller-leader"  # brokers and controllers together
GROUP = "group"  # every replica of a group chosen here (power-loss)

# Restart orders of a whole-group power-loss: the planned shuffle, or the master of the moment first.
SHUFFLED = "shuffled"
MASTER_FIRST = "master-first"
POWER_ORDERS = (SHUFFLED, MASTER_FIRST)
STAGGER_RANGE = (0.5, 3.0)  # seconds between two restarts after a whole-group power cut

# Link scopes of a partition or a loss (broker links only; see ``mqha.chaos.links``).
ALL_LINKS = "all"
CONTROLLER_LINKS = "controller"  # broker <-> controllers
REPLICATION_LINKS = "replication"  # master <-> slaves
# The controller on the clients' side of a client-partition: the leader of the moment, or one chosen here.
WITH_LEADER = "with-leader"
WITH_CONTROLLER = "with-controller"
# A bitflip's node: stopped for the flip and restarted at the heal, or flipped while it runs.
STOPPED = "stopped"
RUNNING = "running"
# A bitflip of a file read at start (the node stopped; mqha.chaos.bitflips): which file.
RAFT_FLIP = "raft-store"  # a controller's raft.journal or raft.dump
EPOCH_FLIP = "epoch-file"  # a broker's epochFileCheckpoint
CHECKPOINT_FLIP = "checkpoint"  # a broker's confirmOffsetCheckpoint
# How a clock step moves a wall clock, and by how many seconds.
JUMP = "jump"
SKEW = "skew"
JUMP_SECONDS = (83 * 3600.0, 100 * 3600.0)  # past fileReservedTime (72 h): retention must not act on it
SKEW_SECONDS = (-30.0, -10.0, 10.0, 30.0)  # inside the 60 s signature window (docs/architecture.md §12.2)
# Directions of an asym-partition, seen from its target controller.
OUT = "out"  # what it sends is dropped
IN = "in"  # what it receives is dropped

CONTROLLER_TARGETS = frozenset(
    {CONTROLLER, CONTROLLER_LEADER, CONTROLLER_MAJORITY, CONTROLLERS, CONTROLLER_BRIDGE}
)

# What each kind may hit. Partitions and loss act on the per-broker link proxies; raft and asym
# partitions on the controllers' own traffic, through the kernel's packet filter.
_MENU: dict[str, tuple[tuple[str, str], ...]] = {
    KILL: (
        (MASTER, ""),
        (MASTER, ""),
        (BROKER, ""),
        (CONTROLLER_LEADER, ""),
        (CONTROLLER, ""),
        (CONTROLLER_MAJORITY, ""),
        (MASTER_AND_LEADER, ""),
    ),
    PAUSE: (
        (MASTER, ""),
        (MASTER, ""),
        (BROKER, ""),
        (CONTROLLER_LEADER, ""),
        (CONTROLLER_MAJORITY, ""),
        (MASTER_AND_LEADER, ""),
    ),
    PARTITION: (
        (MASTER, ALL_LINKS),
        (MASTER, ALL_LINKS),
        (MASTER, CONTROLLER_LINKS),
        (MASTER, REPLICATION_LINKS),
        (BROKER, ALL_LINKS),
    ),
    LOSS: (
        (MASTER, ALL_LINKS),
        (MASTER, REPLICATION_LINKS),
        (BROKER, CONTROLLER_LINKS),
    ),
    DISK_WIPE: ((CONTROLLER, ""),),
    DISK_FULL: ((BROKER, ""), (BROKER, ""), (MASTER, "")),
    POWER_LOSS: ((GROUP, ""), (GROUP, ""), (MASTER, ""), (BROKER, "")),
    RAFT_PARTITION: (
        (CONTROLLER_LEADER, ""),
        (CONTROLLER_LEADER, ""),
        (CONTROLLER, ""),
        (CONTROLLER_BRIDGE, ""),
    ),
    ASYM_PARTITION: ((CONTROLLER_LEADER, OUT), (CONTROLLER_LEADER, IN), (CONTROLLER, OUT), (CONTROLLER, IN)),
    ALL_CONTROLLERS: ((CONTROLLERS, KILL), (CONTROLLERS, PAUSE)),
    DELAY: (
        (MASTER, CONTROLLER_LINKS),
        (MASTER, CONTROLLER_LINKS),
        (BROKER, CONTROLLER_LINKS),
        (MASTER, REPLICATION_LINKS),
        (MASTER, ALL_LINKS),
    ),
    RAFT_LOSS: ((CONTROLLER_LEADER, ""), (CONTROLLER, ""), (CONTROLLERS, "")),
    CLIENT_PARTITION: ((MASTER, WITH_LEADER), (MASTER, WITH_CONTROLLER)),
    BITFLIP: (
        (BROKER, STOPPED),
        (BROKER, RUNNING),
        (MASTER, RUNNING),
        (MASTER, STOPPED),
        (CONTROLLER, RAFT_FLIP),
        (MASTER, EPOCH_FLIP),
        (BROKER, CHECKPOINT_FLIP),
    ),
    CLOCK: ((MASTER, JUMP), (MASTER, JUMP), (BROKER, JUMP), (MASTER, SKEW), (CONTROLLER_LEADER, SKEW)),
    CLONE: ((MASTER, ""), (MASTER, ""), (BROKER, "")),
}

# Seconds a fault is held (kill: how long the node stays down before its restart), by kind.
HOLD_RANGES: dict[str, tuple[float, float]] = {
    KILL: (0.5, 3.0),
    PAUSE: (0.5, 5.0),
    PARTITION: (2.0, 6.0),
    LOSS: (3.0, 8.0),
    DISK_WIPE: (0.5, 3.0),  # down with an empty store before the restart
    DISK_FULL: (4.0, 10.0),  # long enough for a full slave to run out of room and leave the SyncStateSet
    POWER_LOSS: (0.5, 3.0),  # dark before the first restart
    RAFT_PARTITION: (2.0, 6.0),
    ASYM_PARTITION: (2.0, 6.0),
    ALL_CONTROLLERS: (1.0, 5.0),
    DELAY: (3.0, 8.0),
    RAFT_LOSS: (3.0, 8.0),
    CLIENT_PARTITION: (4.0, 10.0),  # long enough for the cut-off master to try a shrink (#7017)
    BITFLIP: (0.5, 3.0),  # stopped: down before its restart
    CLOCK: (3.0, 8.0),  # a few retention passes (cleanResourceInterval 1 s in a run with clock steps)
    CLONE: (3.0, 6.0),  # the copy runs beside its original (it is refused within seconds)
}
GAP_RANGE = (1.0, 3.0)  # quiet seconds after the cluster is whole again
LOSS_FRACTIONS = (0.05, 0.1, 0.2, 0.3)
RAFT_LOSS_FRACTION = 0.8  # of the packets between controllers, as the reference's own tests
DELAY_FACTORS = (0.5, 0.9, 1.1, 1.5)
"""A ``delay`` step's latency, in units of ``controllerHeartBeatTimeoutMills``: below and above it."""
DELAY_JITTER = 0.2  # of the delay: each chunk is late by delay +- this share
SETTLE_ESTIMATE = {
    KILL: 4.0,
    PAUSE: 3.0,
    PARTITION: 3.0,
    LOSS: 1.0,
    DISK_WIPE: 6.0,
    DISK_FULL: 5.0,
    POWER_LOSS: 8.0,  # plus the staggered restarts
    RAFT_PARTITION: 2.0,
    ASYM_PARTITION: 2.0,
    ALL_CONTROLLERS: 3.0,
    DELAY: 3.0,
    RAFT_LOSS: 2.0,
    CLIENT_PARTITION: 4.0,
    BITFLIP: 4.0,
    CLOCK: 4.0,
    CLONE: 1.0,
}  # planning only: heal -> whole
PLAN_HEADROOM = 1.5
"""The plan holds steps for this many times the duration (by the estimates above): settling is often
quicker than estimated, and the runner, which starts no step after the duration, must not run out of
steps before it. A run injects a prefix of the plan, so the same seed still replays the same faults."""


@dataclass(frozen=True)
class Topology:
    """The nodes of the cluster under test, by name."""

    controllers: tuple[str, ...]
    groups: tuple[tuple[str, tuple[str, ...]], ...]  # (brokerName, its replica node names)

    @classmethod
    def local(cls, controllers: int, groups: Sequence[str], replicas: int) -> Topology:
        """The node names ``mqha.cluster.local.LocalCluster`` gives: ``n0``.., ``<group>-0``.."""
        return cls(
            tuple(f"n{i}" for i in range(controllers)),
            tuple((g, tuple(f"{g}-{r}" for r in range(replicas))) for g in groups),
        )

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(b for _, members in self.groups for b in members)

    def group_of(self, broker: str) -> str:
        return next(g for g, members in self.groups if broker in members)


@dataclass(frozen=True)
class FaultStep:
    """One fault of a schedule: its kind, its target, how long it holds and the gap after it.

    ``nodes``: the nodes chosen here (empty for run-time roles); ``group``: the broker group a master
    target refers to (also the group of a chosen broker).
    """

    index: int
    kind: str
    target: str
    hold: float
    gap: float
    nodes: tuple[str, ...] = ()
    group: str | None = None
    links: str = ""  # partition / loss / delay: ALL_LINKS | CONTROLLER_LINKS | REPLICATION_LINKS; asym: OUT |
    # IN; all-controllers: KILL | PAUSE; client-partition: WITH_LEADER | WITH_CONTROLLER (``nodes``);
    # bitflip: STOPPED | RUNNING | RAFT_FLIP | EPOCH_FLIP | CHECKPOINT_FLIP; clock: JUMP | SKEW
    fraction: float = 0.0  # loss, raft-loss: the share of chunks / packets dropped; delay: DELAY_FACTORS;
    # clock: the seconds the wall clock moves
    overlap: str = ""  # disk-wipe: KILL or PAUSE of ``nodes[1:]`` meanwhile, "" for none
    order: str = ""  # power-loss of a group: SHUFFLED (``nodes`` in order) or MASTER_FIRST
    stagger: float = 0.0  # power-loss of a group: seconds between two restarts

    @property
    def category(self) -> str:
        """What the verdict groups recovery times by: kind, target, link scope, overlapping fault."""
        scope = f"[{self.links}]" if self.links else ""
        also = f"+{self.overlap}" if self.overlap else ""
        order = "[master first]" if self.order == MASTER_FIRST else ""
        late = f" x{self.fraction:g}" if self.kind == DELAY else ""  # below or above the heartbeat timeout
        return f"{self.kind} {self.target}{scope}{order}{also}{late}"

    @property
    def hits_controllers(self) -> bool:
        return self.target in CONTROLLER_TARGETS or self.target == MASTER_AND_LEADER

    @property
    def controllers_only(self) -> bool:
        """It hits controllers and nothing else: no broker, no broker link, no client."""
        return self.target in CONTROLLER_TARGETS

    def describe(self) -> str:
        who = self.target
        if self.target == GROUP:
            who += f"({self.group})"
        elif self.nodes:
            who += "(" + ",".join(self.nodes) + ")"
        elif self.group is not None:
            who += f"({self.group})"
        what = {
            KILL: f"kill -9 {who}, restart after {self.hold:.1f} s",
            PAUSE: f"SIGSTOP {who} for {self.hold:.1f} s",
            PARTITION: f"partition {who} [{self.links} links] for {self.hold:.1f} s",
            LOSS: f"drop {self.fraction:.0%} of chunks of {who} [{self.links} links] for {self.hold:.1f} s",
            DISK_WIPE: self._describe_wipe(),
            DISK_FULL: f"fill the disk of {who} until ENOSPC, free it after {self.hold:.1f} s",
            POWER_LOSS: self._describe_power(who),
            RAFT_PARTITION: self._describe_raft(who),
            ASYM_PARTITION: f"drop what {who} {'sends to' if self.links == OUT else 'receives from'} the "
            f"other controllers for {self.hold:.1f} s",
            ALL_CONTROLLERS: f"{'kill -9' if self.links == KILL else 'SIGSTOP'} every controller, "
            f"{'restart' if self.links == KILL else 'SIGCONT'} after {self.hold:.1f} s",
            DELAY: f"delay {who} [{self.links} links] by {self.fraction:g} x the heartbeat timeout "
            f"(+-{DELAY_JITTER:.0%}) for {self.hold:.1f} s",
            RAFT_LOSS: f"drop {self.fraction:.0%} of the packets between {who} and the other controllers "
            f"for {self.hold:.1f} s",
            CLIENT_PARTITION: self._describe_client_partition(),
            BITFLIP: self._describe_flip(who),
            CLOCK: f"{'step' if self.links == JUMP else 'skew'} the wall clock of {who} by "
            f"{_signed(self.fraction)} for {self.hold:.1f} s, then back",
            CLONE: f"start a copy of the store of {who} as another replica, stop it after {self.hold:.1f} s "
            "unless refused",
        }[self.kind]
        return f"#{self.index:<3} {what}; then {self.gap:.1f} s quiet"

    def _describe_flip(self, who: str) -> str:
        if self.links == RUNNING:
            return f"flip a bit in an older commit-log segment of {who} (running)"
        where = {
            RAFT_FLIP: "its Raft journal or snapshot",
            EPOCH_FLIP: "its epoch file",
            CHECKPOINT_FLIP: "its confirmOffsetCheckpoint",
        }.get(self.links, "an older commit-log segment")
        return f"flip a bit in {where} of {who} (stopped, restarted after {self.hold:.1f} s)"

    def _describe_power(self, who: str) -> str:
        what = f"power cut of {who} (kill -9, lose un-fsynced writes), back after {self.hold:.1f} s"
        if self.target == GROUP:
            first = "the master first, then " if self.order == MASTER_FIRST else ""
            what += f", {first}in order {','.join(self.nodes)} every {self.stagger:.1f} s"
        return what

    def _describe_raft(self, who: str) -> str:
        if self.target == CONTROLLER_BRIDGE:
            return f"cut the other controllers from each other ({who} reaches them all) for {self.hold:.1f} s"
        return f"partition {who} from the other controllers for {self.hold:.1f} s"

    def _describe_client_partition(self) -> str:
        side = "the controller leader" if self.links == WITH_LEADER else f"controller {','.join(self.nodes)}"
        return (
            f"cut master({self.group}), {side} and every client off from the rest of the cluster "
            f"for {self.hold:.1f} s"
        )

    def _describe_wipe(self) -> str:
        wiped, others = (self.nodes[0], self.nodes[1:]) if self.nodes else ("?", ())
        what = f"wipe the store of {self.target}({wiped}), restart after {self.hold:.1f} s, replace its voter"
        if self.overlap and others:
            verb = "kill -9" if self.overlap == KILL else "SIGSTOP"
            what += f" ({verb} {','.join(others)} until it is an observer)"
        return what


def _signed(seconds: float) -> str:
    return f"{seconds / 3600:+g} h" if abs(seconds) >= 3600 else f"{seconds:+g} s"


def parse_kinds(text: str) -> tuple[str, ...]:
    """``kill,pause`` -> the kinds, validated and without repeats (ValueError names the bad one)."""
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise ValueError(
            f"unknown fault kind(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(FAULT_KINDS)}"
        )
    return kinds


def _round(value: float) -> float:
    return round(value, 1)


def _targets(
    rng: random.Random, kind: str, target: str, links: str, topology: Topology
) -> tuple[tuple[str, ...], str | None]:
    """The nodes chosen here for a step, and the group it refers to."""
    if target == BROKER:
        broker = rng.choice(topology.brokers)
        return (broker,), topology.group_of(broker)
    if target == GROUP:
        group, members = rng.choice(topology.groups)
        return tuple(rng.sample(members, len(members))), group  # the restart order
    if target in (MASTER, MASTER_AND_LEADER):
        group = rng.choice(topology.groups)[0]
        if kind == CLIENT_PARTITION and links == WITH_CONTROLLER:
            return (rng.choice(topology.controllers),), group
        return (), group
    if target in (CONTROLLER, CONTROLLER_BRIDGE):
        return (rng.choice(topology.controllers),), None
    if target == CONTROLLER_MAJORITY:
        majority = len(topology.controllers) // 2 + 1
        return tuple(sorted(rng.sample(topology.controllers, majority))), None
    if target == CONTROLLERS:
        return tuple(topology.controllers), None
    return (), None


def _fraction(rng: random.Random, kind: str, links: str) -> float:
    if kind == CLOCK:
        return rng.choice(JUMP_SECONDS if links == JUMP else SKEW_SECONDS)
    if kind == LOSS:
        return rng.choice(LOSS_FRACTIONS)
    if kind == DELAY:
        return rng.choice(DELAY_FACTORS)
    return RAFT_LOSS_FRACTION if kind == RAFT_LOSS else 0.0


def plan(seed: int, kinds: Sequence[str], duration: float, topology: Topology) -> list[FaultStep]:
    """The steps that fit in ``PLAN_HEADROOM`` x ``duration`` seconds (by each step's hold, gap and an
    estimate of the settling time), kinds taken in turn so every listed kind is exercised, everything
    else drawn from ``random.Random(seed)``."""
    if not kinds:
        raise ValueError("at least one fault kind")
    if not topology.controllers or not topology.brokers:
        raise ValueError("a topology needs controllers and brokers")
    if DISK_WIPE in kinds and len(topology.controllers) < DISK_WIPE_MIN_CONTROLLERS:
        raise ValueError(f"{DISK_WIPE} needs at least {DISK_WIPE_MIN_CONTROLLERS} controllers")
    for kind in PACKET_FILTER_KINDS & set(kinds):
        if len(topology.controllers) < 3:
            raise ValueError(f"{kind} needs at least 3 controllers")
    rng = random.Random(seed)
    steps: list[FaultStep] = []
    spent = 0.0
    budget = duration * PLAN_HEADROOM
    while True:
        kind = kinds[len(steps) % len(kinds)]
        target, links = rng.choice(_MENU[kind])
        hold = _round(rng.uniform(*HOLD_RANGES[kind]))
        gap = _round(rng.uniform(*GAP_RANGE))
        nodes, group = _targets(rng, kind, target, links, topology)
        fraction = _fraction(rng, kind, links)
        overlap = ""
        if kind == DISK_WIPE:
            overlap = rng.choice(WIPE_OVERLAPS)
            if overlap:
                nodes += (rng.choice([c for c in topology.controllers if c not in nodes]),)
        order, stagger = "", 0.0
        if target == GROUP:
            order = rng.choice(POWER_ORDERS)
            stagger = _round(rng.uniform(*STAGGER_RANGE))
        spent += hold + gap + SETTLE_ESTIMATE[kind] + stagger * max(0, len(nodes) - 1)
        if spent > budget and steps:
            return steps
        steps.append(
            FaultStep(
                len(steps) + 1,
                kind,
                target,
                hold,
                gap,
                nodes,
                group,
                links,
                fraction,
                overlap,
                order=order,
                stagger=stagger,
            )
        )
        if spent > budget:
            return steps


def schedule_text(steps: Sequence[FaultStep]) -> str:
    """The schedule as printed by ``mqha chaos --plan`` (compare two runs' schedules with diff)."""
    return "\n".join(step.describe() for step in steps) + "\n"
