"""The register flow of the ReplicasPlanner (core; docs/reference-behaviour.md §9.3)."""

from __future__ import annotations

import logging

from mqha.codes import ResponseCode
from mqha.replicas_manager.actions import (
    Action,
    ApplyBrokerId,
    BrokerIdentity,
    DeleteIdentity,
    DeleteTempIdentity,
    GetNextBrokerId,
    GiveUpBrokerId,
    RegisterBroker,
    SetBrokerControllerId,
    TempBrokerIdentity,
    WriteIdentity,
    WriteTempIdentity,
)
from mqha.replicas_manager.planner_states import (
    REGISTER_ATTEMPTS,
    REGISTER_JITTER_MS,
    RETRY_INTERVAL_MS,
    RegisterEvent,
    RegisterState,
    State,
    StateEvent,
    _describe,
    _parse,
)
from mqha.wire.controller_api import (
    ApplyBrokerIdRequest,
    GetNextBrokerIdRequest,
    NextBrokerIdPayload,
    RegisterBrokerPayload,
    RegisterBrokerRequest,
    Reply,
)

log = logging.getLogger("mqha.replicas_manager.planner")


class RegisterFlow:
    """Steps the register flow by ``RegisterState`` (part of ``ReplicasPlanner``).

    The steps: next id, temp file, apply, metadata file, register.
    """

    def _register_step(self) -> list[Action]:
        cfg = self.config
        match self.register_state:
            case RegisterState.INITIAL:
                request = GetNextBrokerIdRequest(cluster_name=cfg.cluster_name, broker_name=cfg.broker_name)
                return self._call_once(lambda seq: GetNextBrokerId(seq, request))
            case RegisterState.CREATE_TEMP_METADATA_FILE_DONE:
                temp = self.temp_identity
                assert temp is not None  # set with the state
                apply = ApplyBrokerIdRequest(
                    cluster_name=cfg.cluster_name,
                    broker_name=cfg.broker_name,
                    applied_broker_id=temp.broker_id,
                    register_check_code=temp.register_check_code,
                )
                return self._call_once(lambda seq: ApplyBrokerId(seq, apply))
            case _:  # CREATE_METADATA_FILE_DONE (REGISTERED moves the state on at once)
                return self._register_call()

    def _register_call(self) -> list[Action]:
        assert self.broker_id is not None
        request = RegisterBrokerRequest(
            cluster_name=self.config.cluster_name,
            broker_name=self.config.broker_name,
            broker_id=self.broker_id,
            broker_address=self.config.broker_address,
            ha_address=self.config.ha_address,
            store_id=self.config.store_id,
            **(self.config.start.request_fields() if self.config.start is not None else {}),
        )
        return self._call_once(lambda seq: RegisterBroker(seq, request))

    def _fail_register(self, now_ms: int, reason: str) -> list[Action]:
        self._register_failures += 1
        if self._register_failures < REGISTER_ATTEMPTS:
            return self._fail_start(now_ms, reason, self._rng.randrange(REGISTER_JITTER_MS))
        self._register_failures = 0
        return self._fail_start(now_ms, reason, RETRY_INTERVAL_MS)

    def _on_next_broker_id(self, reply: Reply | None, now_ms: int) -> list[Action]:
        payload = _parse(NextBrokerIdPayload, reply) if reply is not None and reply.ok else None
        if payload is None:
            return self._fail_register(now_ms, f"getNextBrokerId failed: {_describe(reply)}")
        self._persisting = True
        return [WriteTempIdentity(payload.next_broker_id)]

    def on_temp_identity_written(
        self, action: WriteTempIdentity, written: TempBrokerIdentity | None, now_ms: int
    ) -> list[Action]:
        """The temp file holds ``written`` (None: the write failed, docs/reference-behaviour.md §9.3 step
        3)."""
        self._persisting = False
        if self.state is State.SHUTDOWN:
            return []
        if written is None:
            return [DeleteTempIdentity(), *self._fail_register(now_ms, "cannot write the temp identity file")]
        self._register_transition(RegisterEvent.TEMP_FILE_WRITTEN)
        self.temp_identity = written
        return self._drive_start(now_ms)

    def _on_apply_broker_id(self, reply: Reply | None, now_ms: int) -> list[Action]:
        temp = self.temp_identity
        assert temp is not None
        if reply is None or not reply.ok:
            # docs/reference-behaviour.md §9.3 step 4: any failure deletes the temp file and starts over with
            # a new id.
            self._register_transition(RegisterEvent.APPLY_FAILED)
            self.temp_identity = None
            reason = f"applyBrokerId {temp.broker_id} failed: {_describe(reply)}"
            return [DeleteTempIdentity(), *self._fail_register(now_ms, reason)]
        self._persisting = True
        cfg = self.config
        identity = BrokerIdentity(cfg.cluster_name, cfg.broker_name, temp.broker_id, cfg.store_id)
        return [WriteIdentity(identity)]

    def on_identity_written(self, action: WriteIdentity, ok: bool, now_ms: int) -> list[Action]:
        self._persisting = False
        if self.state is State.SHUTDOWN:
            return []
        if not ok:
            # The temp file survives: the next attempt re-applies the same id (idempotent).
            return [DeleteIdentity(), *self._fail_register(now_ms, "cannot write the identity file")]
        self._register_transition(RegisterEvent.METADATA_FILE_WRITTEN)
        self.broker_id = action.identity.broker_id
        self.temp_identity = None
        return [DeleteTempIdentity(), SetBrokerControllerId(self.broker_id), *self._drive_start(now_ms)]

    def _on_register(self, reply: Reply | None, now_ms: int) -> list[Action]:
        if reply is not None and reply.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
            return self._on_id_held(reply.remark, now_ms)
        payload = _parse(RegisterBrokerPayload, reply) if reply is not None and reply.ok else None
        if payload is None:
            reason = f"registerBroker failed: {_describe(reply)}"
            if self.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE:
                return self._fail_register(now_ms, reason)
            log.warning("%s", reason)
            return []
        self._id_held_since_ms = None
        self._register_transition(RegisterEvent.REGISTER_SUCCEEDED)
        if self.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE:
            self._register_failures = 0
            self._transition(StateEvent.REGISTERED)
        return self._on_master_info(payload)

    def _on_id_held(self, remark: str, now_ms: int) -> list[Action]:
        """The leader refused the register: another live process at another address holds this id
        (docs/architecture.md §3.2). Retried for one heartbeat timeout -- a replica that moved may be
        ahead of its old process's expiry -- then given up: a copy of another replica's store, or an
        identity file naming another replica."""
        if self._id_held_since_ms is None:
            self._id_held_since_ms = now_ms
            timeout = self.config.heartbeat_timeout_ms
            log.warning("registerBroker refused: %s; retrying for %d ms", remark, timeout)
        if now_ms - self._id_held_since_ms < self.config.heartbeat_timeout_ms:
            if self.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE:
                return self._fail_register(now_ms, f"registerBroker refused: {remark}")
            return []
        return self.give_up_broker_id(remark, now_ms)

    def give_up_broker_id(self, remark: str, now_ms: int) -> list[Action]:
        """Stop for good: another live process holds this broker's id (a refused register that did not
        clear within a heartbeat timeout, or a refused heartbeat: that one registered after us)."""
        if self.state is State.SHUTDOWN:
            return []
        return [*self.shutdown(now_ms), GiveUpBrokerId(self.broker_id, remark)]
