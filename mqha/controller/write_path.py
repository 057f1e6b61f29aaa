"""The controller's leader-only requests (shell): reads and writes, one write at a time per broker set.

Leader-only APIs answer ``CONTROLLER_NOT_LEADER`` (2007, with ``leaderAddress``: the leader's API address,
or null when unknown or when this node was elected but does not serve yet) unless
``ReplicatedLog.is_serving_leader()`` -- barrier applied in this term and a quorum-confirmed lease.

Writes (apply-id, register, elect, alter, clean) run one at a time per broker set (an ``asyncio.Lock``
per brokerName, dropped when idle; docs/raft.md §3), topic writes one at a time per topic:

1. check serving leadership (again, after waiting for the lock);
2. decide with the pure core on the current state and a frozen liveness view;
3. a result without records is answered as is (rejections, unchanged registrations);
4. otherwise propose the record (5 s; 3 s for controller-triggered elections) and answer from the
   ``Outcome`` apply returned on this node (``reply_from_outcome``), never from the prediction.

Raft failures: ``NotLeaderError`` -> 2007 (nothing was appended); timeout or a failure with an unknown
outcome -> 2007 if leadership moved meanwhile, else ``SERVICE_NOT_AVAILABLE`` (14, HTTP 503); both
remarks say whether the write may still commit. With ``processReadEvent`` a read first commits a no-op
(docs/reference-behaviour.md §3.2). A successful election is handed to the role-change fan-out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from mqha.codes import ResponseCode
from mqha.controller.consumer_offsets import (
    CONSUMER_OFFSETS_LOCK_KEY,
    handle_query_consumer_offset,
    handle_update_consumer_offset,
)
from mqha.controller.election import (
    AfterElection,
    ElectionOutcome,
    ElectionPolicy,
    ElectionResult,
    after_alter_sync_state_set,
    after_election,
)
from mqha.controller.liveness import LivenessView
from mqha.controller.metrics import ControllerMetrics
from mqha.controller.operations import (
    handle_alter_sync_state_set,
    handle_apply_broker_id,
    handle_clean_broker_data,
    handle_elect_master,
    handle_get_next_broker_id,
    handle_get_replica_info,
    handle_get_sync_state_data,
    handle_register_broker,
    reply_from_outcome,
)
from mqha.controller.parts import NodePart, NodeParts
from mqha.controller.raft import (
    ApplyError,
    NotLeaderError,
    ProposalFailed,
    ProposalTimeout,
    ReplicationError,
)
from mqha.controller.records import encode_record
from mqha.controller.replies import elect_payload
from mqha.controller.result import ControllerResult
from mqha.controller.state import BrokerGroupState, ControllerState
from mqha.controller.topics import (
    handle_delete_topic,
    handle_topic_list,
    handle_topic_route,
    handle_update_topic,
    topic_lock_key,
)
from mqha.wire.controller_api import (
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    CleanBrokerDataRequest,
    DeleteTopicRequest,
    ElectMasterPayload,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    GetSyncStateDataRequest,
    GroupsPayload,
    NotLeaderPayload,
    RegisterBrokerRequest,
    Reply,
    TopicRouteRequest,
    UpdateTopicRequest,
)
from mqha.wire.offsets_api import QueryConsumerOffsetRequest, UpdateConsumerOffsetRequest

log = logging.getLogger(__name__)

Code = ResponseCode

WRITE_TIMEOUT = 5.0  # docs/reference-behaviour.md §3.1: the request processor waits at most 5 s

NOT_LEADER_REMARK = "The controller is not in leader state"

TRIGGER_BROKER = "broker"
TRIGGER_ADMIN = "admin"
TRIGGER_CONTROLLER = "controller"


def elect_trigger(request: ElectMasterRequest) -> str:
    """Which of the three producers of docs/reference-behaviour.md §5.4 an elect request stands for."""
    if request.requested_id is None:
        return TRIGGER_CONTROLLER
    return TRIGGER_ADMIN if request.designate_elect else TRIGGER_BROKER


Decision = Callable[[ControllerState, LivenessView], ControllerResult]
RoleChangeNotifier = Callable[[str, Reply], None]


class WritePath(NodePart):
    """Answers the leader-only API: serving-leader checks, one write per broker set at a time, Raft failures.

    Reads are here too: they need the same leadership check and, with ``processReadEvent``, a proposal.
    """

    def __init__(
        self, parts: NodeParts, metrics: ControllerMetrics, notify_role_change: RoleChangeNotifier
    ) -> None:
        super().__init__(parts)
        self.metrics = metrics
        self._notify_role_change = notify_role_change  # RoleChangeFanout.notify_role_change
        self._locks: dict[str, list[Any]] = {}  # brokerName -> [Lock, users]

    def _not_leader_reply(self, detail: str = "") -> Reply:
        node_id, address = self.leader()
        if node_id == self.node_id:  # elected but not serving: do not redirect clients to ourselves
            node_id = address = None
        remark = NOT_LEADER_REMARK + (f"; {detail}" if detail else "")
        return Reply(
            Code.CONTROLLER_NOT_LEADER, remark, NotLeaderPayload(leader_id=node_id, leader_address=address)
        )

    def _not_leader(self) -> Reply | None:
        return None if self.log.is_serving_leader() else self._not_leader_reply()

    # ----------------------------------------------------------------------------- reads

    async def _read(self, decide: Callable[[ControllerState], ControllerResult]) -> Reply:
        if (reply := self._not_leader()) is not None:
            return reply
        if self.config["processReadEvent"]:
            # Linearizable read (docs/reference-behaviour.md §3.2 isProcessReadEvent): commit a no-op first.
            failure = await self._propose_barrier()
            if failure is not None:
                return failure
        return decide(self.applier.state).reply

    async def _propose_barrier(self) -> Reply | None:
        try:
            await self.log.propose(self.applier.noop_record, WRITE_TIMEOUT)
        except ReplicationError as exc:
            return self._replication_failure(exc, WRITE_TIMEOUT, read=True)
        return None

    async def get_next_broker_id(self, request: GetNextBrokerIdRequest) -> Reply:
        return await self._read(lambda state: handle_get_next_broker_id(state, request))

    async def get_replica_info(self, request: GetReplicaInfoRequest) -> Reply:
        return await self._read(lambda state: handle_get_replica_info(state, request))

    async def get_sync_state_data(self, request: GetSyncStateDataRequest) -> Reply:
        view = self.heartbeats.view(self.clock.now_ms())
        return await self._read(lambda state: handle_get_sync_state_data(state, request, view))

    async def list_groups(self) -> Reply:
        def decide(state: ControllerState) -> ControllerResult:
            clusters: dict[str, list[str]] = {}
            for name, group in sorted(state.groups.items()):
                clusters.setdefault(group.cluster_name, []).append(name)
            return ControllerResult.read(Reply(Code.SUCCESS, "", GroupsPayload(clusters=clusters)))

        return await self._read(decide)

    async def topic_list(self) -> Reply:
        return await self._read(handle_topic_list)

    async def topic_route(self, request: TopicRouteRequest) -> Reply:
        return await self._read(lambda state: handle_topic_route(state, request))

    async def query_consumer_offset(self, request: QueryConsumerOffsetRequest) -> Reply:
        return await self._read(lambda state: handle_query_consumer_offset(state, request))

    # ----------------------------------------------------------------------------- writes

    @contextlib.asynccontextmanager
    async def _group_lock(self, broker_name: str) -> AsyncIterator[None]:
        entry = self._locks.get(broker_name)
        if entry is None:
            entry = self._locks[broker_name] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[broker_name]  # no lock per name ever seen: names come from requests

    async def _write(self, broker_name: str, decide: Decision, timeout: float = WRITE_TIMEOUT) -> Reply:
        if (reply := self._not_leader()) is not None:
            return reply
        async with self._group_lock(broker_name):
            if (reply := self._not_leader()) is not None:
                return reply
            result = decide(self.applier.state, self.heartbeats.view(self.clock.now_ms()))
            if not result.records:
                return result.reply
            outcome: Any = None
            try:
                for record in result.records:  # handlers return one record; keep the last outcome
                    outcome = await self.log.propose(encode_record(record), timeout)
            except ReplicationError as exc:
                return self._replication_failure(exc, timeout)
            return reply_from_outcome(result, outcome)

    def _replication_failure(self, exc: ReplicationError, timeout: float, read: bool = False) -> Reply:
        what = "the read barrier" if read else "the write"
        if isinstance(exc, NotLeaderError):
            return self._not_leader_reply(f"leadership moved; {what} was not appended")
        if isinstance(exc, ApplyError):
            return Reply(Code.SYSTEM_ERROR, f"{what} committed but failed to apply here: {exc}")
        unknown = isinstance(exc, ProposalTimeout) or (
            isinstance(exc, ProposalFailed) and exc.outcome_unknown
        )
        fate = "its outcome is unknown (it may still commit)" if unknown else "it was not committed"
        if not self.log.is_leader():
            return self._not_leader_reply(f"leadership moved during {what}; {fate}")
        if isinstance(exc, ProposalTimeout):
            return Reply(
                Code.SERVICE_NOT_AVAILABLE, f"no quorum: {what} did not commit within {timeout:g} s; {fate}"
            )
        reason = exc.reason if isinstance(exc, ProposalFailed) else str(exc)
        return Reply(Code.SERVICE_NOT_AVAILABLE, f"{what} failed: {reason}; {fate}")

    async def apply_broker_id(self, request: ApplyBrokerIdRequest) -> Reply:
        return await self._write(request.broker_name, lambda state, _: handle_apply_broker_id(state, request))

    async def register_broker(self, request: RegisterBrokerRequest) -> Reply:
        return await self._write(
            request.broker_name, lambda state, live: handle_register_broker(state, request, live)
        )

    async def alter_sync_state_set(self, request: AlterSyncStateSetRequest) -> Reply:
        before = self.applier.state.group(request.broker_name)
        reply = await self._write(
            request.broker_name, lambda state, live: handle_alter_sync_state_set(state, request, live)
        )
        name, members = request.broker_name, request.sync_state_set
        kept = frozenset() if before is None else before.sync_state_set
        effects = after_alter_sync_state_set(
            reply.code,
            members,
            kept,
            known=self._joined(name, kept),
            vouched=request.member_incarnations,
            current=self._incarnations(name, members),
            confirm_offset=request.confirm_offset,
        )
        if effects.note_members is not None:
            self.heartbeats.note_members(name, effects.note_members)
        if effects.acking_master:
            self.heartbeats.mark_acking_master(name, request.master_epoch)
        return reply

    async def clean_broker_data(self, request: CleanBrokerDataRequest) -> Reply:
        return await self._write(
            request.broker_name, lambda state, live: handle_clean_broker_data(state, request, live)
        )

    async def update_topic(self, request: UpdateTopicRequest) -> Reply:
        key = topic_lock_key(request.topic_name)
        return await self._write(key, lambda state, _: handle_update_topic(state, request))

    async def update_consumer_offset(self, request: UpdateConsumerOffsetRequest) -> Reply:
        return await self._write(
            CONSUMER_OFFSETS_LOCK_KEY, lambda state, _: handle_update_consumer_offset(state, request)
        )

    async def acl_write(self, key: str, decide: Callable[[ControllerState], ControllerResult]) -> Reply:
        """An ACL write (``mqha.controller.acl_routes``), one at a time per user (``key``)."""
        return await self._write(key, lambda state, _: decide(state))

    async def acl_read(self, decide: Callable[[ControllerState], ControllerResult]) -> Reply:
        return await self._read(decide)

    async def delete_topic(self, request: DeleteTopicRequest) -> Reply:
        key = topic_lock_key(request.topic_name)
        return await self._write(key, lambda state, _: handle_delete_topic(state, request))

    async def elect_master(
        self, request: ElectMasterRequest, *, trigger: str | None = None, timeout: float = WRITE_TIMEOUT
    ) -> Reply:
        trigger = trigger or elect_trigger(request)
        name = request.broker_name
        policy = ElectionPolicy(
            self.config["enableElectUncleanMaster"], self.config["uncleanRecoveryTimeoutMills"]
        )
        started = time.monotonic()
        decided: list[ElectionResult] = []

        def decide(state: ControllerState, live: LivenessView) -> ControllerResult:
            result = handle_elect_master(state, request, live, policy, self.waits.waited_ms(name, now))
            if result.election is not None:
                decided.append(result.election)
            return result

        now = self.clock.now_ms()
        before = self.applier.state.group(name)
        reply = await self._write(name, decide, timeout)
        if reply.code != Code.CONTROLLER_NOT_LEADER:
            self.metrics.observe_election(trigger, reply.code.name, time.monotonic() - started)
        if reply.ok and isinstance(payload := reply.payload, ElectMasterPayload):
            log.info(
                "%s election of %s: master %s, masterEpoch %s, syncStateSet %s",
                trigger,
                name,
                payload.master_broker_id,
                payload.master_epoch,
                sorted(payload.sync_state_set or ()),
            )
        if decided:
            effects = after_election(self._outcome(name, decided[-1], reply, now, before))
            self._carry_out(name, effects, decided[-1], reply)
        return reply

    def _outcome(
        self, name: str, result: ElectionResult, reply: Reply, now_ms: int, before: BrokerGroupState | None
    ) -> ElectionOutcome:
        """What the election core needs to know of an answered attempt (plain values)."""
        payload = reply.payload
        new_master = (
            payload.master_broker_id if isinstance(payload, ElectMasterPayload) and reply.ok else None
        )
        after = self.applier.state.group(name)
        known = {} if new_master is None else self._incarnations(name, {new_master})
        return ElectionOutcome(
            result,
            reply.code,
            now_ms,
            wait_before=self.waits.get(name),
            new_master=new_master,
            new_master_incarnation=None if new_master is None else known.get(new_master),
            epoch_before=None if before is None else before.master_epoch,
            master_after=None if after is None else after.master_broker_id,
            epoch_after=None if after is None else after.master_epoch,
        )

    def _carry_out(self, name: str, effects: AfterElection, result: ElectionResult, reply: Reply) -> None:
        """Carry out the soft effects of an election attempt (``mqha.controller.election.after_election``)."""
        if effects.wait_changes:
            self.waits.set(name, effects.wait)
        if effects.wait_started:
            log.warning("election of %s waits: %s", name, result.describe_wait())
        if effects.declared_loss is not None:
            self.metrics.observe_acked_data_lost(name)
            log.error(
                "ACKNOWLEDGED DATA LOST in %s: offsets [%d, %d) are on no live replica; broker %s elected",
                name,
                effects.declared_loss[0],
                effects.declared_loss[1],
                result.broker_id,
            )
        group = self.applier.state.group(name)
        if effects.push_fence and group is not None:
            # The members stop following the cleared master and report from behind the fence.
            self._notify_role_change(name, elect_payload(group, with_member_group=True))
        if effects.note_members is not None:
            self.heartbeats.note_members(name, effects.note_members)
        if effects.push_role_change and isinstance(reply.payload, ElectMasterPayload):
            self._notify_role_change(name, reply.payload)

    def _joined(self, name: str, members: frozenset[int]) -> dict[int, str]:
        """The incarnations with which ``members`` joined the SyncStateSet, as far as this node knows."""
        found = {b: self.heartbeats.member_incarnation(name, b) for b in members}
        return {b: incarnation for b, incarnation in found.items() if incarnation is not None}

    def _incarnations(self, name: str, members: frozenset[int] | set[int]) -> dict[int, str]:
        """The incarnations ``members`` heartbeat with now, as far as this node knows."""
        infos = {b: self.heartbeats.info(name, b) for b in members}
        return {
            b: info.incarnation
            for b, info in infos.items()
            if info is not None and info.incarnation is not None
        }
