"""The broker-side controller agent as a pure planner (core; docs/reference-behaviour.md §9,
docs/architecture.md §11 rules 1, 2, 6).

``ReplicasPlanner`` is the ``RawNode`` of the ReplicasManager: it owns every decision and no IO.
Inputs are method calls with the current time (``now_ms``); each returns the actions to execute
(``actions.py``), and the results of those actions come back as further inputs:

    start / shutdown                      lifecycle
    on_identity_loaded                    what the identity files held at start
                                          (docs/reference-behaviour.md §9.3 step 1)
    tick(now_ms)                          timers: start-sequence retries and the periodic tasks
    on_controller_reply(call, reply)      a reply (``mqha.wire`` ``Reply``) or ``None`` (unreachable)
    on_temp_identity_written / on_identity_written / on_heartbeat_sent
    on_role_change_result(action, ok)     the broker hook's verdict on BecomeMaster / BecomeSlave
    on_role_notification(note)            a roleChanged push (docs/reference-behaviour.md §7.4, §9.6)
    on_local_progress(progress)           epoch and offsets for heartbeats (docs/reference-behaviour.md §9.7)
    on_sync_state_set_check(wanted)       the HA layer's answer to CheckSyncStateSet
                                          (docs/reference-behaviour.md §9.5)
    on_sync_state_set_proposal(proposed)  the HA layer's expand / connection-loss report
                                          (docs/reference-behaviour.md §9.5)

Start sequence (docs/reference-behaviour.md §9.2), resumed from the current state after each input:

    INITIAL                   GetMetadata; failure: again after 1 s, after 3 failures after 5 s
    FIRST_TIME_SYNC_...       the register flow below; failure: again after 0-999 ms, after 5
                              failures after 5 s
    REGISTER_TO_CONTROLLER_DONE
                              one confirmed heartbeat, then: master known -> RUNNING; else
                              ElectMaster; a successful election's role change accepted -> RUNNING;
                              anything else: again after 5 s
    RUNNING                   SetFenced(False); heartbeats, replica-info sync, SSS check (master)

Register flow (docs/reference-behaviour.md §9.3) by ``RegisterState``:

    INITIAL            GetNextBrokerId -> WriteTempIdentity          -> CREATE_TEMP_METADATA_FILE_DONE
    CREATE_TEMP_...    ApplyBrokerId -> WriteIdentity -> DeleteTempIdentity, SetBrokerControllerId
                                                                     -> CREATE_METADATA_FILE_DONE
                       (apply failure of any kind: DeleteTempIdentity -> INITIAL, start over;
                        metadata write failure: DeleteIdentity, the temp file survives)
    CREATE_METADATA... RegisterBroker -> role change from the reply's master -> REGISTERED

Role changes (docs/reference-behaviour.md §9.6, ``role_flow.py``): only a newer master epoch, one hook
call in flight, and nothing changes unless the hook accepts. SyncStateSet (docs/reference-behaviour.md
§9.5, ``sync_state_set_upkeep.py``): a master's set only moves to a newer SyncStateSet epoch.

Deviations, each deliberate: the first replica-info sync, metadata refresh and SSS check run after
``min(3 s, period)`` rather than 3 s (short test periods); RUNNING requires the role change to have
been accepted (the reference ignores the HA layer's verdict); an empty answer to CheckSyncStateSet
means "the HA layer has no opinion" and proposes nothing; identical SSS proposals in flight merge.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from enum import Enum
from typing import TypeVar

from mqha.codes import ResponseCode
from mqha.errors import LocalProtocolError
from mqha.replicas_manager import actions as act
from mqha.replicas_manager.hooks import BrokerProgress
from mqha.replicas_manager.planner_states import (
    FIRST_RUN_DELAY_MS,
    METADATA_ATTEMPTS,
    METADATA_RETRY_MS,
    REGISTER_TRANSITIONS,
    REREGISTER_PAUSE_MS,
    RETRY_INTERVAL_MS,
    START_HEARTBEAT,
    STATE_TRANSITIONS,
    PlannerConfig,
    RegisterEvent,
    RegisterState,
    State,
    StateEvent,
    _describe,
    _next,
    _parse,
)
from mqha.replicas_manager.register_flow import RegisterFlow
from mqha.replicas_manager.role_flow import RoleFlow
from mqha.replicas_manager.sync_state_set_upkeep import SyncStateSetUpkeep
from mqha.wire.controller_api import (
    BrokerHeartbeatRequest,
    ElectMasterPayload,
    ElectMasterRequest,
    GetReplicaInfoRequest,
    ReplicaInfoPayload,
    Reply,
)

log = logging.getLogger(__name__)

Code = ResponseCode
_S = TypeVar("_S", bound=Enum)


class ReplicasPlanner(RegisterFlow, RoleFlow, SyncStateSetUpkeep):
    """Decisions of the ReplicasManager; see the module docstring for the inputs and the flows.

    It holds the state and runs the start sequence, the timers and the controller calls; the register
    flow, the role changes and the SyncStateSet upkeep are its parts (``register_flow.py``,
    ``role_flow.py``, ``sync_state_set_upkeep.py``), which read and write the same fields."""

    def __init__(self, config: PlannerConfig, *, seed: int | None = None) -> None:
        self.config = config
        self._rng = random.Random(seed)
        self.state = State.INITIAL
        self.register_state = RegisterState.INITIAL
        self.broker_id: int | None = None
        self.temp_identity: act.TempBrokerIdentity | None = None
        self.master_broker_id: int | None = None
        self.master_address: str | None = None
        self.master_ha_address: str | None = None
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.progress = BrokerProgress(last_epoch=-1, max_offset=-1, confirm_offset=-1)
        self.basic_service_failures = 0  # how many times the start sequence had to be retried
        self.last_failure: str | None = None

        self._started = False
        self._seq = 0
        self._in_flight: dict[str, int] = {}
        self._persisting = False  # a register-flow file write is pending
        self._role_in_flight: act.RoleChange | None = None
        self._role_pending: act.RoleChange | None = None
        self._sss_in_flight: frozenset[int] | None = None
        self._sss_pending: frozenset[int] | None = None
        self._sss_pending_from_check = False  # the pending wish is a periodic check's answer
        self._check_in_flight = False
        self._slave_incarnations: dict[int, str] | None = None  # the HA layer's, with its last report
        # Start sequence bookkeeping.
        self._retry_at: int | None = None
        self._metadata_failures = 0
        self._register_failures = 0
        self._start_heartbeat_done = False
        self._start_elect_done = False
        self._id_held_since_ms: int | None = None  # the first register refused for a held id
        # Periodic tasks (due time in ms, None = not scheduled).
        self._metadata_due: int | None = None
        self.fenced_epoch = 0  # the highest masterEpoch cleared of its master that this broker heard of
        self._heartbeat_due: int | None = None
        self._replica_info_due: int | None = None
        self._sss_check_due: int | None = None

    # ------------------------------------------------------------------------------ queries

    @property
    def is_master(self) -> bool:
        return self.broker_id is not None and self.master_broker_id == self.broker_id

    @property
    def role(self) -> str:
        if self.master_broker_id is None or self.broker_id is None:
            return "NONE"
        return "MASTER" if self.is_master else "SLAVE"

    @property
    def role_change_in_flight(self) -> act.RoleChange | None:
        return self._role_in_flight

    def next_wakeup_ms(self) -> int | None:
        """The earliest time ``tick`` has something to do (None: only inputs can wake it)."""
        if not self._started or self.state is State.SHUTDOWN:
            return None
        # Only the dues ``tick`` acts on now: a due it would skip (the start retry while a start step is
        # in flight, the RUNNING-only timers before RUNNING) would stay in the past and make the runner
        # spin with a zero timeout.
        running = self.state is State.RUNNING
        dues = [
            None if self._start_busy() else self._retry_at,
            self._metadata_due,
            self._heartbeat_due if self.broker_id is not None else None,
            self._replica_info_due if running else None,
            self._sss_check_due if running and self.is_master else None,
        ]
        pending = [due for due in dues if due is not None]
        return min(pending) if pending else None

    def heartbeat_request(self) -> BrokerHeartbeatRequest:
        """docs/reference-behaviour.md §9.7: identity, last epoch, offsets, the configured timeout and
        priority."""
        if self.broker_id is None:
            raise LocalProtocolError("a heartbeat needs the controller broker id")
        start = self.config.start.request_fields() if self.config.start is not None else {}
        max_offset, damaged = self.progress.max_offset, self.progress.damaged_from
        if damaged is not None:  # a damaged replica holds its log only up to there (§4.7)
            max_offset = min(max_offset, damaged)
            start["lossy_recovery"] = True
        return BrokerHeartbeatRequest(
            cluster_name=self.config.cluster_name,
            broker_name=self.config.broker_name,
            broker_addr=self.config.broker_address,
            broker_id=self.broker_id,
            epoch=self.progress.last_epoch,
            max_offset=max_offset,
            # A master with an ack point reports it (docs/architecture.md §3.2): with inSyncReplicas its
            # confirm offset is its log end, which says nothing of what was acknowledged.
            confirm_offset=(
                self.progress.confirm_offset if self.progress.ack_point is None else self.progress.ack_point
            ),
            heartbeat_timeout_mills=self.config.heartbeat_timeout_ms,
            election_priority=self.config.election_priority,
            **start,
            all_ack_in_sync_state_set=self.config.all_ack_in_sync_state_set,
            in_sync_replicas=self.config.in_sync_replicas,
            known_master_epoch=max(self.master_epoch, self.fenced_epoch),
        )

    # ---------------------------------------------------------------------------- transitions

    def _transition(self, event: StateEvent) -> None:
        self.state = _next(STATE_TRANSITIONS, self.state, event, "state")

    def _register_transition(self, event: RegisterEvent) -> None:
        self.register_state = _next(REGISTER_TRANSITIONS, self.register_state, event, "register state")

    # ------------------------------------------------------------------------------ lifecycle

    def on_identity_loaded(
        self, identity: act.BrokerIdentity | None, temp: act.TempBrokerIdentity | None
    ) -> None:
        """docs/reference-behaviour.md §9.3 step 1 (the shell has checked the names against the config)."""
        if self._started:
            raise LocalProtocolError("identity files are loaded before start")
        if identity is not None:
            self._register_transition(RegisterEvent.METADATA_FILE_FOUND)
            self.broker_id = identity.broker_id
        elif temp is not None:
            self._register_transition(RegisterEvent.TEMP_FILE_FOUND)
            self.temp_identity = temp

    def start(self, now_ms: int) -> list[act.Action]:
        """Fence the broker (docs/reference-behaviour.md §9) and begin the start sequence."""
        if self._started:
            return []
        self._started = True
        out: list[act.Action] = [act.SetFenced(True)]
        if self.broker_id is not None:
            out.append(act.SetBrokerControllerId(self.broker_id))
        return out + self._drive_start(now_ms)

    def shutdown(self, now_ms: int) -> list[act.Action]:
        if self.state is State.SHUTDOWN:
            return []
        self._transition(StateEvent.SHUTDOWN)
        self._retry_at = self._metadata_due = self._heartbeat_due = None
        self._replica_info_due = self._sss_check_due = None
        return [act.SetFenced(True)]

    def on_local_progress(self, progress: BrokerProgress) -> None:
        self.progress = progress

    # ------------------------------------------------------------------------------ timers

    def tick(self, now_ms: int) -> list[act.Action]:
        if not self._started or self.state is State.SHUTDOWN:
            return []
        out = self._drive_start(now_ms)
        if self._metadata_due is not None and now_ms >= self._metadata_due:
            self._metadata_due = now_ms + self.config.sync_controller_metadata_period_ms
            out += self._call_once(act.GetMetadata)
        # Heartbeats go on from the first confirmed one, master or not: a registered replica waiting for
        # a master is alive to the controller, whose election may be waiting for it (docs/architecture.md
        # §3.2; the reference heartbeats only once RUNNING, and once per start attempt before).
        if self._heartbeat_due is not None and now_ms >= self._heartbeat_due and self.broker_id is not None:
            self._heartbeat_due = now_ms + self.config.heartbeat_interval_ms
            out.append(act.SendHeartbeat(self.heartbeat_request()))
        if self.state is not State.RUNNING:
            return out
        if self._replica_info_due is not None and now_ms >= self._replica_info_due:
            self._replica_info_due = now_ms + self.config.sync_broker_metadata_period_ms
            out += self._call_once(
                lambda seq: act.GetReplicaInfo(
                    seq, GetReplicaInfoRequest(broker_name=self.config.broker_name)
                )
            )
        if self.is_master and self._sss_check_due is not None and now_ms >= self._sss_check_due:
            self._sss_check_due = now_ms + self.config.check_sync_state_set_period_ms
            out += self._check_sync_state_set()
        return out

    # ----------------------------------------------------------------------- controller calls

    def _call_once(self, make: Callable[[int], act.ControllerCall]) -> list[act.Action]:
        """A controller call unless one of its kind is in flight."""
        self._seq += 1
        call = make(self._seq)
        if call.kind in self._in_flight:
            return []
        self._in_flight[call.kind] = call.seq
        return [call]

    def on_controller_reply(
        self, call: act.ControllerCall, reply: Reply | None, now_ms: int
    ) -> list[act.Action]:
        if self._in_flight.get(call.kind) != call.seq:
            log.debug("stale %s reply ignored", call.kind)
            return []
        del self._in_flight[call.kind]
        if self.state is State.SHUTDOWN:
            return []
        match call:
            case act.GetMetadata():
                out = self._on_metadata(reply, now_ms)
            case act.GetNextBrokerId():
                out = self._on_next_broker_id(reply, now_ms)
            case act.ApplyBrokerId():
                out = self._on_apply_broker_id(reply, now_ms)
            case act.RegisterBroker():
                out = self._on_register(reply, now_ms)
            case act.GetReplicaInfo():
                out = self._on_replica_info(reply, now_ms)
            case act.ElectMaster():
                out = self._on_elect(reply, now_ms)
            case act.ProposeSyncStateSet():
                out = self._on_alter_sync_state_set(call, reply)
            case act.ReleaseEligibleReplicas():
                out = self._on_release_eligible(call, reply)
            case _:
                raise LocalProtocolError(f"no handler for controller call {call!r}")
        return out + self._drive_start(now_ms)

    # --------------------------------------------------------------------------- start sequence

    def _start_busy(self) -> bool:
        # A metadata refresh in flight does not hold the later steps back.
        if self.state is State.INITIAL and act.GetMetadata.kind in self._in_flight:
            return True
        return (
            self._persisting
            or self._role_in_flight is not None
            or any(
                kind in self._in_flight
                for kind in (
                    act.GetNextBrokerId.kind,
                    act.ApplyBrokerId.kind,
                    act.RegisterBroker.kind,
                    act.ElectMaster.kind,
                    START_HEARTBEAT,
                )
            )
        )

    def _drive_start(self, now_ms: int) -> list[act.Action]:
        """The next step of ``startBasicService`` (docs/reference-behaviour.md §9.2), if it is time and
        nothing is pending."""
        if not self._started or self.state in (State.RUNNING, State.SHUTDOWN):
            return []
        if self._retry_at is not None and now_ms < self._retry_at:
            return []
        if self._start_busy():
            return []
        self._retry_at = None
        if self.state is State.INITIAL:
            return self._call_once(act.GetMetadata)
        if self.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE:
            return self._register_step()
        # REGISTER_TO_CONTROLLER_DONE
        if not self._start_heartbeat_done:
            self._seq += 1
            self._in_flight[START_HEARTBEAT] = self._seq
            return [act.SendHeartbeat(self.heartbeat_request(), confirm=True, seq=self._seq)]
        if self.master_broker_id is not None:
            return self._become_running(now_ms)
        if not self._start_elect_done:
            self._start_elect_done = True
            return self._elect()
        return self._fail_start(now_ms, "no master after the election", RETRY_INTERVAL_MS)

    def _fail_start(self, now_ms: int, reason: str, delay_ms: int) -> list[act.Action]:
        self.basic_service_failures += 1
        self.last_failure = reason
        self._retry_at = now_ms + delay_ms
        self._start_heartbeat_done = False
        self._start_elect_done = False
        log.info("start sequence (%s) failed: %s; retrying in %d ms", self.state.value, reason, delay_ms)
        return []

    def _become_running(self, now_ms: int) -> list[act.Action]:
        self._transition(StateEvent.MASTER_KNOWN)
        self.last_failure = None
        cfg = self.config
        self._heartbeat_due = now_ms + cfg.heartbeat_interval_ms
        self._replica_info_due = now_ms + min(FIRST_RUN_DELAY_MS, cfg.sync_broker_metadata_period_ms)
        log.info(
            "broker %d RUNNING as %s (master %s, masterEpoch %d)",
            self.broker_id,
            self.role,
            self.master_broker_id,
            self.master_epoch,
        )
        return [act.SetFenced(False)]

    def _on_metadata(self, reply: Reply | None, now_ms: int) -> list[act.Action]:
        ok = reply is not None and reply.ok and bool(reply.payload.get("leaderAddress"))
        if self.state is not State.INITIAL:
            if not ok:
                log.debug("controller metadata refresh failed: %s", _describe(reply))
            return []
        if not ok:
            self._metadata_failures += 1
            if self._metadata_failures < METADATA_ATTEMPTS:
                return self._fail_start(
                    now_ms, f"no controller leader: {_describe(reply)}", METADATA_RETRY_MS
                )
            self._metadata_failures = 0
            return self._fail_start(now_ms, f"no controller leader: {_describe(reply)}", RETRY_INTERVAL_MS)
        self._metadata_failures = 0
        self._transition(StateEvent.METADATA_SYNCED)
        self._metadata_due = now_ms + min(FIRST_RUN_DELAY_MS, self.config.sync_controller_metadata_period_ms)
        return []

    # ------------------------------------------------------------------------ elect, replica info

    def _elect(self) -> list[act.Action]:
        assert self.broker_id is not None
        request = ElectMasterRequest(
            broker_name=self.config.broker_name,
            cluster_name=self.config.cluster_name,
            broker_id=self.broker_id,
            designate_elect=False,
        )
        return self._call_once(lambda seq: act.ElectMaster(seq, request))

    def _on_elect(self, reply: Reply | None, now_ms: int) -> list[act.Action]:
        """docs/reference-behaviour.md §9.6 brokerElect: success on SUCCESS or MASTER_STILL_EXIST naming a
        master."""
        payload = None
        if reply is not None and reply.code in (Code.SUCCESS, Code.CONTROLLER_MASTER_STILL_EXIST):
            payload = _parse(ElectMasterPayload, reply)
        if payload is None or payload.master_broker_id is None or not payload.master_address:
            reason = f"brokerElect failed: {_describe(reply)}"
            if self.state is State.REGISTER_TO_CONTROLLER_DONE:
                return self._fail_start(now_ms, reason, RETRY_INTERVAL_MS)
            log.info("%s", reason)
            return []
        return self._on_master_info(payload)

    def _on_replica_info(self, reply: Reply | None, now_ms: int) -> list[act.Action]:
        """docs/reference-behaviour.md §9.4."""
        if reply is not None and reply.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            log.warning(
                "the controller does not know broker set %s: registering again", self.config.broker_name
            )
            self._replica_info_due = max(self._replica_info_due or 0, now_ms + REREGISTER_PAUSE_MS)
            return self._register_call()
        payload = _parse(ReplicaInfoPayload, reply) if reply is not None and reply.ok else None
        if payload is None:
            log.debug("replica-info sync failed: %s", _describe(reply))
            return []
        if payload.master_epoch > self.master_epoch:
            if payload.master_address and payload.master_broker_id is not None:
                return self._on_master_info(payload)
            return self._on_master_cleared(payload.master_epoch, now_ms) + self._elect()
        if payload.master_epoch == self.master_epoch and self.is_master:
            return self._change_sync_state_set(payload.sync_state_set, payload.sync_state_set_epoch)
        return []

    # ------------------------------------------------------------------------------ heartbeats

    def on_master_link_closed(self, now_ms: int) -> list[act.Action]:
        """A slave's replication link closed: the next heartbeat is due now (its maxOffset is what an
        election by count waits for, docs/architecture.md §3.2)."""
        if self.broker_id is not None and not self.is_master:
            self._heartbeat_soon(now_ms)
        return []

    def on_damage_changed(self, now_ms: int) -> list[act.Action]:
        """A damaged commit-log record was found or repaired (docs/architecture.md §4.7): heartbeat now,
        whatever the role, so the controllers learn at once whether this replica is complete."""
        if self.broker_id is not None:
            self._heartbeat_soon(now_ms)
        return []

    def _heartbeat_soon(self, now_ms: int) -> None:
        """Bring the scheduled heartbeat forward to ``now_ms`` (none is scheduled before RUNNING)."""
        if self._heartbeat_due is not None:
            self._heartbeat_due = min(self._heartbeat_due, now_ms)

    def on_heartbeat_refused(self, controller: str, remark: str, now_ms: int) -> list[act.Action]:
        """``controller`` refused a heartbeat: another live process at another address holds this id
        there (docs/architecture.md §3.2). It registered after this process did, so two processes run
        under one id: stop, fenced (if both do, nothing is lost; two masters could lose acks)."""
        return self.give_up_broker_id(f"controller {controller}: {remark}", now_ms)

    def on_heartbeat_sent(self, action: act.SendHeartbeat, delivered: int, now_ms: int) -> list[act.Action]:
        """The start sequence's heartbeat reached ``delivered`` controllers; go on either way."""
        if not action.confirm or self._in_flight.get(START_HEARTBEAT) != action.seq:
            return []
        del self._in_flight[START_HEARTBEAT]
        if self.state is not State.REGISTER_TO_CONTROLLER_DONE:
            return []
        if delivered == 0:
            log.info("the start heartbeat reached no controller")
        self._start_heartbeat_done = True
        if self._heartbeat_due is None:
            self._heartbeat_due = now_ms + self.config.heartbeat_interval_ms
        return self._drive_start(now_ms)
