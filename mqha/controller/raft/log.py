"""The controller's replicated log: the asyncio face of one PySyncObj (0.3.17) member, generic over an
:class:`~mqha.controller.raft.node.Applier`.

Shell, not core: it owns a socket, a thread and files, and makes no controller decisions. Facts and
pitfalls referred to as P1..P23 are in ``docs/raft.md`` §4; the PySyncObj subclasses it builds are in
``node.py``, ``journal.py`` and ``transport.py`` of this package.

Threads
    PySyncObj runs Raft on its own *tick thread* (``autoTick``). Committed entries are applied there,
    through the ONE replicated method :meth:`RecordConsumer.apply_record`, which takes our own record
    bytes (so the journal holds our encoding and PySyncObj's method ids never shift, P10) and hands them
    to ``applier.apply(data, raft_index)``. Everything the asyncio side learns from the tick thread
    (results, role changes) is posted with ``loop.call_soon_threadsafe``; the tick thread never touches a
    loop object. Every hook that runs on the tick thread is wrapped so it cannot raise (P3, P4).
    The ``SyncObj`` is built in :meth:`ReplicatedLog.start`, which must run in the main thread (P12).

Proposals
    :meth:`ReplicatedLog.propose` proposes only on the Raft leader; anywhere else it raises
    :class:`NotLeaderError` with the leader's Raft address, and the caller routes the write (we do not
    rely on PySyncObj's follower forwarding). A write that races a leadership change can still be
    forwarded by PySyncObj; records are compare-and-set on epochs, so that is safe. The errors are
    those of ``errors.py``.

Serving
    :meth:`ReplicatedLog.is_serving_leader` holds only for the leader whose barrier (``noop_record``)
    applied in the current term and whose quorum-confirmed lease is valid: enough *voters* to form a
    majority with us acked within ``lease_timeout``, on PySyncObj's clock ``CLOCK_MONOTONIC_RAW``
    (compare only with :func:`raft_clock`). The lease bounds how long an isolated leader serves; it is
    not exclusive (no PreVote): safety comes from majority commit and epoch compare-and-set in apply
    (docs/raft.md §2.4, §3). Role changes reach listeners on the loop (``LEADER``, ``SERVING``,
    ``FOLLOWER``/``CANDIDATE``); a lease lapse is not an event: poll ``is_serving_leader()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pysyncobj import FAIL_REASON
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.monotonic import monotonic as raft_clock  # CLOCK_MONOTONIC_RAW, not time.monotonic

from mqha.controller.raft import cipher, decoding
from mqha.controller.raft.addresses import store_paths
from mqha.controller.raft.errors import (
    ApplyError,
    ApplyFailure,
    NotLeaderError,
    ProposalFailed,
    ProposalTimeout,
    RaftStartError,
    ReplicationError,
    failure_for,
)
from mqha.controller.raft.journal import CompactionSafeJournal, DurableFileJournal, durable_dumps_installed
from mqha.controller.raft.members import StoreNode
from mqha.controller.raft.node import (
    CANDIDATE,
    LEADER,
    STATE_NAMES,
    Applier,
    PipelinedSyncObj,
    RecordConsumer,
)
from mqha.controller.raft.tuning import (
    DNS_CACHE_SECONDS,
    DNS_FAIL_CACHE_SECONDS,
    RaftTuning,
    build_conf,
    quorum_ack_age,
)
from mqha.controller.raft.voter_set import VoterSet

log = logging.getLogger(__name__)


class Role(enum.Enum):
    """This member's role as the loop sees it: PySyncObj's three states, with LEADER split by the barrier."""

    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"  # elected; barrier not yet applied
    SERVING = "serving"  # leader whose barrier applied in this term


@dataclass(frozen=True)
class LeadershipChange:
    """A role change of this Raft member, delivered on the event loop.

    ``term`` is PySyncObj's term when the change happened; for CANDIDATE that is the term being left
    (PySyncObj bumps it right after).
    """

    role: Role
    term: int
    leader_address: str | None


class ReplicatedLog(VoterSet):
    """The asyncio face of one Raft member. Build it and call :meth:`start` in the main thread."""

    def __init__(
        self,
        self_address: str,
        partner_addresses: list[str],
        store_dir: str,
        applier: Applier,
        password: str | None = None,
        *,
        noop_record: bytes = b"",
        durable: bool = True,
        tuning: RaftTuning | None = None,
        storage_id: str | None = None,
        observer: bool = False,
        **tuning_overrides: Any,
    ) -> None:
        """``self_address``/``partner_addresses`` are Raft ``host:port`` strings spelled identically on
        every member. ``noop_record`` is what the applier receives as the leader's barrier.
        ``tuning_overrides`` replace single :class:`RaftTuning` fields (``raft_min_timeout=0.3``).

        With ``storage_id`` members are raftIds (docs/raft.md §10): ``partner_addresses`` are the
        other voters' raftIds and the voter set changes online; an ``observer`` never votes."""
        self._self_address = self_address
        self._storage_id = storage_id
        self._self_id = f"{self_address}/{storage_id}" if storage_id else self_address
        self._observer = observer and storage_id is not None
        self._partners = [p for p in partner_addresses if p not in (self_address, self._self_id)]
        self._store_dir = store_dir
        self._applier = applier
        self._password = password
        self._noop_record = noop_record
        self._durable = durable
        self._tuning = dataclasses.replace(tuning or RaftTuning(), **tuning_overrides).validate()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync: PipelinedSyncObj | None = None
        self._consumer = RecordConsumer(applier)
        self._pending: set[asyncio.Future[object]] = set()
        self._listeners: list[Callable[[LeadershipChange], None]] = []
        self._serving_term: int | None = None
        self._barrier_task: asyncio.Task[None] | None = None
        self._digest_task: asyncio.Task[None] | None = None
        self._ready = False
        self._stopped = False
        super().__init__()

    # -- lifecycle

    async def start(self) -> None:
        if self._sync is not None or self._stopped:
            raise RuntimeError("ReplicatedLog.start() called twice")
        if threading.current_thread() is not threading.main_thread():
            # PySyncObj's tick thread exits with the thread that built it (P12).
            raise RuntimeError("ReplicatedLog must be started from the main thread")
        self._loop = asyncio.get_running_loop()
        os.makedirs(self._store_dir, mode=0o700, exist_ok=True)
        # PySyncObj caches peer DNS answers for 600 s; a peer pod that comes back with a new IP
        # (Kubernetes) would stay unreachable that long. Re-resolve within seconds instead.
        globalDnsResolver().setTimeouts(DNS_CACHE_SECONDS, DNS_FAIL_CACHE_SECONDS)
        conf = build_conf(
            self._self_address,
            self._store_dir,
            self._tuning,
            password=self._password,
            on_state_changed=self._on_state_changed_tick,
            on_ready=self._on_ready_tick,
            dynamic_membership=self._storage_id is not None,
        )
        journal_class = DurableFileJournal if self._durable else CompactionSafeJournal
        journal = journal_class(*store_paths(self._store_dir))
        identity: dict[str, Any] = {}
        if self._storage_id is not None:
            identity = {"node_class": StoreNode, "observer_id": self._self_id if self._observer else None}
        sync = PipelinedSyncObj(
            None if self._observer else self._self_id,
            self._partners,
            conf,
            self._consumer,
            journal=journal,
            max_pending_connections=self._tuning.max_pending_connections,
            **identity,
        )
        self._sync = sync
        sync.addOnTickCallback(self._run_tick_calls)
        if not sync.uses(journal) or (self._durable and not durable_dumps_installed()):
            await self._destroy_sync()
            raise RaftStartError("pysyncobj internals changed: our journal not installed (pin 0.3.17)")
        if not decoding.installed():
            await self._destroy_sync()
            raise RaftStartError(
                "pysyncobj internals changed: restricted decoding not installed (pin 0.3.17)"
            )
        if self._password and not isinstance(sync.encryptor, cipher.RaftCipher):
            await self._destroy_sync()
            raise RaftStartError("pysyncobj internals changed: the Raft cipher is not installed (pin 0.3.17)")
        if not self._password:
            log.warning(
                "Raft traffic is unauthenticated and unencrypted: anyone who can reach the Raft port %s "
                "can impersonate a member and write to the replicated log; set controllerRaftPassword "
                "(the same on every controller)",
                self._self_address,
            )
        try:
            if not self._observer:  # a read-only member binds nothing (and waitBinded would never return)
                await self._loop.run_in_executor(None, sync.waitBinded)
        except Exception as exc:
            await self._destroy_sync()
            raise RaftStartError(f"cannot bind the Raft port {self._self_address}: {exc!r}") from exc
        log.info(
            "raft member %s started as %s (partners %s, store %s, durable=%s)",
            self._self_id,
            "an observer" if self._observer else "a voter",
            ",".join(self._partners),
            self._store_dir,
            self._durable,
        )

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop the member; pending proposals fail with an unknown outcome."""
        self._stopped = True
        self._serving_term = None
        for task in self._take_tasks():
            with contextlib.suppress(asyncio.CancelledError, ReplicationError):
                await task
        await self._destroy_sync(timeout)
        for fut in list(self._pending):
            if not fut.done():
                fut.set_exception(ProposalFailed("the replicated log stopped", outcome_unknown=True))
        self._pending.clear()

    async def _destroy_sync(self, timeout: float = 5.0) -> None:
        sync = self._sync
        if sync is None:
            return
        sync.destroy()  # the tick thread closes sockets and the journal on its next tick
        deadline = time.monotonic() + timeout
        while sync.tick_thread_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if sync.tick_thread_alive():
            log.warning("raft tick thread still running %.1f s after destroy()", timeout)

    async def __aenter__(self) -> ReplicatedLog:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- proposals

    async def propose(self, data: bytes, timeout: float) -> object:
        """Replicate ``data`` and return what ``applier.apply`` returned for it on THIS node.

        Only on the leader (else :class:`NotLeaderError`). Does not wait for the barrier: callers
        that decide from state check :meth:`is_serving_leader` first. PySyncObj completes a proposal
        right after applying it and just before bumping ``last_applied``, so ``status()`` may lag by
        one entry for an instant.
        """
        sync = self._require_started()
        if not sync._isLeader():
            raise NotLeaderError(self.leader_address())
        return await self._submit(data, timeout)

    async def _submit(self, data: bytes, timeout: float) -> object:
        return await self._submit_with(
            lambda callback: self._consumer.apply_record(data, callback=callback), timeout
        )

    async def _submit_with(
        self, enqueue: Callable[[Callable[[object, int], None]], object], timeout: float
    ) -> object:
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[object] = loop.create_future()
        self._pending.add(fut)

        def on_done(result: object, error: int) -> None:
            # Tick thread. If this raised, PySyncObj would apply the entry again here (P4): never raise.
            with contextlib.suppress(Exception):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(self._resolve, fut, result, error)

        try:
            enqueue(on_done)
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise ProposalTimeout(timeout) from None
        finally:
            self._pending.discard(fut)

    def _resolve(self, fut: asyncio.Future[object], result: object, error: int) -> None:
        if fut.done():  # timed out or stopped meanwhile
            return
        if error != FAIL_REASON.SUCCESS:
            fut.set_exception(failure_for(error, self.leader_address()))
        elif isinstance(result, ApplyFailure):
            fut.set_exception(ApplyError(result))
        else:
            fut.set_result(result)

    # -- leadership

    def is_leader(self) -> bool:
        return self._sync is not None and self._sync._isLeader()

    def leader_address(self) -> str | None:
        """The Raft address of the last known leader (this node's own when leader), or None."""
        if self._sync is None:
            return None
        node = self._sync._getLeader()
        return None if node is None else str(node)

    def is_serving_leader(self) -> bool:
        sync = self._sync
        if sync is None or not sync._isLeader() or self.damage() is not None:
            return False
        if self._serving_term is None or self._serving_term != sync.raftCurrentTerm:
            return False
        age = self._quorum_ack_age()
        return age is not None and age < self._tuning.effective_lease_timeout

    async def wait_serving(self, timeout: float) -> bool:
        """True once this node is the serving leader; False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_serving_leader():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(0.01, remaining))
        return True

    def add_leadership_listener(self, listener: Callable[[LeadershipChange], None]) -> Callable[[], None]:
        """Call ``listener`` on the loop at each role change; returns an unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _quorum_ack_age(self) -> float | None:
        sync = self._sync
        assert sync is not None
        try:
            # Written by the tick thread; copies of a dict and a set run without releasing the GIL.
            times = dict(sync.last_response_times())
            voters = sync.otherNodes
        except RuntimeError:  # resized mid-copy (a fresh election, a membership change): no lease
            return None
        acks = [t for node, t in times.items() if node in voters]  # observers never count
        return quorum_ack_age(acks, len(voters), raft_clock())

    def _on_state_changed_tick(self, old: int, new: int) -> None:
        # Tick thread, in the middle of a Raft transition: only post to the loop, never raise (P4).
        try:
            sync = self._consumer._syncObj
            term = sync.raftCurrentTerm if sync is not None else 0
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._on_state_changed, new, term)
        except Exception:
            pass

    def _on_ready_tick(self) -> None:
        try:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._set_ready)
        except Exception:
            pass

    def _set_ready(self) -> None:
        self._ready = True

    def _on_state_changed(self, new: int, term: int) -> None:
        if self._stopped:
            return
        for task in self._take_tasks():
            task.cancel()
        self._serving_term = None
        if new == LEADER:
            log.info("raft member %s elected in term %d; proposing the barrier", self._self_address, term)
            self._barrier_task = asyncio.get_running_loop().create_task(self._run_barrier(term))
            self._emit(Role.LEADER, term)
        else:
            self._emit(Role.CANDIDATE if new == CANDIDATE else Role.FOLLOWER, term)

    def _take_tasks(self) -> list[asyncio.Task[None]]:
        """The leader's barrier and digest tasks, cancelled and forgotten (a role change, a stop)."""
        tasks = [t for t in (self._barrier_task, self._digest_task) if t is not None]
        self._barrier_task = self._digest_task = None
        for task in tasks:
            task.cancel()
        return tasks

    def _still_leader_in(self, term: int) -> bool:
        sync = self._sync
        return sync is not None and not self._stopped and sync._isLeader() and sync.raftCurrentTerm == term

    async def _run_barrier(self, term: int) -> None:
        """A new leader serves only after its own no-op record applied here (docs/architecture.md §3)."""
        started = time.monotonic()
        while self._still_leader_in(term):
            try:
                await self._submit(self._noop_record, self._tuning.barrier_timeout)
            except ApplyError:
                pass  # committed all the same
            except ReplicationError as exc:
                log.warning("leader barrier in term %d not applied (%s); retrying", term, exc)
                await asyncio.sleep(self._tuning.append_entries_period)
                continue
            if self._still_leader_in(term):
                self._serving_term = term
                log.info(
                    "raft member %s serving as leader in term %d (barrier %.1f ms after election)",
                    self._self_address,
                    term,
                    (time.monotonic() - started) * 1000,
                )
                self._emit(Role.SERVING, term)
                self._digest_task = asyncio.get_running_loop().create_task(self._run_digests(term))
            return

    async def _run_digests(self, term: int) -> None:
        """While leader in ``term``, propose the applier's state-digest record (``digest_record()``, when
        it has one) every ``state_digest_interval``: members compare their applied state with the
        leader's and stop on divergence (docs/raft.md §11)."""
        make = getattr(self._applier, "digest_record", None)
        interval = self._tuning.state_digest_interval
        if make is None or interval <= 0:
            return
        while self._still_leader_in(term):
            await asyncio.sleep(interval)
            if self.is_serving_leader():
                with contextlib.suppress(ReplicationError):  # the next round proposes again
                    await self._submit(make(), self._tuning.barrier_timeout)

    def _emit(self, role: Role, term: int) -> None:
        change = LeadershipChange(role, term, self.leader_address())
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("leadership listener %r raised on %s", listener, change)

    # -- introspection

    def healthy(self) -> bool:
        """False when the tick thread is gone (P12), before the member's first full tick (its dump and
        journal not yet checked and replayed), or when it is damaged (:meth:`damage`)."""
        sync = self._sync
        return sync is not None and sync.tick_thread_alive() and sync.loaded and self.damage() is None

    def damage(self) -> str | None:
        """Why this member's state cannot be trusted, or None: a journal record, ``.meta`` or dump that
        failed its check, a committed entry it could not apply, or a snapshot it could not restore. A
        damaged member applies nothing more, votes for no one and never leads (docs/raft.md §11)."""
        sync = self._sync
        if sync is not None and sync.damage is not None:
            return sync.damage
        return self._consumer.restore_error

    def abstain(self, reason: str | None) -> None:
        """Stand for no election while ``reason`` is set (None: stand again); a member that abstains still
        votes and follows. Used for a clock this node cannot trust (docs/architecture.md §12.2)."""
        sync = self._sync
        if sync is not None:
            sync.abstain = reason

    def abstaining(self) -> str | None:
        """Why this member stands for no election now, or None."""
        sync = self._sync
        return None if sync is None else sync.abstain

    def request_snapshot(self) -> None:
        """Ask PySyncObj to compact at its next chance (it still honours ``log_compaction_split``)."""
        self._require_started().forceLogCompaction()

    def status(self) -> dict[str, Any]:
        sync = self._require_started()
        raw: dict[str, Any] = {}
        for _ in range(3):  # getStatus() iterates dicts the tick thread may be resizing
            try:
                raw = sync.getStatus()
                break
            except RuntimeError:
                continue
        acks = {}
        try:
            now = raft_clock()
            acks = {str(n): now - t for n, t in list(sync.last_response_times().items())}
        except RuntimeError:
            pass
        age = self._quorum_ack_age() if sync._isLeader() else None
        partners = {
            p: {
                "connected": raw.get(f"partner_node_status_server_{p}") == 2,
                "match_index": raw.get(f"match_idx_server_{p}") if sync._isLeader() else None,
                "next_index": raw.get(f"next_node_idx_server_{p}") if sync._isLeader() else None,
                "last_ack_age": acks.get(p) if sync._isLeader() else None,
            }
            for p in self.partner_ids()
        }
        state = raw.get("state", -1)
        return {
            "self": self._self_id,
            "role": "observer" if self._observer else "voter",
            "state": "observer" if self._observer else STATE_NAMES.get(state, "unknown"),
            "term": raw.get("raft_term"),
            "commit_index": raw.get("commit_idx"),
            "last_applied": raw.get("last_applied"),
            "leader_commit_index": raw.get("leader_commit_idx"),
            "log_len": raw.get("log_len"),
            "leader": self.leader_address(),
            "serving": self.is_serving_leader(),
            "serving_term": self._serving_term,
            "quorum_ack_age": age,
            "lease_timeout": self._tuning.effective_lease_timeout,
            "ready": self._ready,
            "healthy": self.healthy(),
            "tick_thread_alive": sync.tick_thread_alive(),
            "restore_error": self._consumer.restore_error,
            "damage": self.damage(),
            "abstaining": self.abstaining(),
            "state_digest": getattr(self._applier, "last_digest", None),
            "apply_failures": self._consumer.apply_failures,
            "durable": self._durable,
            "partners": partners,
            "observers": self.observers() if sync._isLeader() else {},
        }

    def _require_started(self) -> PipelinedSyncObj:
        if self._sync is None or self._stopped:
            raise ProposalFailed("the replicated log is not running", outcome_unknown=False)
        return self._sync
