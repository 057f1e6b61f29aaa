"""A simulated broker process: the production planner, role switch, SyncStateSet keeper and ack gate.

The ``ReplicasPlanner`` decides; ``execute`` carries its actions out as ``ReplicasManager`` does
(identity files on the simulated disk, controller calls as messages, role changes through the real
``HARoleSwitch``). The HA layer is the real ``SyncStateSetKeeper``, ``SlaveLinks``, ``AckGate`` and
``EligibleRelease`` over a ``SimStore``; the put path is ``AckGate.wait_for_replicas`` without asyncio:
a put waits in ``pending`` until ``replica_ack_status`` says OK (then for the ELR release), or its
``slaveTimeout`` passes.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from mqha.autoswitch_ha.ack import AckPolicy, AckStatus, replica_ack_status
from mqha.autoswitch_ha.eligible_release import EligibleRelease
from mqha.autoswitch_ha.events import SlaveAck
from mqha.autoswitch_ha.gate import AckGate
from mqha.autoswitch_ha.keeper import SyncStateSetKeeper
from mqha.autoswitch_ha.links import SlaveLinks
from mqha.autoswitch_ha.roles import HARoleSwitch
from mqha.replicas_manager import actions as act
from mqha.replicas_manager.hooks import BrokerProgress, BrokerStart
from mqha.replicas_manager.identity import register_check_code
from mqha.replicas_manager.planner import ReplicasPlanner
from mqha.replicas_manager.planner_states import PlannerConfig
from mqha.role import BrokerRole
from mqha.sim.replication import HaLink, MasterEnd, master_events, slave_events
from mqha.sim.storage import MESSAGE_SIZE, Disk, SimStore, encode_message

CLUSTER, GROUP = "sim", "broker-a"
SLAVE_TIMEOUT_MS = 1_000
RELEASE_ASK_MS = 300
FLUSH_INTERVAL_MS = 500  # flushIntervalCommitLog
CHECKPOINT_INTERVAL_MS = 200  # ConfirmCheckpoint (kept over a power loss: generous, as the chaos fault)


@dataclass(frozen=True)
class BrokerConfig:
    """The store keys that vary between runs."""

    sync_flush: bool
    policy: AckPolicy
    async_learner: bool = False


def run_now(coro: Coroutine[Any, Any, bool]) -> bool:
    """Run a coroutine that never really suspends (its awaits are the fake HA client's) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return bool(done.value)
    coro.close()
    raise RuntimeError("a role change suspended in the simulator")


class FakeHaClient:
    """The ``HAClient`` as ``HARoleSwitch`` drives it; the broker opens the link itself."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.master_address: str | None = None
        self.master_epoch = -1
        self.running = False

    def set_master_address(self, address: str | None, epoch: int = -1) -> None:
        if (address, epoch) != (self.master_address, self.master_epoch):
            self.master_address, self.master_epoch = address, epoch
            self._broker.drop_link(f"now following {address} in master epoch {epoch}")

    def start(self) -> None:
        self.running = True

    async def stop(self) -> None:
        self.running = False
        self._broker.drop_link("stopped")


class Broker:
    """One broker process on one disk; ``start`` begins a new incarnation."""

    def __init__(self, sim: Any, name: str, disk: Disk, config: BrokerConfig) -> None:
        self.sim = sim
        self.world = sim.world
        self.name = name
        self.address = f"{name}:10911"
        self.ha_address = f"{name}:10912"
        self.disk = disk
        self.config = config
        self.up = False
        self.starts = 0
        self.link: HaLink | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        disk = self.disk
        self.starts += 1
        self.label = f"{self.name}.{self.starts}"  # the incarnation as traces name it
        self.incarnation = f"{int(self.name[1:]):016x}{self.starts:016x}"
        checkpoint = disk.confirm_checkpoint
        lossy = checkpoint > len(disk.log)
        start = BrokerStart(self.incarnation, disk.clean_shutdown, lossy, checkpoint)
        if self.sim.bugs.recovery_unreported:
            start = BrokerStart(self.incarnation, True, False, -1)
        disk.clean_shutdown = False  # until a clean stop
        self.store = SimStore(disk)
        self.role = BrokerRole()
        self.keeper = SyncStateSetKeeper(lambda: self.world.now_ms, 1_000, self)
        self.release = EligibleRelease(self)
        self.links = SlaveLinks()
        self.gate = AckGate(
            self.store,
            self.role,
            self.keeper,
            self.links,  # type: ignore[arg-type]
            policy=self.config.policy,
            slave_timeout_ms=SLAVE_TIMEOUT_MS,
            release=self.release,
        )
        self.client = FakeHaClient(self)
        self.switch = HARoleSwitch(
            self.store,
            self.role,
            self.client,  # type: ignore[arg-type]
            links=self.links,
            keeper=self.keeper,
            gate=self.gate,
        )
        policy = self.config.policy
        self.planner = ReplicasPlanner(
            PlannerConfig(
                cluster_name=CLUSTER,
                broker_name=GROUP,
                broker_address=self.address,
                ha_address=self.ha_address,
                sync_broker_metadata_period_ms=500,
                check_sync_state_set_period_ms=500,
                sync_controller_metadata_period_ms=2_000,
                heartbeat_timeout_ms=1_000,
                heartbeat_interval_ms=200,
                start=start,
                all_ack_in_sync_state_set=policy.all_ack_in_sync_state_set,
                in_sync_replicas=policy.in_sync_replicas,
                store_id=disk.store_id,
            ),
            seed=self.world.rng.randrange(2**32),
        )
        self.pending: list[tuple[int, int, int, int]] = []  # (next offset, msg id, offset, deadline)
        self._release_asked = -RELEASE_ASK_MS
        self.master_epochs_seen = 0
        self.up = True
        self.world.note(
            f"{self.name}: start {self.label} (clean={start.clean_shutdown}, lossy={lossy}, "
            f"log={len(disk.log)}, epochs={disk.epochs.pairs()})"
        )
        self.planner.on_identity_loaded(disk.identity, disk.temp_identity)
        self.execute(self.planner.start(self.world.now_ms))

    def stop(self, how: str) -> None:
        """``crash`` (the process dies), ``power`` (and the machine: the un-fsynced tail is gone),
        ``wipe`` (and the disk)."""
        if not self.up:
            return
        self.up = False
        self.world.note(f"{self.name}: {how}")
        for end in list(self.links):
            end.link.close("master down")  # type: ignore[attr-defined]
        self.drop_link("down")
        self.pending.clear()
        if how == "power":
            self.disk.power_loss()
        elif how == "wipe":
            self.disk.__init__(store_id=f"{self.disk.store_id}+")  # type: ignore[misc]

    # -- the planner's inputs and actions (ReplicasManager) ------------------------------------------

    def planner_input(self, make: Callable[[int], list[act.Action]]) -> None:
        """Feed an input to the planner soon, as the runner's queue does (dropped if this process died)."""
        incarnation = self.incarnation

        def run() -> None:
            if self.up and self.incarnation == incarnation:
                self.refresh_progress()
                self.execute(make(self.world.now_ms))

        self.world.at(0, run)

    def refresh_progress(self) -> None:
        self.planner.on_local_progress(self.progress())

    def execute(self, actions: list[act.Action]) -> None:
        now = self.world.now_ms
        disk, planner = self.disk, self.planner
        for action in act.in_phase_order(actions):
            match action:
                case act.WriteTempIdentity(broker_id=broker_id):
                    code = register_check_code(self.address, now, disk.store_id)
                    temp = act.TempBrokerIdentity(CLUSTER, GROUP, broker_id, code)
                    disk.temp_identity = temp
                    self.planner_input(lambda t, a=action, w=temp: planner.on_temp_identity_written(a, w, t))
                case act.WriteIdentity(identity=record):
                    disk.identity = record
                    self.planner_input(lambda t, a=action: planner.on_identity_written(a, True, t))
                case act.DeleteTempIdentity():
                    disk.temp_identity = None
                case act.DeleteIdentity():
                    disk.identity = None
                case act.ControllerCall():
                    self.sim.controller_call(self, action)
                case act.SendHeartbeat():
                    self.sim.heartbeat(self, action)
                case act.BecomeMaster() | act.BecomeSlave():
                    ok = self.change_role(action)
                    self.planner_input(lambda t, a=action, v=ok: planner.on_role_change_result(a, v, t))
                case _:
                    self._apply_now(action)

    def _apply_now(self, action: act.Action) -> None:
        match action:
            case act.SetFenced(fenced=fenced):
                self.role.set_fenced(fenced)
            case act.StopFollowing(epoch=epoch):
                self.switch.stop_following(epoch)
            case act.SetBrokerControllerId(broker_id=broker_id):
                self.role.set_broker_id(broker_id)
            case act.ApplySyncStateSet(sync_state_set=sss, sync_state_set_epoch=epoch):
                self.apply_sync_state_set(sss, epoch)
            case act.EligibleReleaseDone(master_epoch=epoch, sync_state_set_epoch=sss_epoch, ok=ok):
                self.release.done(epoch, sss_epoch, ok)
                self.check_pending()
            case act.GiveUpBrokerId():
                self.world.note(f"{self.name}: gives up its broker id")
                self.stop("crash")
            case act.CheckSyncStateSet():
                wanted = self.maybe_shrink()
                incarnations = self.slave_incarnations()
                self.planner_input(lambda t: self.planner.on_sync_state_set_check(wanted, t, incarnations))
            case _:
                raise TypeError(f"no executor for {action!r}")

    # -- BrokerHooks (broker.hooks_impl) -------------------------------------------------------------

    def progress(self) -> BrokerProgress:
        gate, policy = self.gate, self.config.policy
        ack_point = None
        if self.role.is_master:
            if policy.all_ack_in_sync_state_set:
                ack_point = gate.confirm_offset()
            elif policy.in_sync_replicas > 1:
                ack_point = gate.in_sync_point()
        return BrokerProgress(
            last_epoch=self.store.epochs.last_epoch(),
            max_offset=self.store.max_offset,
            confirm_offset=gate.confirm_offset(),
            ack_point=ack_point,
        )

    def change_role(self, action: act.BecomeMaster | act.BecomeSlave) -> bool:
        role = self.role
        if isinstance(action, act.BecomeMaster):
            epoch = action.epoch

            def commit() -> None:
                role.to_master(epoch, action.sync_state_set_epoch, self.address, self.ha_address)

            ok = run_now(self.switch.change_to_master(epoch, frozenset(action.sync_state_set), commit))
            if ok:
                self.world.note(
                    f"{self.name}: MASTER (id {self.role.broker_id}) epoch {epoch} at {self.store.max_offset}"
                )
                self.sim.checker.on_master(self, epoch)
            return ok
        master, epoch = action.master, action.epoch
        if master.broker_id == role.broker_id:
            return False
        ok = self.switch.change_to_slave(epoch, master.ha_address, lambda: role.to_slave(master, epoch))
        if ok:
            self.fail_pending()
        return ok

    def apply_sync_state_set(self, sss: frozenset[int], epoch: int) -> None:
        if not self.role.accept_sync_state_set_epoch(epoch):
            return
        before = self.keeper.local_set()
        if not self.keeper.confirmed(frozenset(sss)):
            return
        if before - frozenset(sss):
            self.release.arm(self.role.master_epoch, self.role.sync_state_set_epoch)
        self.gate.recompute_confirm_offset()
        self.gate.log_changed()
        self.check_pending()

    def maybe_shrink(self) -> frozenset[int]:
        if self.keeper.in_sync is None or not self.role.is_master:
            return frozenset()
        wanted, shrinking = self.keeper.shrink()
        if shrinking:
            self.check_pending()
        return wanted

    def slave_incarnations(self) -> dict[int, str]:
        return {**self.links.incarnations(), **self.keeper.bound()}

    # -- SyncStateSetReporter and ReleaseRequester (the ReplicasManager) ------------------------------

    def report_sync_state_set(self, proposed: frozenset[int]) -> None:
        proposal, incarnations = frozenset(proposed), self.slave_incarnations()
        self.planner_input(lambda t: self.planner.on_sync_state_set_proposal(proposal, t, incarnations))

    def release_eligible_replicas(self, master_epoch: int) -> None:
        self.planner_input(lambda t: self.planner.on_release_eligible_request(master_epoch, t))

    # -- the master's side of replication (AutoSwitchHAService) ---------------------------------------

    def link_of(self, link: HaLink) -> bool:
        return any(end.link is link for end in self.links)  # type: ignore[attr-defined]

    def on_master_events(self, end: MasterEnd) -> None:
        if self.up:
            master_events(self, end)

    def on_slave_ack(self, end: MasterEnd, event: SlaveAck) -> None:
        if self.keeper.in_sync is None or not self.links.is_current(end, event.slave_id):  # type: ignore[arg-type]
            return
        gate = self.gate
        before = gate.take_slave_ack(event)
        self.check_pending()
        if gate.confirm_offset() != before:
            gate.log_changed()

    def on_link_closed(self, end: MasterEnd) -> None:
        slave_id = self.links.remove(end)  # type: ignore[arg-type]
        if slave_id is None:
            return
        if self.keeper.in_sync is not None and self.role.is_master:
            self.keeper.connection_lost(slave_id)
        self.check_pending()

    # -- the slave's side (HAClient) --------------------------------------------------------------------

    def on_slave_events(self, link: HaLink) -> None:
        if self.up:
            slave_events(self, link)

    def drop_link(self, reason: str) -> None:
        link, self.link = self.link, None
        if link is not None:
            link.close(reason)

    def fsync_on_write(self) -> bool:
        """SYNC_FLUSH fsyncs before a write is acknowledged (``ack-before-fsync`` plants the skip)."""
        return self.config.sync_flush and not self.sim.bugs.ack_before_fsync

    def follow(self) -> None:
        """Connect to the master followed, as ``HAClient._run`` does when it has none."""
        address = self.client.master_address
        if not self.client.running or address is None or self.link is not None:
            return
        master = self.sim.broker_at(address)
        if master is None or not master.up or not self.world.reachable(self.name, master.name):
            return
        self.link = HaLink(self, master)

    # -- the put path ------------------------------------------------------------------------------------

    def put(self, msg_id: int) -> bool:
        """A client's put; True when it was taken (its answer comes with ``check_pending``)."""
        role = self.role
        if not self.up or role.fenced or not role.is_master:
            return False
        if self.disk.full:
            if self.sim.bugs.full_disk_put_ok:
                self.sim.checker.on_acked(self, msg_id, self.store.max_offset)
            return False
        if self.gate.in_sync_refusal() is not None:
            return False
        offset = self.store.max_offset
        self.store.append(encode_message(msg_id), fsync=self.fsync_on_write())
        self.gate.log_changed()  # as BrokerAccess.put
        self.pending.append((offset + MESSAGE_SIZE, msg_id, offset, self.world.now_ms + SLAVE_TIMEOUT_MS))
        self.check_pending()
        return True

    def _replicas_hold(self, next_offset: int) -> AckStatus:
        policy, bugs = self.config.policy, self.sim.bugs
        if not policy.needs_replica_wait or bugs.ack_before_replication:
            return AckStatus.OK
        sss, acks = self.keeper.sync_state_set(), self.gate.counted_acks()
        if bugs.learner_acks:  # the reference: any connection's ack counts
            acks = self.links.acks()
            sss = sss | acks.keys()
        return replica_ack_status(policy, next_offset=next_offset, sync_state_set=sss, slave_acks=acks)

    def check_pending(self) -> None:
        now = self.world.now_ms
        while self.pending:
            next_offset, msg_id, offset, deadline = self.pending[0]
            if not self.role.is_master:
                self.fail_pending()
                return
            if self._replicas_hold(next_offset) is not AckStatus.OK:
                if now >= deadline:
                    self.pending.pop(0)  # FLUSH_SLAVE_TIMEOUT: not acknowledged
                    continue
                return
            if self.release.needed and not self.sim.bugs.ack_before_replication:
                if now >= deadline:
                    self.pending.pop(0)
                    continue
                if now - self._release_asked >= RELEASE_ASK_MS:
                    self._release_asked = now
                    self.release_eligible_replicas(self.role.master_epoch)
                return
            self.pending.pop(0)
            self.sim.checker.on_acked(self, msg_id, offset)

    def fail_pending(self) -> None:
        self.pending.clear()

    # -- time ------------------------------------------------------------------------------------------

    def step(self) -> None:
        """One scheduler step of this process: timers, links, flush and checkpoint."""
        if not self.up or self.name in self.world.down:
            return
        now = self.world.now_ms
        self.refresh_progress()
        self.execute(self.planner.tick(now))
        self.follow()
        if self.link is not None:
            self.link.tick()
        for end in list(self.links):
            end.link.tick()  # type: ignore[attr-defined]
        self.check_pending()
        if now % FLUSH_INTERVAL_MS == 0:
            self.disk.flush()  # the periodic flush (ASYNC_FLUSH; a no-op under SYNC_FLUSH)
        if now % CHECKPOINT_INTERVAL_MS == 0:
            self.store.checkpoint()
