"""Group commit on PySyncObj's TCP transport: no Raft message leaves before the journal it describes is
on disk (docs/raft.md §7.3).

How what peers send us is decoded lives in ``decoding.py`` (it covers more than the transport's
frames); storage stays in ``journal.py``.
"""

from __future__ import annotations

from typing import Any

from pysyncobj import SyncObj
from pysyncobj.transport import TCPTransport

from mqha.controller.raft.journal import DurableFileJournal


class GroupCommitTransport(TCPTransport):
    """Holds outgoing Raft messages while the journal has unsynced changes; one sync per tick.

    A ``send`` while the journal is dirty (or earlier messages wait) is held, in order. At the end of
    each tick -- PySyncObj runs tick callbacks after applying, proposing and appending and before
    polling sockets -- the journal is synced once and the held messages go out. So a follower's ack
    and a leader's AppendEntries never precede the entries they describe on disk, and the leader's
    commit count (computed at the start of the next tick, from acks read during the poll) never counts
    its own unsynced entries. One sync covers every change of a tick: group commit.

    PySyncObj builds its transport itself (``transportClass(syncObj, selfNode, otherNodes)``), so
    the journal comes in bound with ``functools.partial`` (:class:`mqha.controller.raft.node.PipelinedSyncObj`
    does that).
    """

    def __init__(
        self, syncObj: SyncObj, selfNode: Any, otherNodes: Any, *, journal: DurableFileJournal
    ) -> None:
        """Extends ``pysyncobj.transport.TCPTransport.__init__``. Why: PySyncObj constructs the transport
        itself, with three positional arguments. Differs: takes the journal to sync as a keyword (bound
        by ``functools.partial``) and starts with no held messages."""
        self._held: list[tuple[Any, Any]] = []
        self.journal = journal
        super().__init__(syncObj, selfNode, otherNodes)

    def send(self, node: Any, message: Any) -> bool:
        """Overrides ``pysyncobj.transport.TCPTransport.send``.

        Why: the stock send writes to the socket at once, so an ack or AppendEntries could leave before
        the journal entries it describes are on disk. Differs: while the journal is dirty (or earlier
        messages wait) the message is queued and True returned; PySyncObj ignores ``send()``'s result,
        and the connection state is checked again when the message is released.
        """
        if self._held or self.journal.dirty:
            self._held.append((node, message))
            return True
        return bool(super().send(node, message))

    def _onTick(self) -> None:
        """Extends ``pysyncobj.transport.TCPTransport._onTick`` (a tick callback the stock constructor
        registers). Why: the end of a tick is where every change of the tick is known. Differs: syncs
        the journal and releases the held messages before the stock bind/connect work."""
        self.sync_and_release()
        super()._onTick()

    def sync_and_release(self) -> None:
        """Make the journal durable, then send the held messages in order."""
        self.journal.sync()
        held, self._held = self._held, []
        for node, message in held:
            super().send(node, message)
