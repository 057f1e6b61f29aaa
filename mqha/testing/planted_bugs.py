"""TEST ONLY: planted bugs that the chaos harness must catch (``mqha chaos --plant NAME``).

A planted bug replaces one part of a broker or a controller at start-up, when its environment names
it; the production modules carry no switch. Each bug is one a fault kind of the chaos run exists to
find (``PLANTED``: name -> environment variable, process, what it breaks, the kinds that catch it).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mqha.autoswitch_ha.ack import AckStatus
from mqha.wire.broker_api import Appended

ACK_BEFORE_REPLICATION_ENV = "MQHA_TEST_ONLY_ACK_BEFORE_REPLICATION"
"""``=1`` in a broker's environment: its put path answers before any replica acked, whatever the ack
policy, so a run can show that it catches lost acknowledged messages. Never set it anywhere else."""
ANSWER_BEFORE_COMMIT_ENV = "MQHA_TEST_ONLY_ANSWER_BEFORE_COMMIT"
"""``=1`` in a controller's environment: the leader answers a topic write (updateTopic, deleteTopic) as
soon as it has handed it to its own log, before a quorum has it -- a leader cut off from the others
acknowledges decisions that never commit. (Only topic writes: the brokers' own writes stay correct, so
a run's start is not the first thing to break.)"""
STALE_LEADER_ENV = "MQHA_TEST_ONLY_STALE_LEADER"
"""``=1`` in a controller's environment: once it has led, it goes on claiming to lead until it hears
of another leader (no leader lease), and it grants AlterSyncStateSet from its own copy of the state
without a Raft commit -- a leader cut off with the old master lets it shrink the SyncStateSet to
itself and acknowledge alone (the RocketMQ #7017 shape)."""
MASTER_NEEDS_CONTROLLER_ENV = "MQHA_TEST_ONLY_MASTER_NEEDS_CONTROLLER"
"""``=1`` in a broker's environment: a master that has had no answer from a controller leader for longer
than ``controllerHeartBeatTimeoutMills`` refuses puts (``SERVICE_NOT_AVAILABLE``) until one answers
again -- a "controller lease" on the data plane. It looks safe (a master cut off from the controllers
may have been replaced) but RocketMQ's brokers keep serving without the controllers: with every
controller down, or none holding a quorum (80 % loss between them), no master is replaced, and the
whole cluster stops taking writes."""
WIPED_VOTER_ENV = "MQHA_TEST_ONLY_WIPED_VOTER"
"""``=1`` in a controller's environment: a blank store that finds its cluster takes back the raftId its
Raft address had in the voter set (members known by address, as before storage identities) and starts
as a voter with an empty log, instead of as an observer under a new raftId: it votes without the
entries it acknowledged and the votes it cast before it lost its disk (issue 24)."""
ACK_BEFORE_FSYNC_ENV = "MQHA_TEST_ONLY_ACK_BEFORE_FSYNC"
"""``=1`` in a broker's environment: under ``SYNC_FLUSH`` it answers a put (a master) and reports
replicated data (a slave) without waiting for the fsync; the log reaches the disk only with the
periodic flush, as under ``ASYNC_FLUSH`` -- a power cut of the group takes acknowledged messages."""
ANY_CLAIM_STANDS_ENV = "MQHA_TEST_ONLY_ANY_CLAIM_STANDS"
"""``=1`` in a controller's environment: a register or heartbeat for a broker id is taken whoever holds
it (the check of ``mqha.controller.broker_claims`` always passes, as before issue 45): a copy of the
master's store comes up MASTER beside it at the same epoch."""
FULL_DISK_PUT_OK_ENV = "MQHA_TEST_ONLY_FULL_DISK_PUT_OK"
"""``=1`` in a broker's environment: a put its master refuses for a full disk (the disk guard's refusal,
or ENOSPC from the append) is answered PUT_OK at the offset it would have had, though nothing was
stored -- the error swallowed."""

NO_REPAIR_ENV = "MQHA_TEST_ONLY_NO_REPAIR"
"""``=1`` in a broker's environment: a damaged commit-log record is found and reported but never
repaired from another replica (docs/architecture.md §4.7): the copy stays damaged for good."""
RETENTION_WALL_CLOCK_ENV = "MQHA_TEST_ONLY_RETENTION_WALL_CLOCK"
"""``=1`` in a broker's environment: retention goes by the wall clock and the segment files' mtimes, as
before issue 45 -- a forward step of a master's clock past ``fileReservedTime`` deletes the segments it
has just written."""


@dataclass(frozen=True)
class PlantedBug:
    """One planted bug: how it is switched on, in which process, and which faults expose it."""

    env: str
    process: str  # "broker" | "controller"
    breaks: str
    caught_by: tuple[str, ...]


PLANTED: dict[str, PlantedBug] = {
    "no-repair": PlantedBug(
        NO_REPAIR_ENV,
        "broker",
        "a damaged commit-log record is found but never repaired from another replica",
        ("bitflip",),
    ),
    "ack-before-replication": PlantedBug(
        ACK_BEFORE_REPLICATION_ENV,
        "broker",
        "the master acknowledges before any replica has the message",
        ("partition", "client-partition", "delay"),
    ),
    "answer-before-commit": PlantedBug(
        ANSWER_BEFORE_COMMIT_ENV,
        "controller",
        "the controller leader acknowledges a write before a quorum has it",
        ("raft-partition", "asym-partition"),
    ),
    "stale-leader": PlantedBug(
        STALE_LEADER_ENV,
        "controller",
        "a leader cut off from its quorum goes on leading and grants SyncStateSet changes uncommitted",
        ("client-partition",),
    ),
    "master-needs-controller": PlantedBug(
        MASTER_NEEDS_CONTROLLER_ENV,
        "broker",
        "a master that hears from no controller for the heartbeat timeout stops taking puts",
        ("all-controllers", "raft-loss"),
    ),
    "wiped-voter": PlantedBug(
        WIPED_VOTER_ENV,
        "controller",
        "a controller that lost its store votes again under its old raftId with an empty log",
        ("disk-wipe",),
    ),
    "ack-before-fsync": PlantedBug(
        ACK_BEFORE_FSYNC_ENV,
        "broker",
        "under SYNC_FLUSH a broker acknowledges before its fsync",
        ("power-loss",),
    ),
    "any-claim-stands": PlantedBug(
        ANY_CLAIM_STANDS_ENV,
        "controller",
        "the controllers take a second live process under a broker id another one holds",
        ("clone",),
    ),
    "full-disk-put-ok": PlantedBug(
        FULL_DISK_PUT_OK_ENV,
        "broker",
        "a master answers PUT_OK for a put its full disk refused",
        ("disk-full",),
    ),
    "retention-wall-clock": PlantedBug(
        RETENTION_WALL_CLOCK_ENV,
        "broker",
        "retention takes a forward step of the wall clock and deletes fresh segments",
        ("clock",),
    ),
}


def planted_env(names: Iterable[str]) -> dict[str, str]:
    """The environment that plants ``names`` (KeyError for an unknown one)."""
    return {PLANTED[name].env: "1" for name in names}


class AckBeforeReplicationGate:
    """The HA layer as the store sees it, except that waiting for replicas returns at once."""

    def __init__(self, gate: Any) -> None:
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gate, name)

    async def wait_for_replicas(self, next_offset: int) -> AckStatus:
        return AckStatus.OK


def maybe_plant(gate: Any, environ: Mapping[str, str] = os.environ) -> Any:
    """``gate`` itself, or the buggy wrapper when the environment plants the bug."""
    if environ.get(ACK_BEFORE_REPLICATION_ENV) == "1":
        return AckBeforeReplicationGate(gate)
    return gate


class _ControllerLease:
    """The planted master's controller lease.

    Renewed by every answer of a controller leader to the broker's own calls (replica-info every
    ``syncBrokerMetadataPeriod``, SyncStateSet changes, ...)."""

    def __init__(self, controllers: Any, timeout_s: float, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.timeout_s = timeout_s
        self.renewed_at = clock()
        self._call = controllers.call
        controllers.call = self.call

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        reply = await self._call(*args, **kwargs)
        if reply is not None:  # a leader answered (None: no usable answer)
            self.renewed_at = self._clock()
        return reply

    def expired(self) -> bool:
        return self._clock() - self.renewed_at > self.timeout_s


class _LeaseRefusal:
    """The put path's disk check that also refuses while the master's controller lease has expired.

    (The disk check is the put path's first step that refuses with ``SERVICE_NOT_AVAILABLE`` and a
    remark.)"""

    def __init__(self, disk: Any, role: Any, lease: _ControllerLease) -> None:
        self._disk = disk
        self._role = role
        self._lease = lease

    def __getattr__(self, name: str) -> Any:
        return getattr(self._disk, name)

    def refusal(self) -> str | None:
        full = self._disk.refusal() if self._disk is not None else None
        if full is None and self._role.is_master and self._lease.expired():
            return (
                f"no controller has answered for {self._lease.timeout_s * 1000:.0f} ms: this master may "
                "have been replaced; puts refused until one answers"
            )
        return full


def maybe_plant_master(
    access: Any,
    controllers: Any,
    heartbeat_timeout_ms: int,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Plant the master that needs a controller in ``access`` (the broker's put path) when the
    environment asks: its first step also refuses while no controller leader has answered
    ``controllers`` (the ReplicasManager's ``ControllerClient``) for ``heartbeat_timeout_ms``."""
    if environ.get(MASTER_NEEDS_CONTROLLER_ENV) != "1":
        return
    lease = _ControllerLease(controllers, heartbeat_timeout_ms / 1000, clock)
    access.disk = _LeaseRefusal(access.disk, access.role, lease)


def maybe_plant_store(store: Any, environ: Mapping[str, str] = os.environ) -> None:
    """Plant the broker that acknowledges before its fsync in ``store`` (a just opened ``BrokerStore``)
    when the environment asks: ``flush_to``, which the put path and the slave's append await under
    SYNC_FLUSH, returns at once."""
    if environ.get(ACK_BEFORE_FSYNC_ENV) != "1":
        return

    async def flush_later(offset: int) -> None:
        return None  # the periodic flush gets there

    store.flush_to = flush_later


def maybe_plant_retention(task: Any, environ: Mapping[str, str] = os.environ) -> None:
    """Plant the retention that trusts the wall clock in ``task`` (a ``RetentionTask``) when the
    environment asks: its monotonic clock is the wall clock, so its clock takes every step, and it never
    reads its segments' record times, so the mtimes alone decide."""
    if environ.get(RETENTION_WALL_CLOCK_ENV) != "1":
        return
    task._mono = task._wall
    task._record_times.newest_ms = lambda base, *, end=None: None


class FullDiskPutOk:
    """The put path as the HTTP API sees it, except that a put refused for a full disk is answered PUT_OK."""

    def __init__(self, access: Any) -> None:
        self._access = access

    def __getattr__(self, name: str) -> Any:
        return getattr(self._access, name)

    def reject_if_unavailable(self) -> Any:
        rejected = self._access.reject_if_unavailable()
        return None if rejected is not None and _disk_full(rejected) else rejected  # put answers it

    async def put(self, drafts: Any) -> Any:
        outcome = await self._access.put(drafts)
        if not _disk_full(outcome):
            return outcome
        offset = self._access.store.log.max_offset  # where the first message would have gone
        appended = []
        for draft in drafts:
            size = len(draft.body)
            appended.append(Appended(offset, size, draft.msg_id or f"{offset:016X}"))
            offset += size
        return dataclasses.replace(
            outcome, status=type(outcome.status).PUT_OK, appended=tuple(appended), remark=""
        )


def _disk_full(outcome: Any) -> bool:
    return str(outcome.remark).startswith("disk full")  # the remarks of mqha.broker.disk_guard


def maybe_plant_access(access: Any, environ: Mapping[str, str] = os.environ) -> Any:
    """``access`` (the broker's ``BrokerAccess``) itself, or the buggy wrapper when the environment
    plants the bug."""
    if environ.get(FULL_DISK_PUT_OK_ENV) == "1":
        return FullDiskPutOk(access)
    return access


class _EveryoneAlive:
    """A stale leader's liveness: the table it kept while it led, in which every replica still lives."""

    def __init__(self, view: Any) -> None:
        self._view = view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        return True


def maybe_plant_controller(
    service: Any,
    decide_alter: Callable[..., Any],
    apply_record: Callable[..., Any],
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Plant the stale leader in ``service`` when the environment asks: its leadership check answers
    from memory, and while it leads only from memory (its quorum lost) AlterSyncStateSet is answered
    from ``decide_alter`` (the controller's own decision, ``handle_alter_sync_state_set``) against its
    own copy of the state, which ``apply_record`` (``apply``) moves on: never proposed."""
    if environ.get(ANSWER_BEFORE_COMMIT_ENV) == "1":
        _answer_before_commit(service.writes)
    if environ.get(WIPED_VOTER_ENV) == "1":
        _wiped_store_votes(service.parts)
    if environ.get(ANY_CLAIM_STANDS_ENV) == "1":
        _any_claim_stands()
    if environ.get(STALE_LEADER_ENV) != "1":
        return
    writes = service.writes
    log = writes.log
    serving = log.is_serving_leader
    claimed = [False]

    def still_leading() -> bool:
        if serving():
            claimed[0] = True
        elif writes.leader()[0] not in (None, writes.node_id):
            claimed[0] = False  # another leader is known: only then does it step down
        return claimed[0]

    committed_alter = service.alter_sync_state_set
    own: list[Any] = [None]  # the state as the stale leader has changed it on its own

    async def alter(request: Any) -> Any:
        if serving() or not still_leading():
            own[0] = None
            return await committed_alter(request)
        state = own[0] or writes.applier.state
        result = decide_alter(state, request, _EveryoneAlive(writes.heartbeats.view(writes.clock.now_ms())))
        for record in result.records:  # never proposed: applied to its own copy only
            state, _ = apply_record(state, record, state.applied_index)
        own[0] = state
        return result.reply

    log.is_serving_leader = still_leading
    service.alter_sync_state_set = alter


def _answer_before_commit(writes: Any) -> None:
    """Every topic write of ``writes`` (the controller's WritePath) answers its decision's predicted reply
    once the record is handed to the Raft log, not once it commits."""
    import asyncio

    commit = writes._write
    pending: set[Any] = set()

    async def write_without_waiting(broker_name: str, decide: Any, timeout: float = 3.0) -> Any:
        if not broker_name.startswith("topic/"):  # the topic writes' lock key (controller.topics)
            return await commit(broker_name, decide, timeout)
        if (reply := writes._not_leader()) is not None:
            return reply
        result = decide(writes.applier.state, writes.heartbeats.view(writes.clock.now_ms()))
        if not result.records:
            return result.reply
        task = asyncio.ensure_future(commit(broker_name, lambda *_: result, timeout))
        pending.add(task)
        task.add_done_callback(pending.discard)
        await asyncio.sleep(0)  # the proposal is on its way
        return result.reply

    writes._write = write_without_waiting


def _wiped_store_votes(parts: Any) -> None:
    """A blank store that is to join its cluster as an observer (``parts``: the controller's NodeParts,
    before ``start``) names itself, when the voter set has a raftId at its own Raft address, with that
    raftId's storageId and starts as a voter: the store that voted under that name is gone, its log
    is empty."""
    log = parts.log
    use_identity = log.use_identity
    address = log.self_id.partition("/")[0]

    def as_old_self(storage_id: str, voters: list[str], *, observer: bool) -> None:
        mine = next((v for v in voters if v.rpartition("/")[0] == address), None) if observer else None
        if mine is not None:
            storage_id = mine.rpartition("/")[2]
            parts.identity = dataclasses.replace(parts.identity, storage_id=storage_id, role="voter")
            observer = False
        use_identity(storage_id, voters, observer=observer)

    log.use_identity = as_old_self


def maybe_plant_integrity(integrity: Any, environ: Mapping[str, str] = os.environ) -> None:
    """``no-repair``: the integrity task finds and reports damaged records but repairs none."""
    if environ.get(NO_REPAIR_ENV) != "1":
        return

    async def never(offset: int) -> bool:
        integrity.last_repair_error = f"offset {offset}: repair planted away (TEST ONLY)"
        return False

    integrity._repair = never


def _any_claim_stands() -> None:
    """Every claim on a broker id stands: the controller's decisions get a check that never refuses
    (the modules are the controller's, already imported by the time it is planted; this layer may not
    import them)."""
    for name in ("mqha.controller.operations", "mqha.controller.liveness_watch"):
        module = sys.modules.get(name)
        if module is not None:
            module.handle_claim = lambda *_args: None  # type: ignore[attr-defined]
