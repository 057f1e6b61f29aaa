"""The controller's replicated log: a thin PySyncObj (0.3.17) shell, generic over an :class:`Applier`.

Shell, not core: it owns a socket, a thread and files, and makes no controller decisions. Facts and
pitfalls referred to as P1..P19 are in ``docs/raft.md`` §4.

Threads
    PySyncObj runs Raft on its own *tick thread* (``autoTick``). Committed entries are applied there,
    through the ONE replicated method :meth:`_RecordConsumer.apply_record`, which takes our own record
    bytes (so the journal holds our encoding and PySyncObj's method ids never shift, P10) and hands them
    to ``applier.apply(data, raft_index)``. Everything the asyncio side learns from the tick thread
    (results, role changes) is posted with ``loop.call_soon_threadsafe``; the tick thread never touches a
    loop object. Every hook that runs on the tick thread is wrapped so it cannot raise (P3, P4).
    The ``SyncObj`` is built in :meth:`ReplicatedLog.start`, which must run in the main thread (P12).

Proposals
    :meth:`ReplicatedLog.propose` proposes only on the Raft leader; anywhere else it raises
    :class:`NotLeaderError` with the leader's Raft address, and the caller routes the write (we do not
    rely on PySyncObj's follower forwarding). A write that races a leadership change can still be
    forwarded by PySyncObj; records are compare-and-set on epochs, so that is safe. Errors::

        ReplicationError (MqhaError)   anything the replicated log refuses or cannot finish
        ├── NotLeaderError             not the leader; nothing was appended; ``leader_address`` may be None
        ├── ProposalTimeout            no answer in time; the record MAY still commit later
        ├── ProposalFailed             ``reason``; ``outcome_unknown`` says whether it may still commit
        │   └── ApplyError             committed, but the applier raised on it (on this node)
        └── RaftStartError             the Raft port could not be bound, or PySyncObj internals changed

Serving
    :meth:`ReplicatedLog.is_serving_leader` is True only when all three hold:

    1. PySyncObj says this node is leader (``_isLeader()``);
    2. the barrier -- our ``noop_record`` proposed when this node became leader -- has been applied on
       this node *in the current term* (so every entry of earlier terms is applied here too); and
    3. a quorum-confirmed lease is valid: enough partners to form a majority with us have answered an
       AppendEntries within ``lease_timeout``. PySyncObj records, on the leader, the monotonic time of the
       last ``next_node_idx`` reply per partner in the private dict ``_SyncObj__lastResponseTime`` (the
       same data its ``leaderFallbackTimeout`` step-down uses; reset to "now" at election, as the votes
       just came from a majority). We read a copy of its values from the asyncio thread. Those times
       are PySyncObj's clock, ``CLOCK_MONOTONIC_RAW`` -- not ``time.monotonic()``, which drifts from it
       (0.24 s apart on the dev VM); compare them only with :func:`raft_clock`.

    The lease bounds how long an isolated leader keeps serving (it stops after ``lease_timeout`` and
    steps down after ``leader_fallback_timeout``). It is NOT an exclusivity guarantee: PySyncObj voters
    have no leader stickiness or PreVote, so a new leader can be elected while the old lease runs
    (docs/raft.md §2.4). Safety comes from commit needing a majority and from epoch compare-and-set in apply.
    Leadership changes are reported to listeners (:meth:`ReplicatedLog.add_leadership_listener`) on
    the loop: ``LEADER`` when elected (barrier pending), ``SERVING`` when the barrier applied,
    ``FOLLOWER``/``CANDIDATE`` when leadership is lost. A lease lapse is not an event; poll
    ``is_serving_leader()`` per decision.

Snapshots
    The consumer's ``_serialize``/``_deserialize`` hooks call ``applier.snapshot()`` / ``restore()``. They
    run on the tick thread between two applies, so a snapshot matches ``raftLastApplied`` exactly; the
    gzip+pickle+write runs in PySyncObj's forked child (``useFork``). ``journalFile`` and
    ``fullDumpFile`` are always both set (P2); compaction after ``log_compaction_min_entries`` entries
    or ``log_compaction_min_time`` seconds keeps restart time bounded. Members compact on their own
    count, not in PySyncObj's staggered time slots (``log_compaction_split``): with the slots, 45 s of
    2,000 writes/s left ~90,000 entries in two journals, and a member restarted on one replayed them
    for ~4 s in a single tick, answering no vote meanwhile (leader kill -> next commit took 3.5-4.2 s
    instead of 0.2-0.5 s).

Durability (``durable=True``, the default; config key ``controllerJournalFsync``)
    Stock PySyncObj writes its journal into an mmap and its ``.meta`` (term, vote, commit index) and dump
    by rename, all without fsync (P8): that survives ``kill -9``, but a power loss or kernel crash on a
    majority can lose acknowledged writes, or let a member vote twice in a term. With ``durable``:

    - the journal is a :class:`DurableFileJournal` (injected by swapping
      ``pysyncobj.syncobj.createJournal`` during our constructor call only; checked afterwards);
    - the transport is a :class:`_GroupCommitTransport`: no message leaves the member while the journal
      has unsynced changes; at the end of each tick one ``msync(MS_SYNC)`` covers every change of the
      tick, then the held messages go out in order (group commit). A follower's ack thus follows its
      disk write, and a leader's AppendEntries follows its own, so a committed entry is on disk on the
      leader and on a majority;
    - ``.meta`` is written tmp + fsync + rename + directory fsync (term and vote before any vote leaves);
    - the dump is fsynced before the journal is cut back to it (compaction, installed snapshot).

    Measured on the shared 2-vCPU dev VM, 3 members on one host, ext4 on virtio, load inside the
    leader process (``tests/bench/test_replicated_log_bench.py``; medians of 3 runs of 3 s, range over
    two bench runs):

    =========  ===============================  ===============================
    proposers  mmap only                        durable
    =========  ===============================  ===============================
    1          2 360-2 530/s, p50 0.37-0.40 ms  510-850/s, p50 1.1-1.6 ms
    32         6 540-6 940/s, p50 4.3-4.9 ms    3 230-5 310/s, p50 5.7-8.9 ms
    =========  ===============================  ===============================

    Failover (kill -9 leader -> next commit) is unchanged, 0.16-0.65 s. Flushing per append instead
    of per tick gave 160 commits/s at 32 proposers. The controller writes a few records per second,
    so we pay it. Not covered: PySyncObj rewrites the journal in place at each compaction (clear +
    re-add); a crash inside that window drops this member's tail, which it re-fetches from the leader
    unless a majority crashes there at once. (Stock PySyncObj also made followers truncate and re-add
    entries they held whenever the leader re-sent a range in flight; :class:`_PipelinedSyncObj` stops
    those re-sends.)
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pysyncobj.syncobj as _syncobj_module
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.encryptor import HAS_CRYPTO
from pysyncobj.journal import FileJournal, MetaStorer
from pysyncobj.monotonic import monotonic as raft_clock  # CLOCK_MONOTONIC_RAW, not time.monotonic
from pysyncobj.pickle import dumps as _pickle_dumps
from pysyncobj.transport import TCPTransport

from mqha.codes import ResponseCode
from mqha.errors import ConfigError, MqhaError

log = logging.getLogger(__name__)

JOURNAL_FILE_NAME = "raft.journal"
DUMP_FILE_NAME = "raft.dump"
SNAPSHOT_FORMAT = 1  # version of the dict our consumer puts into PySyncObj's dump

# PySyncObj's raft states (pysyncobj.syncobj._RAFT_STATE; private, stable since 0.2)
_FOLLOWER, _CANDIDATE, _LEADER = 0, 1, 2
_STATE_NAMES = {_FOLLOWER: "follower", _CANDIDATE: "candidate", _LEADER: "leader"}


# ---------------------------------------------------------------------------------------------- errors


class ReplicationError(MqhaError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE


class NotLeaderError(ReplicationError):
    """This node is not the Raft leader. ``leader_address`` is the known leader's Raft address, or None."""

    code = ResponseCode.CONTROLLER_NOT_LEADER

    def __init__(self, leader_address: str | None) -> None:
        super().__init__(f"not the Raft leader; leader is {leader_address or 'unknown'}")
        self.leader_address = leader_address


class ProposalTimeout(ReplicationError):
    """No outcome within the timeout. The record may still commit later (make records idempotent)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"proposal not applied within {timeout:g} s; it may still commit")
        self.timeout = timeout


class ProposalFailed(ReplicationError):
    def __init__(self, reason: str, *, outcome_unknown: bool) -> None:
        super().__init__(f"proposal failed: {reason}" + (" (it may still commit)" if outcome_unknown else ""))
        self.reason = reason
        self.outcome_unknown = outcome_unknown


class ApplyError(ProposalFailed):
    """The record committed, but the applier raised on it here. Later records still apply."""

    code = ResponseCode.SYSTEM_ERROR

    def __init__(self, failure: ApplyFailure) -> None:
        message = f"applier raised at index {failure.raft_index}: {failure.error}"
        super().__init__(message, outcome_unknown=False)
        self.failure = failure


class RaftStartError(ReplicationError):
    pass


# ------------------------------------------------------------------------------------------- protocol


class Applier(Protocol):
    """The state machine behind the log. All three are called on PySyncObj's tick thread."""

    def apply(self, data: bytes, raft_index: int) -> object:
        """Apply one committed record (or the no-op record). Deterministic; must not raise."""
        ...

    def snapshot(self) -> bytes:
        """The whole state, as of the last applied record."""
        ...

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot."""
        ...


@dataclass(frozen=True)
class ApplyFailure:
    """What apply returns (and the proposer receives as :class:`ApplyError`) when the applier raised."""

    raft_index: int
    error: str


class Role(enum.Enum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"  # elected; barrier not yet applied
    SERVING = "serving"  # leader whose barrier applied in this term


@dataclass(frozen=True)
class LeadershipChange:
    """A role change of this member, delivered on the loop. ``term`` is PySyncObj's term when the change
    happened; for CANDIDATE that is the term being left (PySyncObj bumps it right after)."""

    role: Role
    term: int
    leader_address: str | None


# ------------------------------------------------------------------------------------- pure helpers


DNS_CACHE_SECONDS = 5.0
DNS_FAIL_CACHE_SECONDS = 1.0


def raft_address_of(api_address: str, port_offset: int = 1) -> str:
    """The Raft transport address of a controller whose API listens on ``api_address`` (docs/architecture.md
    §3)."""
    host, port = _split_address(api_address)
    return f"{host}:{port + port_offset}"


def api_address_of(raft_address: str, port_offset: int = 1) -> str:
    """Inverse of :func:`raft_address_of`: maps ``leader_address()`` back to an API address."""
    host, port = _split_address(raft_address)
    return f"{host}:{port - port_offset}"


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {address!r}")
    return host, int(port)


def store_paths(store_dir: str) -> tuple[str, str]:
    """(journal file, dump file) inside a store directory; PySyncObj adds ``.meta`` and ``.tmp`` files."""
    return os.path.join(store_dir, JOURNAL_FILE_NAME), os.path.join(store_dir, DUMP_FILE_NAME)


@dataclass(frozen=True)
class RaftTuning:
    """Timing and housekeeping knobs, in seconds (docs/raft.md §2.6). Defaults: the measured fast profile."""

    append_entries_period: float = 0.05  # heartbeat; PySyncObj requires raft_min_timeout > 3x this
    raft_min_timeout: float = 0.2  # election timeout range: failover ~0.2-0.4 s
    raft_max_timeout: float = 0.4
    leader_fallback_timeout: float | None = None  # no majority for this long: step down; None: max timeout
    lease_timeout: float | None = None  # serve only if a majority acked within this; None: raft_min_timeout
    connection_retry_time: float = 0.1  # <= min timeout / 2, or a restarted member forces elections (P7)
    connection_timeout: float = 3.5
    log_compaction_min_entries: int = 5000
    log_compaction_min_time: float = 300.0
    # PySyncObj's split lets each member compact only in 30 % of its third of every
    # log_compaction_min_time: under load the journal grows for minutes and a restarted member stalls
    # its tick (and so its votes) for seconds replaying it. Our snapshot is small; compact on count.
    log_compaction_split: bool = False
    bind_retries: int = 5  # then start() fails instead of retrying forever (P13)
    bind_retry_time: float = 0.5
    barrier_timeout: float = 2.0  # per attempt of the leader's no-op; retried while still leader
    commands_queue_size: int = 100_000

    @property
    def effective_leader_fallback_timeout(self) -> float:
        return self.raft_max_timeout if self.leader_fallback_timeout is None else self.leader_fallback_timeout

    @property
    def effective_lease_timeout(self) -> float:
        return self.raft_min_timeout if self.lease_timeout is None else self.lease_timeout

    def validate(self) -> RaftTuning:
        """PySyncObj's own ``validate()`` asserts; we name the offending field instead."""
        checks = [
            ("append_entries_period", self.append_entries_period > 0, "must be > 0"),
            (
                "raft_min_timeout",
                self.raft_min_timeout > 3 * self.append_entries_period,
                "must be > 3 x append_entries_period",
            ),
            ("raft_max_timeout", self.raft_max_timeout > self.raft_min_timeout, "must be > raft_min_timeout"),
            (
                "leader_fallback_timeout",
                self.effective_leader_fallback_timeout > self.append_entries_period,
                "must be > append_entries_period",
            ),
            (
                "lease_timeout",
                self.append_entries_period
                < self.effective_lease_timeout
                <= self.effective_leader_fallback_timeout,
                "must be > append_entries_period and <= leader_fallback_timeout",
            ),
            ("connection_retry_time", self.connection_retry_time >= 0, "must be >= 0"),
            (
                "connection_timeout",
                self.connection_timeout >= self.raft_max_timeout,
                "must be >= raft_max_timeout",
            ),
            ("log_compaction_min_entries", self.log_compaction_min_entries >= 2, "must be >= 2"),
            ("log_compaction_min_time", self.log_compaction_min_time > 0, "must be > 0"),
            ("bind_retries", self.bind_retries > 0, "must be > 0 (0 means retry forever)"),
            ("bind_retry_time", self.bind_retry_time > 0, "must be > 0"),
            ("barrier_timeout", self.barrier_timeout > 0, "must be > 0"),
            ("commands_queue_size", self.commands_queue_size > 0, "must be > 0"),
        ]
        for name, ok, message in checks:
            if not ok:
                raise ConfigError(name, f"{message} (got {getattr(self, name)!r})")
        return self


def build_conf(
    self_address: str,
    store_dir: str,
    tuning: RaftTuning,
    *,
    password: str | None = None,
    on_state_changed: Callable[[int, int], None] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> SyncObjConf:
    """The ``SyncObjConf`` of one member. Pure: builds an object, opens nothing."""
    tuning.validate()
    _split_address(self_address)
    if password and not HAS_CRYPTO:
        raise ConfigError("controllerRaftPassword", "Raft encryption needs the 'cryptography' package")
    journal_file, dump_file = store_paths(store_dir)
    return SyncObjConf(
        bindAddress=self_address,  # never the library default 0.0.0.0 (P9)
        password=password or None,
        appendEntriesUseBatch=False,  # send at once: ~0.5 ms commits instead of ~100 ms (P1)
        appendEntriesPeriod=tuning.append_entries_period,
        raftMinTimeout=tuning.raft_min_timeout,
        raftMaxTimeout=tuning.raft_max_timeout,
        leaderFallbackTimeout=tuning.effective_leader_fallback_timeout,  # default 30 s (P6)
        connectionRetryTime=tuning.connection_retry_time,
        connectionTimeout=tuning.connection_timeout,
        commandsWaitLeader=False,  # fail fast; callers decide about retries
        commandsQueueSize=tuning.commands_queue_size,
        journalFile=journal_file,
        fullDumpFile=dump_file,  # always with journalFile (P2)
        logCompactionMinEntries=tuning.log_compaction_min_entries,
        logCompactionMinTime=tuning.log_compaction_min_time,
        logCompactionSplit=tuning.log_compaction_split,
        maxBindRetries=tuning.bind_retries,
        bindRetryTime=tuning.bind_retry_time,
        dynamicMembershipChange=False,  # peers are static config (controllerDLegerPeers)
        onStateChanged=on_state_changed,
        onReady=on_ready,
    )


def quorum_ack_age(ack_times: list[float], partner_count: int, now: float) -> float | None:
    """Seconds since a majority (us + partners) last acknowledged us, from partners' last ack times.

    None when too few partners ever acked. With no partners the quorum is ourselves: age 0.
    """
    needed = (partner_count + 1) // 2  # partners that, with us, form a majority of partner_count + 1
    if needed == 0:
        return 0.0
    if len(ack_times) < needed:
        return None
    return now - sorted(ack_times, reverse=True)[needed - 1]


# ------------------------------------------------------------------------------- durable journal


def _fsync_path(path: str) -> None:
    """fsync a file or directory by path; a missing path is fine (nothing to make durable)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _DurableMetaStorer(MetaStorer):
    """``.meta`` (term, vote, commit index) written tmp + fsync + rename + directory fsync."""

    def storeMeta(self, meta: dict[str, Any]) -> None:
        path = self.getPath()
        with open(path + ".tmp", "wb") as f:
            f.write(_pickle_dumps(meta))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        _fsync_path(os.path.dirname(path) or ".")


class DurableFileJournal(FileJournal):
    """PySyncObj's mmap journal, made durable together with :class:`_GroupCommitTransport`.

    Changes only mark the journal dirty; :meth:`sync` makes them durable with one ``fdatasync`` of
    the journal file, which on Linux writes the pages dirtied through the map just as PySyncObj's
    ``flush()`` (``msync(MS_SYNC)``) would -- but CPython's ``mmap.flush`` holds the GIL through the
    disk flush (py-spy: 23 % of the leader's GIL time at 32 clients), stalling the event loop, while
    ``os.fdatasync`` releases it. ``.meta`` and the dump are fsynced as described in the module
    docstring. Pinned to pysyncobj 0.3.17's ``FileJournal`` (private ``__journalFile`` and its
    ``ResizableFile.__f``, private ``__metaStorer``).
    """

    def __init__(self, journal_file: str, dump_file: str) -> None:
        self._dump_file = dump_file
        self.dirty = False
        super().__init__(journal_file)
        self._FileJournal__metaStorer = _DurableMetaStorer(journal_file + ".meta")
        self._journal_fd()  # pysyncobj internals changed (not 0.3.17): fail at start, not in a tick
        _fsync_path(os.path.dirname(journal_file) or ".")  # the journal's directory entry

    def sync(self) -> None:
        if self.dirty:
            os.fdatasync(self._journal_fd())
            self.dirty = False

    def _journal_fd(self) -> int:
        # Looked up each time: ResizableFile reopens its file when it grows the journal.
        return int(self._FileJournal__journalFile._ResizableFile__f.fileno())

    def add(self, command: bytes, idx: int, term: int) -> None:
        super().add(command, idx, term)
        self.dirty = True

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        super().deleteEntriesFrom(entryFrom)
        self.dirty = True

    def clear(self) -> None:
        # Only called when the log is rebuilt from the dump (compaction, installed or loaded snapshot):
        # the dump must be on disk before the entries it replaces go.
        _fsync_path(self._dump_file)
        _fsync_path(os.path.dirname(self._dump_file) or ".")
        super().clear()
        self.dirty = True


class _GroupCommitTransport(TCPTransport):
    """PySyncObj's TCP transport that lets nothing leave while the journal has unsynced changes.

    A ``send`` while the journal is dirty (or earlier messages wait) is held, in order. At the end of
    each tick -- PySyncObj runs tick callbacks after applying, proposing and appending and before
    polling sockets -- the journal is synced once and the held messages go out. So a follower's ack
    and a leader's AppendEntries never precede the entries they describe on disk, and the leader's
    commit count (computed at the start of the next tick, from acks read during the poll) never counts
    its own unsynced entries. One msync covers every change of a tick: group commit.
    """

    def __init__(self, syncObj: SyncObj, selfNode: Any, otherNodes: Any) -> None:
        self._held: list[tuple[Any, Any]] = []
        self._journal: DurableFileJournal | None = None
        super().__init__(syncObj, selfNode, otherNodes)

    def _durable_journal(self) -> DurableFileJournal | None:
        if self._journal is None:
            journal = getattr(self._syncObj, "_SyncObj__raftLog", None)
            if isinstance(journal, DurableFileJournal):
                self._journal = journal
        return self._journal

    def send(self, node: Any, message: Any) -> bool:
        journal = self._durable_journal()
        if self._held or (journal is not None and journal.dirty):
            self._held.append((node, message))
            return True  # PySyncObj ignores send()'s result; the connection state is checked at release
        return bool(super().send(node, message))

    def _onTick(self) -> None:
        self.sync_and_release()
        super()._onTick()

    def sync_and_release(self) -> None:
        journal = self._durable_journal()
        if journal is not None:
            journal.sync()
        held, self._held = self._held, []
        for node, message in held:
            super().send(node, message)


_JOURNAL_PATCH_LOCK = threading.Lock()


@contextlib.contextmanager
def _durable_journal_during_construction(dump_file: str) -> Iterator[None]:
    """``SyncObj.__init__`` calls ``createJournal(path)``; swap it for ours during that call only."""
    with _JOURNAL_PATCH_LOCK:
        original = _syncobj_module.createJournal

        def create(journal_file: str | None = None) -> object:
            return DurableFileJournal(journal_file, dump_file) if journal_file else original(journal_file)

        _syncobj_module.createJournal = create
        try:
            yield
        finally:
            _syncobj_module.createJournal = original


class _PipelinedSyncObj(SyncObj):
    """PySyncObj's ``SyncObj`` whose leader does not rewind a follower's ``nextIndex`` on an ack.

    Stock 0.3.17 sets ``nextIndex`` to the acked index + 1 on every successful reply, although newer
    entries are already in flight; the next send repeats them and the follower truncates and re-adds
    entries it already holds (logged as "truncating already-applied log entries"). Under 32 concurrent
    writers that doubled the work of every member. TCP delivers in order, so the leader keeps its own,
    further ``nextIndex``; a follower missing entries (a lost connection) answers ``reset`` and the stock
    code rewinds as before.
    """

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        sent_up_to = None
        if message.get("type") == "next_node_idx" and message.get("success") and not message.get("reset"):
            sent_up_to = self._SyncObj__raftNextIndex.get(node)
        SyncObj._SyncObj__onMessageReceived(self, node, message)  # type: ignore[attr-defined]
        if sent_up_to is not None and self._isLeader():
            next_index = self._SyncObj__raftNextIndex
            if next_index.get(node, sent_up_to) < sent_up_to:
                next_index[node] = sent_up_to


# ----------------------------------------------------------------------------- tick-thread side


class _RecordConsumer(SyncObjConsumer):
    """Holds the ONE replicated method. Never add another: method ids come from sorted names (P10)."""

    def __init__(self, applier: Applier) -> None:
        # Set before SyncObjConsumer.__init__, so PySyncObj does not treat them as state; our own
        # _serialize/_deserialize below decide what a snapshot holds anyway.
        self._applier = applier
        self.restore_error: str | None = None
        self.apply_failures = 0
        super().__init__()

    @replicated
    def apply_record(self, data: bytes) -> object:
        """Runs on the tick thread for each committed record, on every member (also at replay)."""
        raft_index = self._syncObj.raftLastApplied + 1  # index of the entry being applied
        try:
            return self._applier.apply(data, raft_index)
        except Exception as exc:
            # Raising here would make PySyncObj retry this entry forever and apply nothing after it (P3).
            self.apply_failures += 1
            log.error("applier raised on record at raft index %d; skipping it", raft_index, exc_info=True)
            return ApplyFailure(raft_index, f"{type(exc).__name__}: {exc}")

    def _serialize(self) -> dict[str, Any]:
        # Called on the tick thread right before the snapshot fork; an exception here would fail the tick.
        try:
            return {"format": SNAPSHOT_FORMAT, "applier": self._applier.snapshot()}
        except Exception:
            log.critical("applier.snapshot() raised; this snapshot will not restore", exc_info=True)
            return {"format": SNAPSHOT_FORMAT, "applier": None}

    def _deserialize(self, data: dict[str, Any]) -> None:
        try:
            payload = data.get("applier") if isinstance(data, dict) else None
            if payload is None or data.get("format") != SNAPSHOT_FORMAT:
                raise ValueError(f"unknown snapshot payload {type(data).__name__}")
            self._applier.restore(payload)
            self.restore_error = None
        except Exception as exc:
            # The state is unusable; report it (healthy() goes False, never serving) instead of guessing.
            self.restore_error = f"{type(exc).__name__}: {exc}"
            log.critical("restoring the applier from a snapshot failed; member unhealthy", exc_info=True)


# ------------------------------------------------------------------------------------ asyncio side

_NOT_APPLIED = {
    FAIL_REASON.QUEUE_FULL: "the local command queue is full",
    FAIL_REASON.REQUEST_DENIED: "the leader denied the request",
    # the entry was appended by a leader that lost its term and was overwritten: not committed
    FAIL_REASON.DISCARDED: "overwritten by a newer leader's entry",
}
_UNKNOWN = {
    FAIL_REASON.LEADER_CHANGED: "the leader changed before the outcome was known",
    FAIL_REASON.UNKNOWN_OUTCOME: "the outcome could not be tracked",
}


def _failure_for(error: int, leader_address: str | None) -> ReplicationError:
    if error in (FAIL_REASON.NOT_LEADER, FAIL_REASON.MISSING_LEADER):
        return NotLeaderError(leader_address)
    if error in _NOT_APPLIED:
        return ProposalFailed(_NOT_APPLIED[error], outcome_unknown=False)
    return ProposalFailed(_UNKNOWN.get(error, f"PySyncObj failure code {error}"), outcome_unknown=True)


class ReplicatedLog:
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
        **tuning_overrides: Any,
    ) -> None:
        """``self_address``/``partner_addresses`` are Raft ``host:port`` strings spelled identically on
        every member. ``noop_record`` is what the applier receives as the leader's barrier.
        ``tuning_overrides`` replace single :class:`RaftTuning` fields (``raft_min_timeout=0.3``)."""
        self._self_address = self_address
        self._partners = [p for p in partner_addresses if p != self_address]
        self._store_dir = store_dir
        self._applier = applier
        self._password = password
        self._noop_record = noop_record
        self._durable = durable
        self._tuning = dataclasses.replace(tuning or RaftTuning(), **tuning_overrides).validate()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync: SyncObj | None = None
        self._consumer = _RecordConsumer(applier)
        self._pending: set[asyncio.Future[object]] = set()
        self._listeners: list[Callable[[LeadershipChange], None]] = []
        self._serving_term: int | None = None
        self._barrier_task: asyncio.Task[None] | None = None
        self._ready = False
        self._stopped = False

    # -- lifecycle

    async def start(self) -> None:
        if self._sync is not None or self._stopped:
            raise RuntimeError("ReplicatedLog.start() called twice")
        if threading.current_thread() is not threading.main_thread():
            # PySyncObj's tick thread exits with the thread that built it (P12).
            raise RuntimeError("ReplicatedLog must be started from the main thread")
        self._loop = asyncio.get_running_loop()
        os.makedirs(self._store_dir, exist_ok=True)
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
        )
        _, dump_file = store_paths(self._store_dir)
        patch = _durable_journal_during_construction(dump_file) if self._durable else contextlib.nullcontext()
        transport = _GroupCommitTransport if self._durable else TCPTransport
        with patch:
            sync = _PipelinedSyncObj(
                self._self_address, self._partners, conf, consumers=[self._consumer], transportClass=transport
            )
        self._sync = sync
        if self._durable and not (
            isinstance(sync._SyncObj__raftLog, DurableFileJournal)
            and isinstance(sync._SyncObj__transport, _GroupCommitTransport)
        ):
            await self._destroy_sync()
            raise RaftStartError("pysyncobj internals changed: durable journal not installed (pin 0.3.17)")
        try:
            await self._loop.run_in_executor(None, sync.waitBinded)
        except Exception as exc:
            await self._destroy_sync()
            raise RaftStartError(f"cannot bind the Raft port {self._self_address}: {exc!r}") from exc
        log.info(
            "raft member %s started (partners %s, store %s, durable=%s)",
            self._self_address,
            ",".join(self._partners),
            self._store_dir,
            self._durable,
        )

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop the member; pending proposals fail with an unknown outcome."""
        self._stopped = True
        self._serving_term = None
        if self._barrier_task is not None:
            task, self._barrier_task = self._barrier_task, None
            task.cancel()
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
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[object] = loop.create_future()
        self._pending.add(fut)

        def on_done(result: object, error: int) -> None:
            # Tick thread. If this raised, PySyncObj would apply the entry again here (P4): never raise.
            with contextlib.suppress(Exception):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(self._resolve, fut, result, error)

        try:
            self._consumer.apply_record(data, callback=on_done)
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise ProposalTimeout(timeout) from None
        finally:
            self._pending.discard(fut)

    def _resolve(self, fut: asyncio.Future[object], result: object, error: int) -> None:
        if fut.done():  # timed out or stopped meanwhile
            return
        if error != FAIL_REASON.SUCCESS:
            fut.set_exception(_failure_for(error, self.leader_address()))
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
        if sync is None or not sync._isLeader() or self._consumer.restore_error is not None:
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
            # Written by the tick thread; list() of a dict of floats runs without releasing the GIL.
            acks = list(sync._SyncObj__lastResponseTime.values())
        except RuntimeError:  # resized mid-copy (a fresh election): no lease
            return None
        return quorum_ack_age(acks, len(self._partners), raft_clock())

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
        if self._barrier_task is not None:
            self._barrier_task.cancel()
            self._barrier_task = None
        self._serving_term = None
        if new == _LEADER:
            log.info("raft member %s elected in term %d; proposing the barrier", self._self_address, term)
            self._barrier_task = asyncio.get_running_loop().create_task(self._run_barrier(term))
            self._emit(Role.LEADER, term)
        else:
            self._emit(Role.CANDIDATE if new == _CANDIDATE else Role.FOLLOWER, term)

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
            return

    def _emit(self, role: Role, term: int) -> None:
        change = LeadershipChange(role, term, self.leader_address())
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("leadership listener %r raised on %s", listener, change)

    # -- introspection

    def healthy(self) -> bool:
        """False when the tick thread is gone (P12) or a snapshot could not be restored."""
        return (
            self._sync is not None and self._sync.tick_thread_alive() and self._consumer.restore_error is None
        )

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
            acks = {str(n): now - t for n, t in list(sync._SyncObj__lastResponseTime.items())}
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
            for p in self._partners
        }
        state = raw.get("state", -1)
        return {
            "self": self._self_address,
            "state": _STATE_NAMES.get(state, "unknown"),
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
            "apply_failures": self._consumer.apply_failures,
            "durable": self._durable,
            "partners": partners,
        }

    def _require_started(self) -> SyncObj:
        if self._sync is None or self._stopped:
            raise ProposalFailed("the replicated log is not running", outcome_unknown=False)
        return self._sync
