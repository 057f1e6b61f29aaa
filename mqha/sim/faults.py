"""The fault injector: each step, each kind of fault strikes with its run's probability.

Broker faults: crash (the process restarts later), pause (the process is frozen: it neither sends
nor receives, its peers see its links cut), power loss (the un-fsynced tail is gone; restarts later),
disk wipe (restarts on an empty disk). Controller faults: crash (its soft state is lost; the log
survives). Network faults: a partition between two nodes (the client counts as one), healed later;
message loss and the random delays that reorder messages are the world's.

Under ASYNC_FLUSH a power loss strikes only while every other broker has fsynced its whole log: a
cut of unflushed data on several replicas at once loses acknowledged messages by design, and the
controller declares it (docs/architecture.md §4.3); the simulator checks what must never happen.
"""

from __future__ import annotations

from typing import Any

NODES = ["c1", "c2", "c3", "b1", "b2", "b3", "client"]


def _later(sim: Any, low: int, high: int, action: object) -> None:
    sim.world.at(sim.world.rng.randint(low, high), action)  # type: ignore[arg-type]


def _restart(sim: Any, broker: object) -> None:
    def go() -> None:
        if not broker.up:  # type: ignore[attr-defined]
            broker.start()  # type: ignore[attr-defined]

    return go  # type: ignore[return-value]


def inject(sim: Any) -> None:
    up = [b for b in sim.brokers if b.up and b.name not in sim.world.down]
    _broker_faults(sim, up)
    _network_and_controller_faults(sim, up)


def _broker_faults(sim: Any, up: list[Any]) -> None:
    world, faults, rng = sim.world, sim.world.faults, sim.world.rng
    if up and faults.crash and rng.random() < faults.crash:
        _broker_fault(sim, rng.choice(up), "crash")
    if up and faults.power_loss and rng.random() < faults.power_loss:
        victim = rng.choice(up)
        if sim.config.sync_flush or _held_elsewhere(sim, victim, power=True):
            _broker_fault(sim, victim, "power")
    if up and faults.disk_wipe and rng.random() < faults.disk_wipe:
        victim = rng.choice(up)
        if _held_elsewhere(sim, victim):
            _broker_fault(sim, victim, "wipe")
    if up and faults.pause and rng.random() < faults.pause:
        victim = rng.choice(up)
        world.down.add(victim.name)
        _fault(sim, f"pause {victim.name}")
        _later(sim, 200, 1_500, lambda v=victim: _resume(sim, v.name))


def _network_and_controller_faults(sim: Any, up: list[Any]) -> None:
    world, faults, rng = sim.world, sim.world.faults, sim.world.rng
    if faults.partition and rng.random() < faults.partition:
        a, b = rng.sample(NODES, 2)
        pair = frozenset((a, b))
        if pair not in world.cut:
            world.cut.add(pair)
            _fault(sim, f"partition {a} | {b}")
            _later(sim, 300, 2_500, lambda p=pair: _heal_pair(sim, p))
    if faults.split and rng.random() < faults.split and not world.cut:
        nodes = sorted(NODES)
        rng.shuffle(nodes)
        cut = rng.randint(2, len(nodes) - 2)
        _split(sim, nodes[:cut])
    if faults.leader_split and rng.random() < faults.leader_split and not world.cut:
        masters = [b.name for b in up if b.role.is_master]
        group = next(iter(sim.controllers.state.groups.values()), None)
        replicated = group is not None and len(group.sync_state_set) >= 2  # #7017 starts from a set of 2+
        if sim.controllers.leader is not None and masters and replicated:
            _split(sim, [sim.controllers.leader, masters[0], "client"], low=2_000, high=4_000)
    group_cut = up and faults.group_power_loss and rng.random() < faults.group_power_loss
    if group_cut and (sim.config.sync_flush or _fsynced_somewhere(sim)):
        for broker in up:
            _broker_fault(sim, broker, "power")
    if up and faults.disk_full and rng.random() < faults.disk_full:
        victim = rng.choice(up)
        victim.disk.full = True
        _fault(sim, f"disk full {victim.name}")
        _later(sim, 200, 1_500, lambda v=victim: setattr(v.disk, "full", False))
    if up and faults.clone and rng.random() < faults.clone and len(sim.brokers) == 3:
        _clone(sim, rng.choice(up))
    if faults.controller_crash and rng.random() < faults.controller_crash:
        node = rng.choice(sorted(sim.controllers.nodes))
        if node not in world.down:
            world.down.add(node)
            sim.controllers.crash(node)
            _fault(sim, f"crash {node}")
            _later(sim, 200, 1_500, lambda n=node: _resume(sim, n))


def _held_elsewhere(sim: Any, victim: object, *, power: bool = False) -> bool:
    """Every acknowledged message is on another disk (or, for a power loss, in the victim's fsynced
    part): losing ``victim``'s disk (or its un-fsynced tail) is within the fault budget. Losing the only
    copies of a message is a loss no replication protocol prevents; under ASYNC_FLUSH the controller
    declares it (docs/architecture.md §4.3)."""
    from mqha.sim.storage import message_at

    logs = [b.disk.log for b in sim.brokers if b is not victim]
    if power:
        logs.append(victim.disk.log[: victim.disk.flushed])  # type: ignore[attr-defined]
    return all(
        any(message_at(log, offset) == msg for log in logs)  # type: ignore[arg-type]
        for msg, offset in sim.checker.acked.items()
    )


def _split(sim: Any, left: list[str], low: int = 500, high: int = 3_000) -> None:
    """Cut ``left`` from every other node for a while."""
    right = [n for n in NODES if n not in left]
    pairs = {frozenset((a, b)) for a in left for b in right}
    sim.world.cut |= pairs
    _fault(sim, f"split {sorted(left)} | {sorted(right)}")
    _later(sim, low, high, lambda: [_heal_pair(sim, p) for p in sorted(pairs, key=sorted)])


def _clone(sim: Any, original: object) -> None:
    """A copy of ``original``'s store (its identity files with it) starts as another process."""
    import copy

    from mqha.sim.brokers import Broker

    disk = copy.deepcopy(original.disk)  # type: ignore[attr-defined]
    clone = Broker(sim, "b4", disk, original.config)  # type: ignore[attr-defined]
    sim.brokers.append(clone)
    _fault(sim, f"clone {original.name} as b4")  # type: ignore[attr-defined]
    clone.start()


def _fsynced_somewhere(sim: Any) -> bool:
    """Every acknowledged message is fsynced on some disk: a power cut of the whole group is within
    the fault budget under ASYNC_FLUSH (issue 25's case: the slaves had fsynced what the master had not)."""
    from mqha.sim.storage import message_at

    logs = [b.disk.log[: b.disk.flushed] for b in sim.brokers]
    return all(
        any(message_at(log, offset) == msg for log in logs)  # type: ignore[arg-type]
        for msg, offset in sim.checker.acked.items()
    )


def _fault(sim: Any, text: str) -> None:
    sim.fault_log.append(f"{sim.world.now_ms} {text}")
    sim.world.note(f"FAULT {text}")


def _broker_fault(sim: Any, broker: object, how: str) -> None:
    _fault(sim, f"{how} {broker.name}")  # type: ignore[attr-defined]
    broker.stop(how)  # type: ignore[attr-defined]
    if how != "crash":
        sim.checker.cuts += 1
    _later(sim, 200, 1_500, _restart(sim, broker))


def _resume(sim: Any, name: str) -> None:
    if name in sim.world.down:
        sim.world.down.discard(name)
        sim.world.note(f"resume {name}")


def _heal_pair(sim: Any, pair: frozenset[str]) -> None:
    if pair in sim.world.cut:
        sim.world.cut.discard(pair)
        sim.world.note(f"heal {' | '.join(sorted(pair))}")


def heal(sim: Any) -> None:
    """End of the faults: every partition healed, every node resumed, every broker started."""
    sim.world.cut.clear()
    sim.world.down.clear()
    sim.world.note("HEAL")
    for broker in sim.brokers:
        if not broker.up:
            broker.start()
