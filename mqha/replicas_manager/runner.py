"""``ReplicasManager``: the runner loop around ``ReplicasPlanner`` (shell; docs/reference-behaviour.md §9,
docs/architecture.md §11 rule 6).

One task owns the planner. It waits for the next input (a controller reply, a push, a hook verdict,
an HA report) or for the planner's next timer, feeds it to the planner and executes the returned
actions in phase order (``actions.py``):

1. PERSIST -- identity file writes and deletes, awaited one by one in a worker thread (tiny files;
   the event loop never blocks on disk); their results come back as inputs;
2. SEND -- controller calls, heartbeats: each in its own task; replies come back as inputs;
3. APPLY -- broker hooks: ``set_fenced``, ``set_broker_controller_id``, ``apply_sync_state_set``
   and ``maybe_shrink_sync_state_set`` are called at once; ``change_to_master`` /
   ``change_to_slave`` run in a task (the planner keeps at most one in flight) and their verdict
   comes back as an input.

Everything that touches the planner runs on that one task, so the planner needs no locks; other
code only puts callables on its queue. Before each ``tick`` the loop reads ``hooks.progress()`` for
the heartbeats.

Fencing: the broker is fenced from ``start`` until the planner reaches RUNNING (docs/reference-behaviour.md
§9.2) and again at ``stop``. Nothing else fences it: a controller outage after RUNNING only makes calls fail,
and puts and replication go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from mqha.clock import Clock, MonotonicClock, wall_ms
from mqha.codes import ResponseCode
from mqha.errors import MqhaError, RemoteProtocolError
from mqha.replicas_manager import actions as act
from mqha.replicas_manager import identity as identity_files
from mqha.replicas_manager.client import ControllerClient, parse_addresses, request_signer
from mqha.replicas_manager.hooks import BrokerHooks, BrokerStart, SyncStateSetReporter
from mqha.replicas_manager.planner import ReplicasPlanner
from mqha.replicas_manager.planner_states import PlannerConfig, State
from mqha.replicas_manager.status import ReplicasStatus
from mqha.security.tls import client_context
from mqha.wire.controller_api import Reply

log = logging.getLogger(__name__)

MAX_IDLE_S = 1.0  # the loop wakes at least this often even without timers

Input = Callable[[int], list[act.Action]]


class ReplicasManager(SyncStateSetReporter):
    """Runs the broker's controller agent: executes the planner's actions and feeds their results back.

    ``await start()`` (raises ``StorageError`` on an identity file of another cluster/broker), then it
    runs by itself until ``await stop()``.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        hooks: BrokerHooks,
        *,
        clock: Clock | None = None,
        seed: int | None = None,
        start: BrokerStart | None = None,
        on_give_up: Callable[[act.GiveUpBrokerId], None] | None = None,
    ) -> None:
        """``start``: how this broker process started (docs/architecture.md §3.2), reported on register
        and heartbeats. ``on_give_up``: called once another live process holds this broker's id (the
        broker stops its process; the planner has fenced it)."""
        self.hooks = hooks
        self._clock = clock or MonotonicClock()
        self._planner_config = replace(PlannerConfig.from_broker_config(config), start=start)
        self.planner = ReplicasPlanner(self._planner_config, seed=seed)
        self._identity_path: str = config["storePathBrokerIdentity"]
        self._store_id_path = identity_files.store_id_path(config["storePathRootDir"])
        self.client = ControllerClient(
            parse_addresses(config["controllerAddr"]),
            on_push=self._on_push,
            heartbeat_timeout_s=config["sendHeartbeatTimeoutMillis"] / 1000,
            signer=request_signer(config),
            ssl=client_context(config),
        )
        self.client.heartbeats.on_refused = self._on_heartbeat_refused
        self._on_give_up = on_give_up
        self.status = ReplicasStatus(self.planner, self.client)
        """What the agent knows now, read-only (``/v1/status``, metrics, tests)."""
        self._queue: asyncio.Queue[Input] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._running = asyncio.Event()
        self._started = False
        self._stopped = False

    # ------------------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the identity files, open the controller sessions and start the loop (non-blocking:
        registration goes on in the background; ``wait_running`` waits for it)."""
        if self._started:
            return
        identity, temp = await asyncio.to_thread(self._load_identity)
        self._started = True
        self.planner.on_identity_loaded(identity, temp)
        await self.client.start()
        await self._execute(self.planner.start(self._now()))
        self._loop_task = asyncio.create_task(self._run(), name="replicas-manager")

    def _load_identity(self) -> tuple[act.BrokerIdentity | None, act.TempBrokerIdentity | None]:
        """The store id (made on a new store) and the identity files checked against it (blocking;
        ``StorageError`` on a damaged file or one of another store, docs/architecture.md §9.4)."""
        store_id = identity_files.ensure_store_id(self._store_id_path)
        self._planner_config = cfg = replace(self._planner_config, store_id=store_id)
        self.planner.config = cfg
        path = self._identity_path
        identity, temp = identity_files.load(path, cfg.cluster_name, cfg.broker_name, store_id)
        if identity is not None and identity.store_id is None:  # an older broker's file
            identity = identity_files.bind_to_store(path, identity, store_id)
        return identity, temp

    async def stop(self) -> None:
        """Stop deciding, fence the broker, close the sessions (the controller notices at once)."""
        if self._stopped:
            return
        self._stopped = True
        if self._started:
            for action in self.planner.shutdown(self._now()):
                self._apply_now(action)
        tasks = [t for t in (self._loop_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._started:
            await self.client.close()

    async def wait_running(self, timeout: float) -> bool:
        """True once the broker reached RUNNING (within ``timeout`` seconds)."""
        try:
            await asyncio.wait_for(self._running.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # ------------------------------------------------------------------ SyncStateSetReporter

    def report_sync_state_set(self, proposed: frozenset[int]) -> None:
        proposal = frozenset(proposed)
        incarnations = self._slave_incarnations()
        self._put(lambda now: self.planner.on_sync_state_set_proposal(proposal, now, incarnations))

    def report_now(self) -> None:
        """This replica's log stopped growing from its master (the HA link closed): heartbeat at once, so
        an election by count does not wait a heartbeat interval for this report (docs/architecture.md
        §3.2)."""
        self._put(self.planner.on_master_link_closed)

    def report_damage(self) -> None:
        """A damaged record was found or repaired: heartbeat at once (docs/architecture.md §4.7)."""
        self._put(self.planner.on_damage_changed)

    def release_eligible_replicas(self, master_epoch: int) -> None:
        """The HA layer acknowledges beyond the eligible replicas' credits next: release them first;
        the verdict comes back through ``hooks.eligible_release_done``."""
        self._put(lambda now: self.planner.on_release_eligible_request(master_epoch, now))

    def _slave_incarnations(self) -> dict[int, str] | None:
        """The HA layer's live slave connections by incarnation, or None when it cannot tell (an older
        HA layer, or none)."""
        read = getattr(self.hooks, "slave_incarnations", None)
        if read is None:
            return None
        try:
            found = read()
        except Exception:
            log.exception("slave_incarnations failed")
            return None
        return None if found is None else dict(found)

    # ------------------------------------------------------------------------------ the loop

    def _now(self) -> int:
        return self._clock.now_ms()

    def _put(self, item: Input) -> None:
        if self._started and not self._stopped:
            self._queue.put_nowait(item)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self) -> None:
        while True:
            try:
                self._refresh_progress()
                now = self._now()
                await self._execute(self.planner.tick(now))
                wake = self.planner.next_wakeup_ms()
                timeout = MAX_IDLE_S if wake is None else min(MAX_IDLE_S, max(0.0, (wake - now) / 1000))
                if not self._queue.empty():
                    # Taken before waiting: ``wait_for`` with a zero timeout cancels its ``get`` before it
                    # runs, so a queued input would never be taken while a timer is due.
                    item = self._queue.get_nowait()
                else:
                    try:
                        item = await asyncio.wait_for(self._queue.get(), timeout)
                    except TimeoutError:
                        continue
                self._refresh_progress()  # an input may propose (a SyncStateSet with the confirm offset)
                await self._execute(item(self._now()))
                while not self._queue.empty():
                    await self._execute(self._queue.get_nowait()(self._now()))
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug must not kill the agent silently; the next input or timer goes on.
                log.exception("ReplicasManager loop step failed")
                await asyncio.sleep(0.1)

    def _refresh_progress(self) -> None:
        with contextlib.suppress(Exception):
            self.planner.on_local_progress(self.hooks.progress())

    async def _execute(self, actions: list[act.Action]) -> None:
        for action in act.in_phase_order(actions):
            match action:
                case _ if action.phase is act.Phase.PERSIST:  # identity files
                    await self._persist(action)
                case act.ControllerCall():
                    self._spawn(self._call(action))
                case act.SendHeartbeat():
                    self._spawn(self._heartbeat(action))
                case act.BecomeMaster() | act.BecomeSlave():
                    self._spawn(self._role_change(action))
                case _:
                    self._apply_now(action)
        if self.planner.state is State.RUNNING:
            self._running.set()

    # -- PERSIST

    async def _persist(self, action: act.Action) -> None:
        path = self._identity_path
        cfg = self._planner_config
        match action:
            case act.WriteTempIdentity(broker_id=broker_id):
                check_code = identity_files.register_check_code(cfg.broker_address, wall_ms(), cfg.store_id)
                temp = act.TempBrokerIdentity(cfg.cluster_name, cfg.broker_name, broker_id, check_code)
                written: act.TempBrokerIdentity | None = temp
                try:
                    await asyncio.to_thread(identity_files.write_temp_identity, path, temp)
                except (OSError, MqhaError) as exc:
                    log.error("cannot write %s: %s", identity_files.temp_path(path), exc)
                    written = None
                self._put(lambda now: self.planner.on_temp_identity_written(action, written, now))
            case act.WriteIdentity(identity=record):
                ok = True
                try:
                    await asyncio.to_thread(identity_files.write_identity, path, record)
                except (OSError, MqhaError) as exc:
                    log.error("cannot write %s: %s", path, exc)
                    ok = False
                self._put(lambda now: self.planner.on_identity_written(action, ok, now))
            case act.DeleteTempIdentity() | act.DeleteIdentity():
                target = (
                    identity_files.temp_path(path) if isinstance(action, act.DeleteTempIdentity) else path
                )
                try:
                    await asyncio.to_thread(identity_files.delete, target)
                except OSError as exc:
                    log.error("cannot delete %s: %s", target, exc)

    # -- SEND

    async def _call(self, call: act.ControllerCall) -> None:
        try:
            reply = await self._send(call)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("controller call %s failed", call.kind)
            reply = None
        self._put(lambda now: self.planner.on_controller_reply(call, reply, now))

    async def _send(self, call: act.ControllerCall) -> Reply | None:
        client = self.client
        group = "/v1/groups/" + quote(self._planner_config.broker_name, safe="")
        match call:
            case act.GetMetadata():
                leader = await client.discover_leader()
                return Reply(ResponseCode.SUCCESS, "", {"leaderAddress": leader}) if leader else None
            case act.GetNextBrokerId(request=request):
                return await client.call("GET", "/v1/brokers/next-id", params=request.to_json())
            case act.ApplyBrokerId(request=request):
                return await client.call("POST", "/v1/brokers/apply-id", body=request.to_json())
            case act.RegisterBroker(request=request):
                return await client.call("POST", "/v1/brokers/register", body=request.to_json())
            case act.GetReplicaInfo():
                return await client.call("GET", group + "/replica-info")
            case act.ElectMaster(request=request):
                return await client.call("POST", group + "/elect", body=request.to_json())
            case act.ProposeSyncStateSet(request=request) | act.ReleaseEligibleReplicas(request=request):
                return await client.call("POST", group + "/sync-state-set", body=request.to_json())
        raise TypeError(f"unknown controller call {call!r}")

    async def _heartbeat(self, action: act.SendHeartbeat) -> None:
        body = action.request.to_json()
        if not action.confirm:
            await self.client.heartbeats.send_heartbeat(body)
            return
        delivered = 0
        try:
            delivered = await self.client.heartbeats.post_heartbeat_all(body)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("start heartbeat failed")
        self._put(lambda now: self.planner.on_heartbeat_sent(action, delivered, now))

    def _on_push(self, address: str, message: Mapping[str, Any]) -> None:
        try:
            note = act.RoleNotification.from_json(message)
        except RemoteProtocolError as exc:
            log.warning("malformed roleChanged push from %s: %s", address, exc)
            return
        log.info(
            "roleChanged from %s: master %s at masterEpoch %s",
            address,
            note.master_broker_id,
            note.master_epoch,
        )
        self._put(lambda now: self.planner.on_role_notification(note, now))

    def _on_heartbeat_refused(self, address: str, remark: str) -> None:
        self._put(lambda now: self.planner.on_heartbeat_refused(address, remark, now))

    # -- APPLY

    def _apply_now(self, action: act.Action) -> None:
        hooks = self.hooks
        match action:
            case act.SetFenced(fenced=fenced):
                hooks.set_fenced(fenced)
            case act.StopFollowing(epoch=epoch):
                hooks.stop_following(epoch)
            case act.SetBrokerControllerId(broker_id=broker_id):
                hooks.set_broker_controller_id(broker_id)
            case act.ApplySyncStateSet(sync_state_set=sss, sync_state_set_epoch=epoch):
                hooks.apply_sync_state_set(sss, epoch)
            case act.EligibleReleaseDone(master_epoch=epoch, sync_state_set_epoch=sss_epoch, ok=ok):
                done = getattr(hooks, "eligible_release_done", None)  # hooks without an HA layer: none
                if done is not None:
                    done(epoch, sss_epoch, ok)
            case act.GiveUpBrokerId(remark=remark):
                log.error("broker id %s is held by another live process: %s", action.broker_id, remark)
                if self._on_give_up is not None:
                    self._on_give_up(action)
            case act.CheckSyncStateSet():
                try:
                    wanted = frozenset(hooks.maybe_shrink_sync_state_set())
                except Exception:
                    log.exception("maybe_shrink_sync_state_set failed")
                    wanted = frozenset()
                incarnations = self._slave_incarnations()
                self._put(lambda now: self.planner.on_sync_state_set_check(wanted, now, incarnations))
            case _:
                raise TypeError(f"no executor for {action!r}")

    async def _role_change(self, action: act.RoleChange) -> None:
        accepted = False
        try:
            match action:
                case act.BecomeMaster(epoch=epoch, sync_state_set_epoch=sss_epoch, sync_state_set=sss):
                    accepted = await self.hooks.change_to_master(epoch, sss_epoch, sss)
                case act.BecomeSlave(master=master, epoch=epoch):
                    accepted = await self.hooks.change_to_slave(master, epoch)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%r failed in the broker", action)
        verdict = bool(accepted)
        self._put(lambda now: self.planner.on_role_change_result(action, verdict, now))
