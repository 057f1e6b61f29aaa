"""The controller service of one node (shell): Raft log + applier + heartbeat table + scans.

Theory of operation (docs/architecture.md §3, docs/reference-behaviour.md §3, §7; docs/architecture.md §11
rule 6).

Requests. Every API method returns a ``Reply`` (``http_api`` turns it into HTTP). Leader-only APIs
answer ``CONTROLLER_NOT_LEADER`` (2007, with ``leaderAddress``: the leader's API address, or null
when unknown or when this node was elected but does not serve yet) unless
``ReplicatedLog.is_serving_leader()`` -- barrier applied in this term and a quorum-confirmed lease.

Writes (apply-id, register, elect, alter, clean) run one at a time per broker set (an
``asyncio.Lock`` per brokerName, dropped when idle):

1. check serving leadership (again, after waiting for the lock);
2. decide with the pure core on the current state and a frozen liveness view;
3. a result without records is answered as is (rejections, unchanged registrations);
4. otherwise propose the record (5 s; 3 s for controller-triggered elections) and answer from the
   ``Outcome`` apply returned on this node (``reply_from_outcome``), never from the prediction.

Raft failures: ``NotLeaderError`` -> 2007 (nothing was appended); timeout or a failure with an unknown
outcome -> 2007 if leadership moved meanwhile, else ``SERVICE_NOT_AVAILABLE`` (14, HTTP 503); both
remarks say whether the write may still commit.

Liveness is soft state: every node records the heartbeats it receives (HTTP or session) in its own
``HeartbeatTable``, never in the log. Elections the controller triggers itself (docs/reference-behaviour.md
§7.3), only on the serving leader, with up to ``electMasterMaxRetryCount`` attempts of <= 3 s each:

- heartbeat expiry scan (every node; first after 2 s, then every ``scanNotActiveBrokerInterval``):
  expired entries are dropped (and their session closed); an expired current master -> election;
- session close (``sessions``): entries whose latest heartbeat came on the session are dropped; a
  current master among them -> election at once;
- inactive-master scan (leader; every ``scanInactiveMasterInterval``, first after one interval): a
  set whose master is not alive while another replica is -> election.

Retries stop at the first definitive answer (SUCCESS, 2004 no candidate, 2011 master alive, 2010 set
gone, 2007 not leader); only fenced, timed-out or failed attempts are retried, after 100 ms. (The
reference retries any failure, which for "no candidate" bumps masterEpoch once per attempt.)

After a SUCCESS election of any trigger, with ``notifyBrokerRoleChanged``, every member of the set
that is alive in this node's table and has a session here gets a ``roleChanged`` push
(docs/reference-behaviour.md §7.4).

Web console. ``console_snapshot`` builds the console's document from this node's applied state,
heartbeat table and Raft status (any node: a follower shows its own replicated view and says it is
not the leader); ``self.console`` (``ConsoleFeed``) keeps the election timeline from applied records
and wakes the event streams on applied records, leadership changes and closed sessions.

Config. ``self.config`` is replaced as a whole on ``PUT /v1/controller/config`` (after the blacklist
check, typing, validation and persisting to ``configStorePath``). Keys in ``LIVE_KEYS`` take effect
at once (each use reads ``self.config``); the others are persisted and take effect at the next start.
``adminAuthToken`` and ``controllerRaftPassword`` are masked in ``GET`` answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from mqha.clock import Clock, MonotonicClock
from mqha.codes import ResponseCode
from mqha.config import render_properties
from mqha.controller.applier import ControllerApplier
from mqha.controller.config import CONTROLLER_CONFIG, blacklisted_keys, parse_peers
from mqha.controller.console_feed import ConsoleFeed
from mqha.controller.console_view import PeerView, ServingNode, build_snapshot, summarize_verdict
from mqha.controller.election import ElectionPolicy
from mqha.controller.liveness import HeartbeatTable, LivenessView
from mqha.controller.metrics import ControllerMetrics, GroupGauge, NodeView
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
from mqha.controller.records import encode_record
from mqha.controller.replicated import (
    ApplyError,
    NotLeaderError,
    ProposalFailed,
    ProposalTimeout,
    ReplicatedLog,
    ReplicationError,
)
from mqha.controller.result import ControllerResult
from mqha.controller.sessions import ROLE_CHANGED, SessionRegistry
from mqha.controller.state import ControllerState, encode_state
from mqha.errors import ConfigError
from mqha.history.recorder import HistoryRecorder, controller_observer
from mqha.history.schema import VERDICT_FILE
from mqha.wire.controller_api import (
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    BrokerHeartbeatRequest,
    CleanBrokerDataRequest,
    ElectMasterPayload,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    GetSyncStateDataRequest,
    RegisterBrokerRequest,
    Reply,
    RoleChangedMessage,
)

log = logging.getLogger(__name__)

Code = ResponseCode

WRITE_TIMEOUT = 5.0  # docs/reference-behaviour.md §3.1: the request processor waits at most 5 s
# docs/reference-behaviour.md §7.3: each controller-triggered attempt awaited <= 3 s
CONTROLLER_ELECT_TIMEOUT = 3.0
FIRST_EXPIRY_SCAN_DELAY = 2.0  # docs/reference-behaviour.md §7.1
RETRY_PAUSE = 0.1

NOT_LEADER_REMARK = "The controller is not in leader state"

TRIGGER_BROKER = "broker"
TRIGGER_ADMIN = "admin"
TRIGGER_CONTROLLER = "controller"

# A controller-triggered election stops retrying at these answers.
_FINAL_ELECT_CODES = frozenset(
    {
        Code.SUCCESS,
        Code.CONTROLLER_MASTER_NOT_AVAILABLE,
        Code.CONTROLLER_MASTER_STILL_EXIST,
        Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        Code.CONTROLLER_NOT_LEADER,
    }
)

LIVE_KEYS = frozenset(
    {
        "scanNotActiveBrokerInterval",
        "scanInactiveMasterInterval",
        "electMasterMaxRetryCount",
        "enableElectUncleanMaster",
        "processReadEvent",
        "notifyBrokerRoleChanged",
        "adminAuthToken",
        "maxRequestBodyBytes",
        "brokerSessionPingMills",
        "consoleAnalysisReportDir",
    }
)
SECRET_KEYS = ("adminAuthToken", "controllerRaftPassword")
_POSITIVE_KEYS = (
    "scanNotActiveBrokerInterval",
    "scanInactiveMasterInterval",
    "electMasterMaxRetryCount",
    "maxRequestBodyBytes",
    "controllerRaftPortOffset",
)
_MASK = "******"


def check_config(values: Mapping[str, Any]) -> None:
    """Checks beyond typing that the service relies on; raises ``ConfigError`` naming the key."""
    for key in _POSITIVE_KEYS:
        if values[key] <= 0:
            raise ConfigError(key, f"must be > 0, got {values[key]}")
    if values["brokerSessionPingMills"] < 0:
        raise ConfigError("brokerSessionPingMills", "must be >= 0 (0 disables pings)")
    low, high = values["controllerRaftMinTimeoutMills"], values["controllerRaftMaxTimeoutMills"]
    if low <= 150:  # PySyncObj needs the election timeout above 3 heartbeat periods (3 x 50 ms)
        raise ConfigError("controllerRaftMinTimeoutMills", f"must be > 150, got {low}")
    if high <= low:
        raise ConfigError("controllerRaftMaxTimeoutMills", f"must be > controllerRaftMinTimeoutMills ({low})")


def elect_trigger(request: ElectMasterRequest) -> str:
    """Which of the three producers of docs/reference-behaviour.md §5.4 an elect request stands for."""
    if request.requested_id is None:
        return TRIGGER_CONTROLLER
    return TRIGGER_ADMIN if request.designate_elect else TRIGGER_BROKER


def groups_needing_election(state: ControllerState, liveness: LivenessView) -> list[str]:
    """docs/reference-behaviour.md §3.4 (pure): sets whose master is not alive while at least one replica
    is."""
    names = []
    for name, group in sorted(state.groups.items()):
        master = group.master_broker_id
        if master is None or liveness.is_alive(name, master):
            continue
        if any(liveness.is_alive(name, broker_id) for broker_id in group.replicas):
            names.append(name)
    return names


def peers_text(config: Mapping[str, Any]) -> str:
    """docs/reference-behaviour.md §5.8: ``id:address;`` repeated."""
    return "".join(f"{p.node_id}:{p.api_address};" for p in parse_peers(config["controllerDLegerPeers"]))


Decision = Callable[[ControllerState, LivenessView], ControllerResult]


class ControllerService:
    """One controller node. Build it, ``await start()``, serve ``http_api``, ``await stop()``."""

    def __init__(self, config: Mapping[str, Any], *, clock: Clock | None = None) -> None:
        check_config(config)
        self.config: Mapping[str, Any] = dict(config)
        self.clock = clock or MonotonicClock()
        self.peers = parse_peers(config["controllerDLegerPeers"])
        self.node_id: str = config["controllerDLegerSelfId"]
        self.self_peer = next(p for p in self.peers if p.node_id == self.node_id)
        offset = config["controllerRaftPortOffset"]
        self._peer_by_raft = {p.raft_address(offset): p for p in self.peers}
        self.applier = ControllerApplier()
        self.heartbeats = HeartbeatTable()
        self.sessions = SessionRegistry(self)
        self.metrics = ControllerMetrics(self.node_view)
        max_timeout = config["controllerRaftMaxTimeoutMills"] / 1000
        self.log = ReplicatedLog(
            self.self_peer.raft_address(offset),
            [p.raft_address(offset) for p in self.peers if p is not self.self_peer],
            config["controllerStorePath"],
            self.applier,
            config["controllerRaftPassword"] or None,
            noop_record=self.applier.noop_record,
            durable=config["controllerJournalFsync"],
            raft_min_timeout=config["controllerRaftMinTimeoutMills"] / 1000,
            raft_max_timeout=max_timeout,
            connection_timeout=max(3.5, max_timeout),
        )
        self._locks: dict[str, list[Any]] = {}  # brokerName -> [Lock, users]
        self._electing: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._scans: list[asyncio.Task[None]] = []
        self._stopping = False
        self.history: HistoryRecorder | None = None
        self.console = ConsoleFeed()

    # ------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        # History (docs/architecture.md §5): every applied entry, journal replays included (re-inserts of a
        # known raftIndex are ignored), queued on the tick thread and written off it in batches.
        self.history = HistoryRecorder.in_store(self.config["controllerStorePath"])
        self.applier.add_observer(controller_observer(self.history, self.node_id))
        self.console.bind(asyncio.get_running_loop())
        self.applier.add_observer(self.console.on_applied)
        self.log.add_leadership_listener(lambda _change: self.console.notify())
        await self.log.start()
        self._scans = [
            asyncio.create_task(self._expiry_scan_loop(), name="heartbeat-expiry-scan"),
            asyncio.create_task(self._inactive_master_loop(), name="inactive-master-scan"),
        ]

    def begin_stop(self) -> None:
        """Stop deciding: no more scans or triggered elections (sessions closing is not a crash)."""
        self._stopping = True
        self.console.close()
        for task in [*self._scans, *self._tasks]:
            task.cancel()

    async def stop(self) -> None:
        self.begin_stop()
        for task in [*self._scans, *self._tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.sessions.close_all()
        await self.log.stop()
        if self.history is not None:
            await asyncio.to_thread(self.history.close, 5.0)

    def healthy(self) -> bool:
        return self.log.healthy()

    # ------------------------------------------------------------------------------ leadership

    def leader(self) -> tuple[str | None, str | None]:
        """(node id, API address) of the Raft leader as this node knows it."""
        raft = self.log.leader_address()
        peer = self._peer_by_raft.get(raft) if raft else None
        return (peer.node_id, peer.api_address) if peer else (None, None)

    def is_serving_leader(self) -> bool:
        return self.log.is_serving_leader()

    def _not_leader_reply(self, detail: str = "") -> Reply:
        node_id, address = self.leader()
        if node_id == self.node_id:  # elected but not serving: do not redirect clients to ourselves
            node_id = address = None
        remark = NOT_LEADER_REMARK + (f"; {detail}" if detail else "")
        return Reply(Code.CONTROLLER_NOT_LEADER, remark, {"leaderId": node_id, "leaderAddress": address})

    def _not_leader(self) -> Reply | None:
        return None if self.log.is_serving_leader() else self._not_leader_reply()

    def metadata(self) -> Reply:
        """docs/reference-behaviour.md §5.8, any node."""
        node_id, address = self.leader()
        payload = {
            "group": self.config["controllerDLegerGroup"],
            "leaderId": node_id,
            "leaderAddress": address,
            "isLeader": self.log.is_serving_leader(),
            "peers": peers_text(self.config),
            "selfId": self.node_id,
            "selfAddress": self.self_peer.api_address,
        }
        return Reply(Code.SUCCESS, "", payload)

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
            return ControllerResult.read(Reply(Code.SUCCESS, "", {"clusters": clusters}))

        return await self._read(decide)

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
        return await self._write(
            request.broker_name, lambda state, live: handle_alter_sync_state_set(state, request, live)
        )

    async def clean_broker_data(self, request: CleanBrokerDataRequest) -> Reply:
        return await self._write(
            request.broker_name, lambda state, live: handle_clean_broker_data(state, request, live)
        )

    async def elect_master(
        self, request: ElectMasterRequest, *, trigger: str | None = None, timeout: float = WRITE_TIMEOUT
    ) -> Reply:
        trigger = trigger or elect_trigger(request)
        policy = ElectionPolicy(self.config["enableElectUncleanMaster"])
        started = time.monotonic()
        reply = await self._write(
            request.broker_name,
            lambda state, live: handle_elect_master(state, request, live, policy),
            timeout,
        )
        if reply.code != Code.CONTROLLER_NOT_LEADER:
            self.metrics.observe_election(trigger, reply.code.name, time.monotonic() - started)
        if reply.ok and isinstance(payload := reply.payload, ElectMasterPayload):
            log.info(
                "%s election of %s: master %s, masterEpoch %s, syncStateSet %s",
                trigger,
                request.broker_name,
                payload.master_broker_id,
                payload.master_epoch,
                sorted(payload.sync_state_set or ()),
            )
            self._notify_role_change(request.broker_name, payload)
        return reply

    # ------------------------------------------------------------------ role-change pushes

    def _notify_role_change(self, broker_name: str, payload: ElectMasterPayload) -> None:
        """docs/reference-behaviour.md §7.4, to every member alive here that has a session on this node."""
        if not self.config["notifyBrokerRoleChanged"]:
            return
        members = payload.broker_member_group
        if not members:
            return
        message = RoleChangedMessage(
            type=ROLE_CHANGED,
            cluster_name=members.cluster,
            broker_name=broker_name,
            master_broker_id=payload.master_broker_id,
            master_address=payload.master_address,
            master_ha_address=payload.master_ha_address,
            master_epoch=payload.master_epoch,
            sync_state_set_epoch=payload.sync_state_set_epoch,
            sync_state_set=payload.sync_state_set,
        ).to_json()
        epoch = payload.master_epoch or 0
        now = self.clock.now_ms()
        for broker_id in members.broker_addrs:
            if self.heartbeats.is_alive(now, broker_name, broker_id):
                self.sessions.push((broker_name, broker_id), message, epoch)

    # ------------------------------------------------------------------ heartbeats, sessions

    def record_heartbeat(self, request: BrokerHeartbeatRequest, session: int | None = None) -> Reply:
        """docs/reference-behaviour.md §5.9, any node: soft state in this node's table only."""
        self.heartbeats.record(self.clock.now_ms(), request, session)
        return Reply(Code.SUCCESS, "Heart beat success")

    def on_session_closed(self, session: int) -> None:
        gone = self.heartbeats.remove_session(session)
        if self._stopping:
            return
        if gone:
            self.console.notify()
        for info in gone:
            self._on_broker_inactive(info.broker_name, info.broker_id, "its session closed")

    def max_message_bytes(self) -> int:
        return int(self.config["maxRequestBodyBytes"])

    def session_ping_seconds(self) -> float:
        return self.config["brokerSessionPingMills"] / 1000

    # ------------------------------------------------------------- controller-triggered elections

    def _on_broker_inactive(self, broker_name: str, broker_id: int, why: str) -> None:
        """docs/reference-behaviour.md §7.3: only the serving leader acts, and only for the current master."""
        group = self.applier.state.group(broker_name)
        is_master = group is not None and group.master_broker_id == broker_id
        if not is_master:
            log.debug("broker %s/%d inactive (%s); not the master", broker_name, broker_id, why)
            return
        if not self.log.is_serving_leader():
            log.info("master %s/%d inactive (%s); not the leader, not electing", broker_name, broker_id, why)
            return
        self.trigger_election(broker_name, f"master {broker_id} inactive: {why}")

    def trigger_election(self, broker_name: str, reason: str) -> bool:
        """Start a controller-triggered election of ``broker_name`` unless one is running."""
        if self._stopping or broker_name in self._electing or not self.log.is_serving_leader():
            return False
        self._electing.add(broker_name)
        task = asyncio.create_task(self._controller_elect(broker_name, reason))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _controller_elect(self, broker_name: str, reason: str) -> None:
        try:
            log.info("electing a new master for %s (%s)", broker_name, reason)
            attempts = max(1, int(self.config["electMasterMaxRetryCount"]))
            for attempt in range(1, attempts + 1):
                reply = await self.elect_master(
                    ElectMasterRequest(broker_name=broker_name),
                    trigger=TRIGGER_CONTROLLER,
                    timeout=CONTROLLER_ELECT_TIMEOUT,
                )
                if reply.code in _FINAL_ELECT_CODES:
                    if not reply.ok:
                        log.warning(
                            "controller election of %s: %s (%s)", broker_name, reply.code.name, reply.remark
                        )
                    return
                log.warning(
                    "controller election of %s, attempt %d/%d: %s (%s)",
                    broker_name,
                    attempt,
                    attempts,
                    reply.code.name,
                    reply.remark,
                )
                await asyncio.sleep(RETRY_PAUSE)
        except Exception:
            log.exception("controller election of %s failed", broker_name)
        finally:
            self._electing.discard(broker_name)

    def scan_expired(self) -> None:
        """docs/reference-behaviour.md §7.1 scan: drop expired heartbeats; an expired master is inactive."""
        for info in self.heartbeats.pop_expired(self.clock.now_ms()):
            log.info(
                "broker %s/%d (%s) missed its heartbeat timeout of %d ms",
                info.broker_name,
                info.broker_id,
                info.broker_addr,
                info.timeout_ms,
            )
            if isinstance(info.session, int):
                self._spawn(self.sessions.close_session(info.session, "heartbeat timeout"))
            self._on_broker_inactive(info.broker_name, info.broker_id, "heartbeat timeout")

    def scan_inactive_masters(self) -> None:
        """docs/reference-behaviour.md §3.4 (serving leader only)."""
        if not self.log.is_serving_leader():
            return
        view = self.heartbeats.view(self.clock.now_ms())
        for name in groups_needing_election(self.applier.state, view):
            self.trigger_election(name, "inactive-master scan: master not alive")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expiry_scan_loop(self) -> None:
        await asyncio.sleep(FIRST_EXPIRY_SCAN_DELAY)
        while not self._stopping:
            try:
                self.scan_expired()
            except Exception:
                log.exception("heartbeat expiry scan failed")
            await asyncio.sleep(self.config["scanNotActiveBrokerInterval"] / 1000)

    async def _inactive_master_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.config["scanInactiveMasterInterval"] / 1000)
            try:
                self.scan_inactive_masters()
            except Exception:
                log.exception("inactive-master scan failed")

    # ----------------------------------------------------------------------------- config, auth

    def check_admin_auth(self, authorization: str | None) -> tuple[int, Reply] | None:
        """None when allowed; else (HTTP status, reply): 401 without a token, 403 with a wrong one."""
        token = self.config["adminAuthToken"]
        if not token:
            return None
        if not authorization:
            return 401, Reply(Code.NO_PERMISSION, "this call needs 'Authorization: Bearer <adminAuthToken>'")
        scheme, _, given = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            return 403, Reply(Code.NO_PERMISSION, "wrong admin token")
        return None

    def get_config(self) -> Reply:
        shown = {
            key: (_MASK if key in SECRET_KEYS and value else value) for key, value in self.config.items()
        }
        return Reply(Code.SUCCESS, "", {"config": shown})

    def update_config(self, body: Any) -> Reply:
        """docs/reference-behaviour.md §5.11 with a JSON body ``{key: value}``; any node, this node only."""
        if not isinstance(body, dict):
            return Reply(Code.CONTROLLER_INVALID_REQUEST, "config update must be a JSON object of key: value")
        banned = sorted(key for key in body if key in blacklisted_keys(self.config))
        if banned:
            return Reply(Code.NO_PERMISSION, "Can not update config in black list.", {"keys": banned})
        updated = dict(self.config)
        for key, value in body.items():
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, int | str):
                text = str(value)
            else:
                return Reply(
                    Code.CONTROLLER_INVALID_REQUEST,
                    f"config key '{key}': expected a string, integer or boolean value",
                )
            try:
                updated[key] = CONTROLLER_CONFIG.coerce(key, text)
            except ConfigError as exc:
                return Reply(Code.CONTROLLER_INVALID_REQUEST, str(exc))
        try:
            check_config(updated)
            parse_peers(updated["controllerDLegerPeers"])
        except ConfigError as exc:
            return Reply(Code.CONTROLLER_INVALID_REQUEST, str(exc))
        if body:
            try:
                _write_private_file(updated["configStorePath"], render_properties(updated))
            except OSError as exc:
                return Reply(
                    Code.SYSTEM_ERROR, f"cannot persist the config to {updated['configStorePath']}: {exc}"
                )
            self.config = updated
            log.info("config updated: %s", ", ".join(sorted(body)))
        later = sorted(key for key in body if key not in LIVE_KEYS)
        remark = f"takes effect after a restart: {', '.join(later)}" if later else ""
        return Reply(Code.SUCCESS, remark)

    # ----------------------------------------------------------------------------- introspection

    def node_view(self) -> NodeView:
        raft: dict[str, Any] = {}
        with contextlib.suppress(ReplicationError):
            raft = self.log.status()
        state = self.applier.state
        now = self.clock.now_ms()
        return NodeView(
            is_leader=self.log.is_serving_leader(),
            raft_term=raft.get("term") or 0,
            commit_index=raft.get("commit_index") or 0,
            last_applied=raft.get("last_applied") or 0,
            live_brokers=sum(1 for info in self.heartbeats.entries() if info.is_alive(now)),
            sessions=len(self.sessions),
            groups=[
                GroupGauge(
                    name, len(group.sync_state_set), group.master_epoch, group.master_broker_id is not None
                )
                for name, group in sorted(state.groups.items())
            ],
        )

    def node_status(self) -> Reply:
        """Debug view of this node (any node): Raft status, the applied state, the heartbeat table."""
        raft: dict[str, Any] = {}
        with contextlib.suppress(ReplicationError):
            raft = self.log.status()
        now = self.clock.now_ms()
        payload = {
            "nodeId": self.node_id,
            "isLeader": self.log.is_serving_leader(),
            "raft": raft,
            "state": json.loads(encode_state(self.applier.state)),
            "heartbeats": [
                {
                    "brokerName": info.broker_name,
                    "brokerId": info.broker_id,
                    "brokerAddr": info.broker_addr,
                    "alive": info.is_alive(now),
                    "epoch": info.epoch,
                    "maxOffset": info.max_offset,
                    "session": info.session is not None,
                }
                for info in self.heartbeats.entries()
            ],
            "sessions": len(self.sessions),
        }
        return Reply(Code.SUCCESS, "", payload)

    # ----------------------------------------------------------------------------- web console

    def _serving_node(self) -> ServingNode:
        raft: dict[str, Any] = {}
        with contextlib.suppress(ReplicationError):
            raft = self.log.status()
        partners = raft.get("partners") or {}
        offset = self.config["controllerRaftPortOffset"]
        leader_id, leader_address = self.leader()
        return ServingNode(
            node_id=self.node_id,
            address=self.self_peer.api_address,
            is_serving_leader=self.log.is_serving_leader(),
            leader_id=leader_id,
            leader_address=leader_address,
            term=raft.get("term"),
            commit_index=raft.get("commit_index"),
            last_applied=raft.get("last_applied"),
            healthy=self.log.healthy(),
            peers=tuple(
                PeerView(p.node_id, p.api_address, partners.get(p.raft_address(offset), {}).get("connected"))
                for p in self.peers
            ),
        )

    def console_snapshot(self) -> dict[str, Any]:
        """The console's document (any node): replicated state, this node's liveness and Raft view."""
        view = self.heartbeats.view(self.clock.now_ms())
        return build_snapshot(self.applier.state, view, self._serving_node(), self.console.timeline())

    def console_analysis(self) -> Reply:
        """The violations page (any node): the verdict of the ``consoleAnalysisReportDir`` report."""
        report_dir = self.config["consoleAnalysisReportDir"]
        payload: dict[str, Any] = {"configured": bool(report_dir), "reportDir": report_dir or None}
        payload["report"] = payload["error"] = None
        if report_dir:
            path = Path(report_dir) / VERDICT_FILE
            try:
                payload["report"] = summarize_verdict(json.loads(path.read_text(encoding="utf-8")))
            except FileNotFoundError:
                payload["error"] = f"no {VERDICT_FILE} in {report_dir} (run mqha analyze --report-dir there)"
            except (OSError, ValueError) as exc:  # unreadable, not JSON, or not a verdict
                payload["error"] = f"cannot use {path}: {exc}"
        return Reply(Code.SUCCESS, "", payload)


def _write_private_file(path: str, text: str) -> None:
    """Atomically replace ``path`` (tmp + fsync + rename), readable by the owner only (holds secrets)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".controller-config-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
