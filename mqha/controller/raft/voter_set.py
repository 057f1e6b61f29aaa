"""The voter set of one Raft member: who votes, who observes, and changing it online (shell).

docs/raft.md §10. Members are named by raftId (``<raft host:port>/<storageId>``); the set is PySyncObj's
dynamic membership, kept in the log and in snapshots. :class:`VoterSet` is a part of
:class:`~mqha.controller.raft.log.ReplicatedLog`, which holds the PySyncObj member it reads.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable

from mqha.controller.raft.errors import NotLeaderError, ProposalFailed
from mqha.controller.raft.members import StoreNode
from mqha.controller.raft.node import PipelinedSyncObj

log = logging.getLogger(__name__)


class VoterSet:
    """Reads and changes the voter set of the member a ``ReplicatedLog`` runs (one change at a time)."""

    _sync: PipelinedSyncObj | None
    _observer: bool
    _self_id: str
    _self_address: str
    _storage_id: str | None
    _partners: list[str]

    def __init__(self) -> None:
        self._on_tick_calls: collections.deque[Callable[[], None]] = collections.deque()
        self._change_lock = asyncio.Lock()
        self._change_barrier = 0  # a voter change may start once the log has applied up to here

    def use_identity(self, storage_id: str, voters: list[str], *, observer: bool) -> None:
        """Name this member by its store before :meth:`start` (see the constructor's ``storage_id``)."""
        if self._sync is not None:
            raise RuntimeError("use_identity() after start()")
        self._storage_id = storage_id
        self._self_id = f"{self._self_address}/{storage_id}"
        self._observer = observer
        self._partners = [v for v in voters if v != self._self_id]

    def _require_started(self) -> PipelinedSyncObj:
        raise NotImplementedError

    def leader_address(self) -> str | None:
        raise NotImplementedError

    def _submit_with(
        self, enqueue: Callable[[Callable[[object, int], None]], object], timeout: float
    ) -> Awaitable[object]:
        raise NotImplementedError

    @property
    def self_id(self) -> str:
        """This member's Raft identity: ``host:port``, or ``host:port/storageId`` with storage ids."""
        return self._self_id

    @property
    def is_observer(self) -> bool:
        return self._observer

    def partner_ids(self) -> list[str]:
        """The other voters, as this member's log says now (the configured partners before start)."""
        if self._sync is None:
            return list(self._partners)
        for _ in range(3):  # the tick thread may change the set under the copy
            try:
                return sorted(str(node) for node in self._sync.otherNodes)
            except RuntimeError:
                continue
        return list(self._partners)

    def voter_ids(self) -> list[str]:
        """Every voter, this member included when it is one."""
        others = self.partner_ids()
        return sorted(others if self._observer else [self._self_id, *others])

    def observers(self) -> dict[str, int | None]:
        """On the leader: each connected observer's raftId and match index (None before its first ack)."""
        sync = self._sync
        if sync is None or not sync._isLeader():
            return {}
        transport = sync.raft_transport()
        named = dict(getattr(transport, "observers", {}))
        matches = dict(sync.match_indexes())
        return {raft_id: matches.get(node) for node, raft_id in named.items()}

    def commit_index(self) -> int:
        return int(self._require_started().raftCommitIndex)

    def last_applied(self) -> int:
        return int(self._require_started().raftLastApplied)

    def last_log_index(self) -> int:
        return self._require_started().last_log_index()

    async def add_voter(self, raft_id: str, timeout: float) -> None:
        """Add ``raft_id`` to the voter set (on the leader only). Returns once the change is committed and
        applied here. One change at a time: see :meth:`_change`."""
        node = StoreNode(raft_id)
        await self._change(lambda sync, callback: sync.addNodeToCluster(node, callback=callback), timeout)

    async def remove_voter(self, raft_id: str, timeout: float) -> None:
        """Remove ``raft_id`` from the voter set (on the leader; not the leader itself: see
        :meth:`transfer_leadership`)."""
        node = StoreNode(raft_id)
        await self._change(
            lambda sync, callback: sync.removeNodeFromCluster(node, callback=callback), timeout
        )

    async def _change(
        self, enqueue: Callable[[PipelinedSyncObj, Callable[[object, int], None]], object], timeout: float
    ) -> None:
        """Propose one voter-set change, never while another is in flight.

        Raft's single-server changes are safe only one at a time, and PySyncObj 0.3.17 does not enforce
        it (its ``__changeClusterIDx`` guard is never set; it only waits for the leader's first entry of
        the term). So changes here are serialised by a lock, and a change may start only once every
        entry up to where the previous one could sit (the log's end when it was answered or timed out)
        has applied; a new leader's own first entry covers changes of earlier terms.
        """
        async with self._change_lock:
            sync = self._require_started()
            if not sync._isLeader():
                raise NotLeaderError(self.leader_address())
            if sync.raftLastApplied < self._change_barrier:
                raise ProposalFailed(
                    "the previous voter change has not committed yet; retry", outcome_unknown=False
                )
            try:
                await self._submit_with(lambda callback: enqueue(sync, callback), timeout)
            finally:
                self._change_barrier = max(self._change_barrier, sync.last_log_index())

    def transfer_leadership(self) -> None:
        """Ask PySyncObj to hand leadership to the most caught-up connected voter (Raft TimeoutNow).
        Best effort: runs on the tick thread (PySyncObj's state is not thread-safe); watch the leader."""
        sync = self._require_started()

        def transfer() -> None:
            try:
                sync.transferLeadership()
            except Exception:
                log.warning("leadership transfer failed", exc_info=True)

        self._on_tick_calls.append(transfer)

    def _run_tick_calls(self) -> None:
        # Tick thread: run what the loop queued for it; never raise (P4).
        while self._on_tick_calls:
            try:
                self._on_tick_calls.popleft()()
            except Exception:
                log.exception("tick-thread call failed")
