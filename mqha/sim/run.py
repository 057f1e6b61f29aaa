"""One simulated run: three controllers, one broker set of three, a client, faults, invariants.

``run_seed(seed)`` builds the run from the seed alone (flush mode, ack rule, learner, fault rates),
runs ``FAULT_MS`` of faults, heals everything, lets the set settle for ``SETTLE_MS`` and checks the
final state. The scheduler steps every ``STEP_MS``; between steps the world's events (messages,
replies, pushes) run in their seeded order.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from mqha.autoswitch_ha.ack import AckPolicy
from mqha.codes import ResponseCode
from mqha.controller import operations as ops
from mqha.replicas_manager import actions as act
from mqha.sim.brokers import Broker, BrokerConfig
from mqha.sim.bugs import Bugs
from mqha.sim.controllers import Controllers
from mqha.sim.invariants import Checker, Violation
from mqha.sim.storage import Disk
from mqha.sim.world import Faults, World
from mqha.wire import controller_api as api
from mqha.wire.controller_api import Reply

STEP_MS = 100
FAULT_MS = 5_000
SETTLE_MS = 3_000
CALL_TIMEOUT_MS = 1_500
CONTROLLERS = ["c1", "c2", "c3"]
BROKERS = ["b1", "b2", "b3"]  # a clone fault adds "b4"


@dataclass
class Outcome:
    """How a run ended."""

    seed: int
    ok: bool
    violation: str | None
    trace: list[str]
    acked: int
    note: str | None = None
    elapsed_s: float = 0.0
    config: str = ""
    faults: list[str] = field(default_factory=list)


def choose(seed: int) -> tuple[BrokerConfig, Faults, bool]:
    """The run's broker config and fault rates, from its seed alone; and whether b3 is a learner."""
    rng = random.Random(seed * 7919 + 1)
    sync_flush = rng.random() < 0.5
    if rng.random() < 0.6:
        policy = AckPolicy(all_ack_in_sync_state_set=True)
        learner = False
    else:
        policy = AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=2, min_in_sync_replicas=1)
        learner = rng.random() < 0.4
    faults = Faults(
        crash=rng.choice([0.0, 0.01, 0.03]),
        pause=rng.choice([0.0, 0.01]),
        partition=rng.choice([0.0, 0.02, 0.05]),
        power_loss=rng.choice([0.0, 0.01, 0.03]),
        disk_wipe=rng.choice([0.0, 0.0, 0.003]),
        controller_crash=rng.choice([0.0, 0.01]),
        message_loss=rng.choice([0.0, 0.0, 0.02]),
        max_delay_ms=rng.choice([5, 20, 60]),
        split=rng.choice([0.0, 0.0, 0.01]),
        group_power_loss=rng.choice([0.0, 0.0, 0.005]),
        disk_full=rng.choice([0.0, 0.0, 0.01]),
        clone=rng.choice([0.0, 0.0, 0.0, 0.005]),
    )
    return BrokerConfig(sync_flush, policy), faults, learner


class Simulation:
    """The cluster of one run and the glue between its parts (the network's endpoints)."""

    def __init__(
        self,
        seed: int,
        bugs: Bugs | None = None,
        *,
        faults: Faults | None = None,
        sync_flush: bool | None = None,
        learner: bool | None = None,
    ) -> None:
        config, chosen, drawn_learner = choose(seed)
        if sync_flush is not None:
            config = BrokerConfig(sync_flush, config.policy)
        if learner:  # a learner acks only where acks are counted (inSyncReplicas, no allAck)
            config = BrokerConfig(config.sync_flush, AckPolicy(in_sync_replicas=2, min_in_sync_replicas=1))
        learner = drawn_learner if learner is None else learner
        self.seed = seed
        self.bugs = bugs or Bugs()
        self.world = World(seed, faults or chosen)
        self.checker = Checker(self.world)
        self.controllers = Controllers(self.world, CONTROLLERS, self.bugs, self.push_role_change)
        self.config = config
        self.brokers = [
            Broker(
                self,
                name,
                Disk(store_id=f"{name}-store"),
                BrokerConfig(config.sync_flush, config.policy, async_learner=learner and name == "b3"),
            )
            for name in BROKERS
        ]
        self.next_msg = 1
        self.fault_log: list[str] = []
        self.world.note(
            f"seed {seed}: {'SYNC' if config.sync_flush else 'ASYNC'}_FLUSH, {config.policy}, "
            f"learner={learner}, bugs={self.bugs.names()}, {self.world.faults}"
        )

    def describe(self) -> str:
        return self.world.trace[0]

    # -- endpoints -----------------------------------------------------------------------------------

    def broker_at(self, address: str) -> Broker | None:
        name = address.partition(":")[0]
        return next((b for b in self.brokers if b.name == name), None)

    def _leader_for(self, broker: Broker) -> str | None:
        """The node the broker's ControllerClient finds claiming leadership."""
        nodes = sorted(CONTROLLERS)
        for node in nodes:
            if self.world.reachable(broker.name, node) and self.controllers.claims_leadership(node):
                return node
        return None

    def controller_call(self, broker: Broker, call: act.ControllerCall) -> None:
        world, incarnation = self.world, broker.incarnation
        answered = [False]

        def answer(reply: Reply | None) -> None:
            if answered[0]:
                return
            answered[0] = True
            wire = None if reply is None else Reply(reply.code, reply.remark, reply.payload_json())
            broker.planner_input(lambda t: broker.planner.on_controller_reply(call, wire, t))

        def timeout() -> None:
            if broker.up and broker.incarnation == incarnation:
                answer(None)

        world.at(CALL_TIMEOUT_MS, timeout)
        node = self._leader_for(broker)
        if node is None:
            return

        def reply_back(reply: Reply | None) -> None:
            if reply is not None:
                world.send(node, broker.name, lambda: answer(reply))

        world.send(broker.name, node, lambda: self._handle(node, call, reply_back))

    def _handle(self, node: str, call: act.ControllerCall, answer: ops.Any) -> None:  # type: ignore[name-defined]
        c = self.controllers
        match call:
            case act.GetMetadata():
                ok = c.claims_leadership(node)
                answer(Reply(ResponseCode.SUCCESS, "", {"leaderAddress": node}) if ok else c.not_leader(node))
            case act.GetNextBrokerId(request=request):
                answer(c.read(node, lambda s: ops.handle_get_next_broker_id(s, request)))
            case act.ApplyBrokerId(request=request):
                c.write(
                    node, request.broker_name, lambda s, _: ops.handle_apply_broker_id(s, request), answer
                )
            case act.RegisterBroker(request=request):
                if self.bugs.resumed_epoch:  # before 5d8df79: register never heard how the master stopped
                    request = api.RegisterBrokerRequest(
                        **{
                            **{f: getattr(request, f) for f in request.__struct_fields__},
                            "clean_shutdown": None,
                            "lossy_recovery": None,
                        }
                    )
                c.write(
                    node,
                    request.broker_name,
                    lambda s, live: ops.handle_register_broker(s, request, live),
                    answer,
                )
            case act.GetReplicaInfo(request=request):
                answer(c.read(node, lambda s: ops.handle_get_replica_info(s, request)))
            case act.ElectMaster(request=request):
                c.elect(node, request, answer)
            case act.ProposeSyncStateSet(request=request) | act.ReleaseEligibleReplicas(request=request):
                c.alter(node, request, answer)

    def heartbeat(self, broker: Broker, action: act.SendHeartbeat) -> None:
        request = action.request
        if action.confirm:  # by HTTP to every controller, awaited: the count of those that recorded it
            delivered = 0
            for node in CONTROLLERS:
                if self.world.reachable(broker.name, node):
                    delivered += self.controllers.heartbeat(node, request).ok
            broker.planner_input(lambda t: broker.planner.on_heartbeat_sent(action, delivered, t))
            return
        for node in CONTROLLERS:
            self.world.send(broker.name, node, lambda n=node: self.controllers.heartbeat(n, request))

    def push_role_change(self, node: str, name: str, payload: api.ElectMasterPayload) -> None:
        """``RoleChangeFanout``: a roleChanged push to every member alive in ``node``'s table."""
        members = payload.broker_member_group
        if not members:
            return
        message = api.RoleChangedMessage(
            cluster_name=members.cluster,
            broker_name=name,
            master_broker_id=payload.master_broker_id,
            master_address=payload.master_address,
            master_ha_address=payload.master_ha_address,
            master_epoch=payload.master_epoch,
            sync_state_set_epoch=payload.sync_state_set_epoch,
            sync_state_set=payload.sync_state_set,
        ).to_json()
        note = act.RoleNotification.from_json(message)
        table = self.controllers.nodes[node].heartbeats
        for broker_id, address in members.broker_addrs.items():
            broker = self.broker_at(address)
            if broker is not None and table.is_alive(self.world.now_ms, name, broker_id):
                self.world.send(
                    node,
                    broker.name,
                    lambda b=broker: b.planner_input(lambda t, b=b: b.planner.on_role_notification(note, t)),
                )

    # -- the client and the faults -------------------------------------------------------------------

    def client_puts(self) -> None:
        masters = [b for b in self.brokers if b.up and b.role.is_master and not b.role.fenced]
        for broker in masters:
            wants = self.world.reachable("client", broker.name) and self.world.rng.random() < 0.7
            if wants and broker.put(self.next_msg):
                self.next_msg += 1

    def inject_faults(self) -> None:
        from mqha.sim.faults import inject

        inject(self)

    # -- the run -------------------------------------------------------------------------------------

    def step(self, *, faults: bool) -> None:
        world = self.world
        world.run_until(world.now_ms + STEP_MS)
        self.controllers.step()
        if world.now_ms % 200 == 0:
            self.controllers.scan()
        for broker in self.brokers:
            broker.step()
        if faults:
            self.inject_faults()
        self.client_puts()
        self.checker.check(self.controllers, self.brokers)

    def run(self, fault_ms: int = FAULT_MS, settle_ms: int = SETTLE_MS) -> Outcome:
        started = time.perf_counter()
        note = violation = None
        real_claim = ops.handle_claim
        if self.bugs.any_claim_stands:  # as planted_bugs does: the check in the decisions never refuses
            ops.handle_claim = lambda *_args: None  # type: ignore[assignment]
        try:
            for broker in self.brokers:
                self.world.at(self.world.rng.randint(150, 450), broker.start)  # after a leader
            while self.world.now_ms < fault_ms:
                self.step(faults=True)
            from mqha.sim.faults import heal

            heal(self)
            while self.world.now_ms < fault_ms + settle_ms:
                self.step(faults=False)
            self.checker.check_no_loss(self.brokers)
            note = self.checker.check_final(self.brokers)
        except Violation as exc:
            violation = str(exc)
        finally:
            ops.handle_claim = real_claim  # type: ignore[assignment]
        return Outcome(
            self.seed,
            violation is None,
            violation,
            self.world.trace,
            len(self.checker.acked),
            note,
            time.perf_counter() - started,
            self.describe(),
            self.fault_log,
        )


def run_seed(seed: int, bugs: Bugs | None = None) -> Outcome:
    return Simulation(seed, bugs).run()
