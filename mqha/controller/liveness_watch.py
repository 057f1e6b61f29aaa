"""Broker liveness on this node and the elections it triggers (shell; docs/reference-behaviour.md §7).

Liveness is soft state: every node records the heartbeats it receives (HTTP or session) in its own
``HeartbeatTable``, never in the log. What this node sees -- a heartbeat, a closed session, an expired
entry (every node; first after 2 s, then every ``scanNotActiveBrokerInterval``), the inactive-master scan
(leader; every ``scanInactiveMasterInterval``) -- is reduced to an event, and the election core's
``TRANSITIONS`` table says whether to elect (``mqha.controller.election.needs_election``,
docs/architecture.md §3.2). Only the serving leader elects, with up to ``electMasterMaxRetryCount``
attempts of <= 3 s each (docs/reference-behaviour.md §7.3).

Retries stop at the first definitive answer (SUCCESS, 2004 no candidate, 2011 master alive, 2010 set
gone, 2007 not leader); only fenced, timed-out or failed attempts are retried, after 100 ms. (The
reference retries any failure, which for "no candidate" bumps masterEpoch once per attempt.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mqha.clock import wall_ms
from mqha.codes import ResponseCode
from mqha.controller.broker_claims import Claim, handle_claim
from mqha.controller.election import (
    Then,
    gone_event,
    heartbeat_event,
    is_new_process,
    needs_election,
    scan_event,
    set_state,
)
from mqha.controller.liveness import BrokerLiveInfo, LiveKey
from mqha.controller.parts import NodePart, NodeParts
from mqha.controller.write_path import TRIGGER_CONTROLLER
from mqha.history.schema import BROKER_STARTS
from mqha.wire.controller_api import BrokerHeartbeatRequest, ElectMasterRequest, Reply

log = logging.getLogger(__name__)

Code = ResponseCode

# docs/reference-behaviour.md §7.3: each controller-triggered attempt awaited <= 3 s
CONTROLLER_ELECT_TIMEOUT = 3.0
FIRST_EXPIRY_SCAN_DELAY = 2.0  # docs/reference-behaviour.md §7.1
RETRY_PAUSE = 0.1

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

ElectMaster = Callable[..., Awaitable[Reply]]  # WritePath.elect_master


class LivenessWatch(NodePart):
    """Watches broker liveness (heartbeats, sessions, scans) and triggers the elections it calls for."""

    def __init__(self, parts: NodeParts, elect_master: ElectMaster) -> None:
        super().__init__(parts)
        self.elect_master = elect_master
        self._electing: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._scans: list[asyncio.Task[None]] = []
        self._stopping = False

    def start_scans(self) -> None:
        """Start the heartbeat-expiry and inactive-master scans (on the running loop)."""
        self._scans = [
            asyncio.create_task(self._expiry_scan_loop(), name="heartbeat-expiry-scan"),
            asyncio.create_task(self._inactive_master_loop(), name="inactive-master-scan"),
        ]

    def begin_stop(self) -> None:
        """Stop deciding: no more scans or triggered elections (sessions closing is not a crash)."""
        self._stopping = True
        for task in [*self._scans, *self._tasks]:
            task.cancel()

    async def wait_stopped(self) -> None:
        """Wait for the cancelled scans and elections to finish."""
        for task in [*self._scans, *self._tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------------ heartbeats, sessions

    def record_heartbeat(self, request: BrokerHeartbeatRequest, session: int | None = None) -> Reply:
        """docs/reference-behaviour.md §5.9, any node: soft state in this node's table only."""
        name, broker_id = request.broker_name, request.broker_id
        assert broker_id is not None  # the request refuses a heartbeat without one
        group = self.applier.state.group(name)
        master_epoch = -1 if group is None else group.master_epoch
        now = self.clock.now_ms()
        before = self.heartbeats.info(name, broker_id)
        refusal = handle_claim(before, Claim(name, broker_id, request.broker_addr, request.incarnation), now)
        if refusal is not None:
            # A clone's refusal is loud; a restart racing its old session's close is routine.
            (log.warning if refusal.code is Code.CONTROLLER_BROKER_ID_INVALID else log.debug)(
                "heartbeat refused: %s", refusal.remark
            )
            return refusal
        is_master = group is not None and group.master_broker_id == broker_id
        info = self.heartbeats.record(now, request, session, master_epoch, from_master=is_master)
        if is_master:
            self.heartbeats.note_master_confirm(name, master_epoch, info.confirm_offset)
        if is_new_process(before, info):
            self._on_new_incarnation(info)
        wait = self.waits.get(name)
        event = heartbeat_event(before, info, now, is_master=is_master, wait=wait)
        self._act(name, broker_id, needs_election(set_state(group, wait), event))
        return Reply(Code.SUCCESS, "Heart beat success")

    def _on_new_incarnation(self, info: BrokerLiveInfo) -> None:
        """A broker process this node has not heard before: record how it started (docs/architecture.md
        §3.2, §5)."""
        if info.lossy:
            log.warning(
                "broker %s/%d (%s) restarted LOSSY (incarnation %s): its confirm offset before recovery "
                "%d is beyond its log end %d",
                info.broker_name,
                info.broker_id,
                info.broker_addr,
                info.incarnation,
                info.confirm_offset_before_recovery,
                info.max_offset,
            )
        if self.parts.history is not None:
            self.parts.history.record(
                BROKER_STARTS,
                {
                    "node": self.node_id,
                    "ts": wall_ms(),
                    "clusterName": info.cluster_name,
                    "brokerName": info.broker_name,
                    "brokerId": info.broker_id,
                    "brokerAddr": info.broker_addr,
                    "incarnation": info.incarnation,
                    "cleanShutdown": info.clean_shutdown,
                    "lossyRecovery": info.lossy_recovery,
                    "confirmOffsetBeforeRecovery": info.confirm_offset_before_recovery,
                    "maxOffset": info.max_offset,
                },
            )

    def _act(self, name: str, broker_id: int | None, then: Then, why: str = "") -> None:
        """Carry out what the election core's ``TRANSITIONS`` say follows (serving leader only)."""
        if then is Then.FORGET_WAIT:
            self.waits.clear(name)
        elif then.elects:
            if self._stopping or not self.log.is_serving_leader():
                # Said once per lost master; heartbeats that would trigger one are routine.
                (log.info if then is Then.ELECT_MASTER_INACTIVE else log.debug)(
                    "%s: %s; not the serving leader, not electing", name, then.reason(broker_id, why)
                )
                return
            self.trigger_election(name, then.reason(broker_id, why))

    def on_session_closed(self, session: int, moved: Mapping[LiveKey, int] | None = None) -> None:
        """``moved``: the entries another open session of the same process carries on (not gone)."""
        gone = self.heartbeats.remove_session(session, moved)
        if self._stopping:
            return
        if gone:
            self.console.notify()
        for info in gone:
            self._on_broker_inactive(info.broker_name, info.broker_id, "its session closed")

    # ------------------------------------------------------------- controller-triggered elections

    def _on_broker_inactive(self, broker_name: str, broker_id: int, why: str) -> None:
        """docs/reference-behaviour.md §7.3: only the serving leader acts, and only for the current master."""
        group = self.applier.state.group(broker_name)
        event = gone_event(group, broker_id)
        log.debug("broker %s/%d inactive (%s): %s", broker_name, broker_id, why, event.value)
        self._act(
            broker_name, broker_id, needs_election(set_state(group, self.waits.get(broker_name)), event), why
        )

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
            was_waiting = self.waits.get(broker_name) is not None
            # A waiting set is re-evaluated every scan: its wait was logged once (write_path).
            (log.debug if was_waiting else log.info)("electing a new master for %s (%s)", broker_name, reason)
            attempts = max(1, int(self.config["electMasterMaxRetryCount"]))
            for attempt in range(1, attempts + 1):
                reply = await self.elect_master(
                    ElectMasterRequest(broker_name=broker_name),
                    trigger=TRIGGER_CONTROLLER,
                    timeout=CONTROLLER_ELECT_TIMEOUT,
                )
                if reply.code in _FINAL_ELECT_CODES:
                    still_waiting = was_waiting and self.waits.get(broker_name) is not None
                    if not reply.ok:
                        # A set that keeps waiting is re-evaluated every scan: said once (write_path).
                        (log.debug if still_waiting else log.warning)(
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
        """docs/reference-behaviour.md §3.4 (serving leader only), and the sets that wait for a complete
        replica (docs/architecture.md §3.2): their wait may have timed out."""
        if not self.log.is_serving_leader():
            return
        view = self.heartbeats.view(self.clock.now_ms())
        state = self.applier.state
        for name in sorted({*state.groups, *self.waits.waiting()}):
            group = state.group(name)
            then = needs_election(set_state(group, self.waits.get(name)), scan_event(group, view))
            self._act(name, None, then)

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
