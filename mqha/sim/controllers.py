"""The controllers: Raft as an ordered log, and each node's soft state, around the real decisions.

Raft is modelled, not run: one committed log that every node applies with the production ``apply``
(records go through the production codec), and the current leader's un-committed tail. A leader
commits its tail at its next step while a majority of the controllers is up and reachable from it; a
leader change (crash, partition) gives a new term, and the new leader holds a random prefix of the
old tail (the entries that had reached it) -- the rest is lost, and its callers never hear back.

Each node keeps what a real node keeps in memory only: its ``HeartbeatTable`` and its
``ElectionWaits``. Requests are decided, as ``WritePath._write`` does, by the production ``handle_*``
functions on the committed state and a frozen liveness view; the reply of a write is
``reply_from_outcome`` of what ``apply`` did at commit; what a node remembers and pushes after an
election or a SyncStateSet change is the production ``after_election`` / ``after_alter_sync_state_set``.
The *when* (heartbeat expiry, inactive-master scan, a replica back while the set waits, a lossy
master) is ``LivenessWatch``'s loop restated in ``Controllers.scan``/``heartbeat``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mqha.codes import ResponseCode
from mqha.controller import operations as ops
from mqha.controller.apply import apply_encoded
from mqha.controller.broker_claims import Claim
from mqha.controller.election import (
    ElectionOutcome,
    ElectionPolicy,
    after_alter_sync_state_set,
    after_election,
)
from mqha.controller.election_waits import ElectionWaits
from mqha.controller.liveness import HeartbeatTable
from mqha.controller.records import ElectMasterRecord, encode_record
from mqha.controller.replies import elect_payload
from mqha.controller.result import ControllerResult
from mqha.controller.state import ControllerState
from mqha.sim.bugs import Bugs
from mqha.sim.world import World
from mqha.wire import controller_api as api
from mqha.wire.controller_api import Reply

Code = ResponseCode
Answer = Callable[[Reply | None], None]


@dataclass
class _Pending:
    """A proposed record not committed yet, with the caller waiting for its answer."""

    term: int
    data: bytes
    result: ControllerResult
    answer: Answer | None
    name: str


class ControllerNode:
    """One controller process: its soft state (lost on a crash) and its view of the log."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.heartbeats = HeartbeatTable()
        self.waits = ElectionWaits()
        self.stale_state: ControllerState | None = None  # a planted stale leader's own copy

    def restart(self) -> None:
        self.heartbeats = HeartbeatTable()
        self.waits = ElectionWaits()
        self.stale_state = None


class Controllers:
    """The controller cluster: nodes, the modelled Raft log and the request handlers."""

    def __init__(self, world: World, names: list[str], bugs: Bugs, push: Callable[..., None]) -> None:
        self.world = world
        self.bugs = bugs
        self.nodes = {name: ControllerNode(name) for name in names}
        self.state = ControllerState.empty()
        self.committed = 0  # raft index of the last committed entry
        self.term = 0
        self.leader: str | None = None
        self.old_leader: str | None = None  # the last leader, while it may still think it leads
        self.tail: list[_Pending] = []
        self.policy = ElectionPolicy(False, 3_000)
        self._push = push  # (node, broker_name, payload): the roleChanged fan-out
        self._electing: set[str] = set()

    # -- Raft ------------------------------------------------------------------------------------

    def _quorum(self, node: str) -> bool:
        up = [n for n in self.nodes if self.world.reachable(node, n)]
        return node not in self.world.down and len(up) * 2 > len(self.nodes)

    def serving(self, node: str) -> bool:
        return node == self.leader and self._quorum(node)

    def claims_leadership(self, node: str) -> bool:
        """What a broker's leader discovery hears from ``node``: a serving leader says so; a planted
        stale leader goes on saying so after it lost its quorum, until it hears of a newer leader."""
        if node in self.world.down:
            return False
        if self.serving(node):
            return True
        stale = self.bugs.stale_leader and node == self.old_leader
        return stale and not self.world.reachable(node, self.leader or node)

    def step(self) -> None:
        """Elect a leader where a majority can, then commit the leader's tail."""
        if self.leader is None or not self._quorum(self.leader):
            candidates = [n for n in sorted(self.nodes) if self._quorum(n)]
            if candidates:
                self._new_leader(self.world.rng.choice(candidates))
        if self.leader is not None and self._quorum(self.leader) and self.tail:
            for pending in self.tail:
                self._commit(pending)
            self.tail = []

    def _new_leader(self, node: str) -> None:
        kept = self.world.rng.randint(0, len(self.tail))
        for lost in self.tail[kept:]:
            self.world.note(f"raft: un-committed {type(lost.result.records[0]).__name__} lost")
            # the caller waits in vain (it times out: no answer)
        self.tail = self.tail[:kept]
        self.term += 1
        self.old_leader = self.leader
        self.leader = node
        self.nodes[node].waits.clear_all()  # soft state: a new leader starts its waits again
        self._electing.clear()  # an election lost with the tail is never answered
        self.world.note(f"raft: {node} leads term {self.term} (kept {kept} un-committed)")

    def _commit(self, pending: _Pending) -> None:
        self.committed += 1
        before = self.state
        self.state, outcome = apply_encoded(self.state, pending.data, self.committed)
        reply = ops.reply_from_outcome(pending.result, outcome)
        record = pending.result.records[0]
        if outcome.accepted and isinstance(record, ElectMasterRecord):
            group = self.state.group(record.broker_name)
            old = before.group(record.broker_name)
            self.world.note(
                f"commit elect {record.broker_name}: master {group.master_broker_id if group else None} "
                f"epoch {group.master_epoch if group else None} (from {old.master_epoch if old else None})"
            )
        elif outcome.accepted and record.broker_name:
            group = self.state.group(record.broker_name)
            if group is not None:
                self.world.note(
                    f"commit {type(record).__name__}: SyncStateSet {sorted(group.sync_state_set)} "
                    f"epoch {group.sync_state_set_epoch}, eligible {dict(group.eligible_replicas)}"
                )
        if pending.answer is not None:
            pending.answer(reply)

    def propose(self, node: str, result: ControllerResult, name: str, answer: Answer | None) -> None:
        for record in result.records:
            self.tail.append(_Pending(self.term, encode_record(record), result, answer, name))

    def crash(self, node: str) -> None:
        self.nodes[node].restart()

    # -- requests (WritePath) ----------------------------------------------------------------------

    def not_leader(self, node: str) -> Reply:
        return Reply(Code.CONTROLLER_NOT_LEADER, "The controller is not in leader state")

    def read(self, node: str, decide: Callable[[ControllerState], ControllerResult]) -> Reply:
        if not self.serving(node):
            return self.not_leader(node)
        return decide(self.state).reply

    def write(self, node: str, name: str, decide: Callable[..., ControllerResult], answer: Answer) -> None:
        """``WritePath._write``: decide on the committed state; propose; answer at commit."""
        if not self.serving(node):
            answer(self.not_leader(node))
            return
        if any(p.name == name for p in self.tail):
            return  # the set's lock is held by a write that has not committed: the caller times out
        live = self.nodes[node].heartbeats.view(self.world.now_ms)
        result = decide(self.state, live)
        if not result.records:
            answer(result.reply)
            return
        self.propose(node, result, name, answer)

    def alter(self, node: str, request: api.AlterSyncStateSetRequest, answer: Answer) -> None:
        if self.bugs.stale_leader and node == self.old_leader and not self.serving(node):
            self._stale_alter(node, request, answer)
            return
        name = request.broker_name
        before = self.state.group(name)

        def done(reply: Reply | None) -> None:
            if reply is not None:
                table = self.nodes[node].heartbeats
                kept = frozenset() if before is None else before.sync_state_set
                members = request.sync_state_set
                effects = after_alter_sync_state_set(
                    reply.code,
                    members,
                    kept,
                    known=_present({b: table.member_incarnation(name, b) for b in kept}),
                    vouched=request.member_incarnations,
                    current=self._incarnations(node, name, members),
                    confirm_offset=request.confirm_offset,
                )
                if effects.note_members is not None:
                    table.note_members(name, effects.note_members)
                if effects.acking_master:
                    table.mark_acking_master(name, request.master_epoch)
            answer(reply)

        self.write(node, name, lambda s, live: ops.handle_alter_sync_state_set(s, request, live), done)

    def _stale_alter(self, node: str, request: api.AlterSyncStateSetRequest, answer: Answer) -> None:
        """Planted stale leader: grants from its own copy, never proposed (``planted_bugs``)."""
        from mqha.controller.apply import apply

        state = self.nodes[node].stale_state or self.state
        result = ops.handle_alter_sync_state_set(state, request, _EveryoneAlive(self.world.now_ms))
        for record in result.records:
            state, _ = apply(state, record, state.applied_index)
        self.nodes[node].stale_state = state
        answer(result.reply)

    def elect(self, node: str, request: api.ElectMasterRequest, answer: Answer | None) -> None:
        """``WritePath.elect_master``: the decision, its waits, the members noted, the role push."""
        name = request.broker_name
        now = self.world.now_ms
        waits = self.nodes[node].waits
        decided: list[Any] = []
        before = self.state.group(name)

        def decide(state: ControllerState, live: Any) -> ControllerResult:
            result = ops.handle_elect_master(state, request, live, self.policy, waits.waited_ms(name, now))
            if result.election is not None:
                decided.append(result.election)
            return result

        def done(reply: Reply | None) -> None:
            self._electing.discard(name)
            if reply is not None and decided:
                self._carry_out(
                    node,
                    name,
                    self._outcome(node, name, decided[-1], reply, now_ms=now, before=before),
                    reply,
                )
            if answer is not None:
                answer(reply)

        self.write(node, name, decide, done)

    def _outcome(
        self, node: str, name: str, result: Any, reply: Reply, *, now_ms: int, before: Any
    ) -> ElectionOutcome:
        """``WritePath._outcome``: what the election core needs to know of an answered attempt."""
        payload = reply.payload
        new_master = (
            payload.master_broker_id if isinstance(payload, api.ElectMasterPayload) and reply.ok else None
        )
        after = self.state.group(name)
        known = {} if new_master is None else self._incarnations(node, name, frozenset({new_master}))
        return ElectionOutcome(
            result,
            reply.code,
            now_ms,
            wait_before=self.nodes[node].waits.get(name),
            new_master=new_master,
            new_master_incarnation=None if new_master is None else known.get(new_master),
            epoch_before=None if before is None else before.master_epoch,
            master_after=None if after is None else after.master_broker_id,
            epoch_after=None if after is None else after.master_epoch,
        )

    def _carry_out(self, node: str, name: str, outcome: ElectionOutcome, reply: Reply) -> None:
        """``WritePath._carry_out`` of the production ``after_election``'s effects."""
        effects = after_election(outcome)
        if effects.wait_changes:
            self.nodes[node].waits.set(name, effects.wait)
        group = self.state.group(name)
        if effects.push_fence and group is not None:
            self._push(node, name, elect_payload(group, with_member_group=True))
        if effects.note_members is not None:
            self.nodes[node].heartbeats.note_members(name, effects.note_members)
        if effects.push_role_change and isinstance(reply.payload, api.ElectMasterPayload):
            self._push(node, name, reply.payload)

    def _incarnations(self, node: str, name: str, members: frozenset[int]) -> dict[int, str]:
        table = self.nodes[node].heartbeats
        return _present({b: getattr(table.info(name, b), "incarnation", None) for b in members})

    # -- liveness (LivenessWatch) ------------------------------------------------------------------

    def heartbeat(self, node: str, request: api.BrokerHeartbeatRequest) -> Reply:
        """``LivenessWatch.record_heartbeat`` on ``node``."""
        name, broker_id = request.broker_name, request.broker_id
        assert broker_id is not None
        table = self.nodes[node].heartbeats
        group = self.state.group(name)
        master_epoch = -1 if group is None else group.master_epoch
        now = self.world.now_ms
        before = table.info(name, broker_id)
        refusal = self.bugs.handle_claim(
            before, Claim(name, broker_id, request.broker_addr, request.incarnation), now
        )
        if refusal is not None:
            return refusal
        was_alive = before is not None and before.is_alive(now)
        is_master = group is not None and group.master_broker_id == broker_id
        info = table.record(now, request, None, master_epoch, from_master=is_master)
        if group is not None and is_master:
            table.note_master_confirm(name, master_epoch, info.confirm_offset)
        new_process = info.incarnation is not None and (
            before is None or before.incarnation != info.incarnation
        )
        wait = self.nodes[node].waits.get(name)
        caught_up = (
            wait is not None
            and info.max_offset >= wait.watermark
            and (before is None or before.max_offset < wait.watermark)
        )
        awaited = wait is not None and broker_id in wait.waiting_for and was_alive
        back = group is not None and (new_process or not was_alive or caught_up or awaited)
        if back and self.serving(node) and (wait is not None or (is_master and info.lossy)):
            self.trigger(node, name)
        return Reply(Code.SUCCESS, "Heart beat success")

    def trigger(self, node: str, name: str) -> None:
        if name in self._electing or not self.serving(node):
            return
        self._electing.add(name)
        self.world.note(f"{node}: controller election of {name}")
        self.elect(node, api.ElectMasterRequest(broker_name=name), None)
        if not any(p.name == name for p in self.tail):
            self._electing.discard(name)  # answered at once (no write) or dropped

    def scan(self) -> None:
        """Each node's heartbeat-expiry scan; the leader's inactive-master scan and waiting sets."""
        now = self.world.now_ms
        for node_name, node in sorted(self.nodes.items()):
            if node_name in self.world.down:
                continue
            for info in node.heartbeats.pop_expired(now):
                group = self.state.group(info.broker_name)
                if group is not None and group.master_broker_id == info.broker_id:
                    self.trigger(node_name, info.broker_name)
        leader = self.leader
        if leader is None or not self.serving(leader):
            return
        node = self.nodes[leader]
        view = node.heartbeats.view(now)
        for name, group in sorted(self.state.groups.items()):
            master = group.master_broker_id
            dead = master is not None and not view.is_alive(name, master)
            if dead and any(view.is_alive(name, b) for b in group.replicas):
                self.trigger(leader, name)
        for name in sorted(node.waits.waiting()):
            self.trigger(leader, name)


def _present(found: dict[int, str | None]) -> dict[int, str]:
    return {b: incarnation for b, incarnation in found.items() if incarnation is not None}


class _EveryoneAlive:
    """A stale leader's liveness view: every replica it ever knew still lives."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        return True

    def info(self, broker_name: str, broker_id: int) -> Any:
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None
