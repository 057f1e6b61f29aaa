"""Our PySyncObj (0.3.17) subclasses: the Raft member and the consumer holding the one replicated method.

Everything here runs on, or is read from, PySyncObj's tick thread (docs/raft.md §2.2). Every method that
PySyncObj also defines says in its docstring which PySyncObj method it overrides or extends, why, and
what differs; every read of a private PySyncObj attribute goes through one small accessor here. The
table of overrides is docs/raft.md §9, and ``tests/unit/controller/test_raft_pins.py`` fails when the
pinned internals move.

Snapshots
    The consumer's ``_serialize``/``_deserialize`` hooks call ``applier.snapshot()`` / ``restore()``.
    They run on the tick thread between two applies, so a snapshot matches ``raftLastApplied``
    exactly; the gzip+pickle+write runs in PySyncObj's forked child (``useFork``). ``journalFile`` and
    ``fullDumpFile`` are always both set (P2); compaction after ``log_compaction_min_entries`` entries
    or ``log_compaction_min_time`` seconds keeps restart time bounded. Members compact on their own
    count, not in PySyncObj's staggered time slots (``log_compaction_split``): with the slots, 45 s of
    2,000 writes/s left ~90,000 entries in two journals, and a member restarted on one replayed them
    for ~4 s in a single tick, answering no vote meanwhile (leader kill -> next commit took 3.5-4.2 s
    instead of 0.2-0.5 s).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import threading
import zlib
from collections.abc import Iterator
from typing import Any, Protocol

import pysyncobj.syncobj as _syncobj_module
from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.monotonic import monotonic as monotonicTime
from pysyncobj.node import TCPNode

from mqha.controller.raft import cipher, decoding
from mqha.controller.raft.errors import ApplyFailure, StopApplying
from mqha.controller.raft.journal import (
    CompactionSafeJournal,
    DurableFileJournal,
    install_durable_dumps,
    read_dump,
)
from mqha.controller.raft.transport import DEFAULT_MAX_PENDING, GroupCommitTransport, IdentityTransport

log = logging.getLogger(__name__)

SNAPSHOT_FORMAT = 1  # version of the dict our consumer puts into PySyncObj's dump

# PySyncObj's raft states (pysyncobj.syncobj._RAFT_STATE; private, stable since 0.2)
FOLLOWER, CANDIDATE, LEADER = 0, 1, 2
STATE_NAMES = {FOLLOWER: "follower", CANDIDATE: "candidate", LEADER: "leader"}


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


_JOURNAL_INSTALL_LOCK = threading.Lock()


@contextlib.contextmanager
def _journal_installed(journal: CompactionSafeJournal) -> Iterator[None]:
    """While open, PySyncObj's ``createJournal(path)`` returns ``journal`` for ``journal.path``.

    ``SyncObj.__init__`` builds its journal by calling the module global
    ``pysyncobj.syncobj.createJournal`` and takes no journal argument, so this is the one module patch
    we need; it lasts for one constructor call, under a lock.
    """
    with _JOURNAL_INSTALL_LOCK:
        original = _syncobj_module.createJournal

        def create(journal_file: str | None = None) -> object:
            return journal if journal_file == journal.path else original(journal_file)

        _syncobj_module.createJournal = create
        try:
            yield
        finally:
            _syncobj_module.createJournal = original


class PipelinedSyncObj(SyncObj):
    """One Raft member: PySyncObj's ``SyncObj`` with our journal, transport and pipelined acks."""

    def __init__(
        self,
        self_address: str | None,
        partners: list[str],
        conf: SyncObjConf,
        consumer: RecordConsumer,
        *,
        journal: CompactionSafeJournal | None = None,
        node_class: type[TCPNode] = TCPNode,
        observer_id: str | None = None,
        max_pending_connections: int = DEFAULT_MAX_PENDING,
    ) -> None:
        """Extends ``pysyncobj.SyncObj.__init__``.

        Why: PySyncObj builds its journal inside the constructor (``createJournal(conf.journalFile)``)
        and has no parameter for it. Differs: with ``journal`` the constructor receives that journal
        instead of a stock ``FileJournal`` (see :func:`_journal_installed`), and a durable one gets a
        :class:`GroupCommitTransport` bound to it and durable dump renames
        (:func:`~mqha.controller.raft.journal.install_durable_dumps`); without, both are stock. Whether
        it worked is :meth:`uses`: the caller checks it, as a later PySyncObj may build them elsewhere.
        Before anything is built, PySyncObj's decoding is made restricted (:func:`decoding.install`):
        the constructor already loads a dump and journal meta, and every later frame is peer data.
        With a password, frames are encrypted by :class:`~mqha.controller.raft.cipher.RaftCipher`
        (installed as PySyncObj's ``getEncryptor``) instead of Fernet. A journal that found damage at
        start makes the member damaged from its first tick (:attr:`damage`). Nodes are ``node_class``
        (``members.StoreNode`` when members are raftIds); ``self_address=None`` makes a read-only member
        (an observer, named ``observer_id`` in its handshake). ``max_pending_connections`` bounds the
        incoming connections not yet named (``controllerRaftMaxPendingConnections``).
        """
        decoding.install()
        cipher.install()  # before the constructor, which builds the encryptor from conf.password
        # Set before the stock constructor, which counts the attributes present then as "not state"
        # (the others would go into every dump). The tick thread starts inside the constructor.
        self.damage: str | None = None if journal is None else journal.damage
        self.abstain: str | None = None  # why this member does not stand for election now (its clock)
        self.loaded = False  # the first full tick ran: dump loaded, journal replayed to the commit index
        self._consumer = consumer
        self._dump_file: str | None = conf.fullDumpFile
        kwargs: dict[str, Any] = {"consumers": [consumer], "nodeClass": node_class}
        if isinstance(journal, DurableFileJournal):
            install_durable_dumps()
            transport = functools.partial(
                GroupCommitTransport,
                journal=journal,
                observer_id=observer_id,
                max_pending=max_pending_connections,
            )
        else:
            transport = functools.partial(
                IdentityTransport, observer_id=observer_id, max_pending=max_pending_connections
            )
        if journal is None:
            super().__init__(self_address, partners, conf, transportClass=transport, **kwargs)
            return
        with _journal_installed(journal):
            super().__init__(self_address, partners, conf, transportClass=transport, **kwargs)

    def uses(self, journal: CompactionSafeJournal) -> bool:
        """True when this member writes through ``journal`` and, when it is durable, sends through a
        group-commit transport on it."""
        if self.raft_log() is not journal:
            return False
        if not isinstance(journal, DurableFileJournal):
            return True
        transport = self.raft_transport()
        return isinstance(transport, GroupCommitTransport) and transport.journal is journal

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        """Extends ``pysyncobj.SyncObj.__onMessageReceived`` (name-mangled; the transport calls it).

        Why (P20): on every successful ``next_node_idx`` reply, stock 0.3.17 sets the follower's
        ``nextIndex`` to the acked index + 1, although newer entries are already in flight; the next
        send repeats them and the follower truncates and re-adds entries it already holds (logged as
        "truncating already-applied log entries"). Under 32 concurrent writers that doubled the work of
        every member. Differs: on the leader, after the stock handling of a successful, non-reset
        reply, ``nextIndex`` goes back up to where it was before (TCP delivers in order). A follower
        missing entries (a lost connection) answers ``reset``, and the stock rewind stands. Also: a damaged
        member drops every message (docs/raft.md §11): it grants no vote, acks nothing, installs nothing.
        """
        if self.damage is not None:
            return
        sent_up_to = None
        if message.get("type") == "next_node_idx" and message.get("success") and not message.get("reset"):
            sent_up_to = self._SyncObj__raftNextIndex.get(node)
        SyncObj._SyncObj__onMessageReceived(self, node, message)  # type: ignore[attr-defined]
        if sent_up_to is not None and self._isLeader():
            next_index = self._SyncObj__raftNextIndex
            if next_index.get(node, sent_up_to) < sent_up_to:
                next_index[node] = sent_up_to

    def _SyncObj__updateClusterConfiguration(self, newNodes: Any) -> None:
        """Overrides ``pysyncobj.SyncObj.__updateClusterConfiguration`` (a dump's member set is loaded).

        Why: a dump written by a read-only member (an observer) holds ``None`` for its own node, and the
        stock code would build a node from it. Differs: ``None`` is dropped, then the stock update runs.
        """
        nodes = [node for node in newNodes if node is not None]
        SyncObj._SyncObj__updateClusterConfiguration(self, nodes)  # type: ignore[attr-defined]

    # -- damage: a member whose state cannot be trusted takes no part in Raft (docs/raft.md §11)

    def mark_damaged(self, reason: str) -> None:
        """From now on this member applies nothing, grants no vote, never stands for election and steps
        down if it leads; the first reason stays. Tick thread."""
        if self.damage is None:
            self.damage = reason
            log.critical(
                "raft member damaged: %s; it takes no part in Raft until its store is replaced", reason
            )

    def _onTick(self, timeToWait: float = 0.0) -> None:
        """Extends ``pysyncobj.SyncObj._onTick``.

        Why: PySyncObj has no way to keep a member out of elections. Differs: while :attr:`damage` or
        :attr:`abstain` is set, the (private) election deadline is pushed out of reach before the stock
        tick (an abstaining member still votes and follows); a damaged leader steps down as at a lost
        quorum (state follower, no leader). When an abstention ends, the deadline is one election timeout
        away, as after a leader's message. After the stock tick, :attr:`loaded`
        says whether the first full tick ran (the dump loaded and the journal replayed), so a member is
        not reported healthy before its files were checked."""
        if self.damage is not None or self.abstain is not None:
            self._SyncObj__raftElectionDeadline = math.inf
            if self.damage is not None and self._isLeader():
                self._SyncObj__setState(FOLLOWER)
                self._SyncObj__raftLeader = None
        elif self._SyncObj__raftElectionDeadline == math.inf:  # an abstention ended: a normal timeout
            self._SyncObj__raftElectionDeadline = monotonicTime() + self._SyncObj__generateRaftTimeout()
        SyncObj._onTick(self, timeToWait)
        if not self.loaded and not self._SyncObj__needLoadDumpFile:
            self.loaded = True

    def _SyncObj__applyLogEntries(self) -> bool:
        """Extends ``pysyncobj.SyncObj.__applyLogEntries`` (name-mangled; the tick calls it).

        Why: stock would retry an entry that raised at every tick, while the member still voted and
        could lead on the state before it (issue 45). Differs: a damaged member applies nothing; an
        entry that raises (:class:`StopApplying` from the applier: unreadable, or a state digest apart
        from the leader's; or PySyncObj's own decoding of the command) makes the member damaged, and
        ``raftLastApplied`` stays before it."""
        if self.damage is not None:
            return False
        try:
            return bool(SyncObj._SyncObj__applyLogEntries(self))  # type: ignore[attr-defined]
        except Exception as exc:
            self.mark_damaged(f"committed entry {self.raftLastApplied + 1} cannot be applied: {exc}")
            return False

    def _SyncObj__tryLogCompaction(self) -> None:
        """Extends ``pysyncobj.SyncObj.__tryLogCompaction``. Why: a damaged member's files are the
        evidence of its damage, and its state is not one to snapshot. Differs: nothing while damaged."""
        if self.damage is None:
            SyncObj._SyncObj__tryLogCompaction(self)  # type: ignore[attr-defined]

    def _SyncObj__loadDumpFile(self, clearJournal: bool) -> None:
        """Extends ``pysyncobj.SyncObj.__loadDumpFile`` (the dump on disk at start, or one a leader sent).

        Why: stock logs a dump it cannot read and goes on without its state, voting and able to lead
        (issue 45). Differs: the dump is read whole first (:func:`read_dump`: gzip's CRC32 and length);
        a damaged member loads nothing; a dump that does not check out, or that the stock load or the
        consumer (``restore_error``) cannot use, makes the member damaged."""
        if self.damage is not None or self._dump_file is None:
            return
        data, damage = read_dump(self._dump_file)
        if damage is None:
            SyncObj._SyncObj__loadDumpFile(self, clearJournal)  # type: ignore[attr-defined]
            damage = self._consumer.restore_error
            if damage is None and self.raftLastApplied != data[1][1]:
                damage = "the load failed (see 'failed to load full dump')"
        if damage is not None:
            self.mark_damaged(f"{self._dump_file}: {damage}")

    # -- reads of PySyncObj's private state (pinned to 0.3.17, see tests/unit/controller/test_raft_pins.py)

    def last_response_times(self) -> dict[Any, float]:
        """``SyncObj.__lastResponseTime``: on the leader, the ``raft_clock()`` time of each partner's last
        ``next_node_idx`` reply (reset to now at election). The live dict of the tick thread: copy it."""
        times: dict[Any, float] = self._SyncObj__lastResponseTime
        return times

    def raft_log(self) -> object:
        """``SyncObj.__raftLog``: the journal this member writes."""
        return self._SyncObj__raftLog

    def raft_transport(self) -> object:
        """``SyncObj.__transport``: the transport this member sends through."""
        return self._SyncObj__transport

    def match_indexes(self) -> dict[Any, int]:
        """``SyncObj.__raftMatchIndex``: on the leader, each voter's and read-only member's match index."""
        indexes: dict[Any, int] = self._SyncObj__raftMatchIndex
        return indexes

    def last_log_index(self) -> int:
        """The index of the last entry in this member's log."""
        entries = self.raft_log()
        return int(entries[-1][1]) if len(entries) else 0  # type: ignore[arg-type,index]


class RecordConsumer(SyncObjConsumer):
    """Holds the ONE replicated method. Never add another: method ids come from sorted names (P10)."""

    def __init__(self, applier: Applier) -> None:
        """Extends ``pysyncobj.SyncObjConsumer.__init__``. Why: the consumer needs its applier and two
        counters. Differs: they are set before the stock constructor runs, which records the attributes
        present at that moment as "not state" (our ``_serialize`` decides what a snapshot holds anyway).
        """
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
        except StopApplying:
            raise  # never skipped: the member stops here (PipelinedSyncObj._SyncObj__applyLogEntries)
        except Exception as exc:
            # Raising here would make PySyncObj retry this entry forever and apply nothing after it (P3).
            self.apply_failures += 1
            log.error("applier raised on record at raft index %d; skipping it", raft_index, exc_info=True)
            return ApplyFailure(raft_index, f"{type(exc).__name__}: {exc}")

    def _serialize(self) -> dict[str, Any]:
        """Overrides ``pysyncobj.SyncObjConsumer._serialize`` (called on the tick thread right before the
        snapshot fork).

        Why: the stock hook pickles the consumer's ``__dict__``; our state lives in the applier. Differs:
        returns ``{"format": SNAPSHOT_FORMAT, "applier": applier.snapshot(), "crc32": its CRC32}``, and
        never raises (an exception here would fail the tick): a failing snapshot is logged and stored as
        ``None``, which will not restore.
        """
        try:
            payload = self._applier.snapshot()
            return {"format": SNAPSHOT_FORMAT, "applier": payload, "crc32": zlib.crc32(payload)}
        except Exception:
            log.critical("applier.snapshot() raised; this snapshot will not restore", exc_info=True)
            return {"format": SNAPSHOT_FORMAT, "applier": None}

    def _deserialize(self, data: dict[str, Any]) -> None:
        """Overrides ``pysyncobj.SyncObjConsumer._deserialize`` (called on the tick thread when a dump is
        loaded or installed).

        Why: the stock hook copies keys into ``__dict__``. Differs: checks the format and the CRC32 (when
        the dump has one) and hands the applier part to ``applier.restore``; on any failure it records
        ``restore_error`` (the member is damaged, docs/raft.md §11) instead of guessing a state, and does
        not raise.
        """
        try:
            payload = data.get("applier") if isinstance(data, dict) else None
            if payload is None or data.get("format") != SNAPSHOT_FORMAT:
                raise ValueError(f"unknown snapshot payload {type(data).__name__}")
            if "crc32" in data and zlib.crc32(payload) != data["crc32"]:  # older dumps have none
                raise ValueError("snapshot checksum mismatch")
            self._applier.restore(payload)
            self.restore_error = None
        except Exception as exc:
            # The state is unusable; report it (healthy() goes False, never serving) instead of guessing.
            self.restore_error = f"{type(exc).__name__}: {exc}"
            log.critical("restoring the applier from a snapshot failed; member unhealthy", exc_info=True)
