"""PySyncObj's TCP transport, twice extended: peers are known by their Raft identity (storage included,
docs/raft.md §10), and no Raft message leaves before the journal it describes is on disk (group commit,
docs/raft.md §7.3).

How what peers send us is decoded lives in ``decoding.py`` (it covers more than the transport's
frames); storage stays in ``journal.py``.
"""

from __future__ import annotations

import logging
from typing import Any

from pysyncobj import SyncObj
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.transport import TCPTransport

from mqha.controller.raft.identity import OBSERVER_HANDSHAKE_PREFIX
from mqha.controller.raft.journal import DurableFileJournal

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 2.0
"""An incoming connection that has not named itself (and, with a password, exchanged its key) this long
after it opened is closed (docs/architecture.md §12.4): stock PySyncObj kept such a connection forever,
as its timeout is only checked when the connection reads or writes."""


DEFAULT_MAX_PENDING = 64
"""``controllerRaftMaxPendingConnections``: incoming connections not yet named held at once."""


class IdentityTransport(TCPTransport):
    """Names a connection by the peer's full node id (a raftId: address and storageId), not its address.

    Stock 0.3.17 sends the address as the first message of a connection and looks the peer up by
    address, so a member whose store was replaced (same address, new storageId) would be taken for the
    old one. Here the first message is the node id and the lookup is by id: a peer whose id is not in
    this member's voter set is disconnected (or, if it says ``observer:<raftId>``, served as a
    read-only node that is remembered under that id, so the leader knows which observer has caught
    up). For a plain ``TCPNode`` the id is the address, so nothing changes there.
    """

    def __init__(
        self,
        syncObj: SyncObj,
        selfNode: Any,
        otherNodes: Any,
        *,
        observer_id: str | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        """Extends ``pysyncobj.transport.TCPTransport.__init__``. Why: an observer must say who it is,
        and unknown connections must be bounded. Differs: keeps ``observer_id`` (sent in the handshake
        when this member is read-only), a map of connected observers and ``max_pending``."""
        self.observer_id = observer_id
        self.max_pending = max_pending
        self.refused_pending = 0  # connections closed at once: ``max_pending`` unknown ones were open
        self.observers: dict[Any, str] = {}  # read-only Node -> the raftId it gave
        self._opened_at: dict[Any, float] = {}  # unknown incoming connection -> when it opened
        super().__init__(syncObj, selfNode, otherNodes)

    def _onNewIncomingConnection(self, conn: Any) -> None:
        """Extends ``TCPTransport._onNewIncomingConnection``. Why: an unknown connection must not be kept
        forever, nor can their number grow without bound (each silent one is held 2 s). Differs: with
        ``max_pending`` unknown connections open, a new one is closed at once (members already
        connected are not affected); else it is remembered with when it opened
        (``close_silent_connections`` closes it)."""
        if len(self._unknownConnections) >= self.max_pending:
            conn.disconnect()
            self.refused_pending += 1
            if self.refused_pending == 1 or self.refused_pending % 1000 == 0:
                log.warning(
                    "raft port: %d connections refused so far, %d not-yet-named connections being open "
                    "(controllerRaftMaxPendingConnections)",
                    self.refused_pending,
                    self.max_pending,
                )
            return
        super()._onNewIncomingConnection(conn)
        self._opened_at[conn] = monotonic_time()

    def close_silent_connections(self, now: float) -> int:
        """Close incoming connections still unknown ``HANDSHAKE_TIMEOUT_S`` after they opened; how many."""
        closed = 0
        for conn, opened in list(self._opened_at.items()):
            if conn not in self._unknownConnections:  # named itself, or gone
                del self._opened_at[conn]
            elif now - opened > HANDSHAKE_TIMEOUT_S:
                del self._opened_at[conn]
                self._unknownConnections.discard(conn)
                conn.disconnect()
                closed += 1
        return closed

    def addNode(self, node: Any) -> None:
        """Extends ``TCPTransport.addNode``. Why: the handshake lookup must be by id. Differs: the node is
        registered under its id instead of its address."""
        super().addNode(node)
        self._nodeAddrToNode.pop(node.address, None)
        self._nodeAddrToNode[node.id] = node

    def dropNode(self, node: Any) -> None:
        """Extends ``TCPTransport.dropNode``. Differs: also forgets the id key, and the observer name."""
        super().dropNode(node)
        self._nodeAddrToNode.pop(node.id, None)
        self.observers.pop(node, None)

    def _sendSelfAddress(self, conn: Any) -> None:
        """Overrides ``TCPTransport._sendSelfAddress``. Differs: sends the node id, or
        ``observer:<raftId>`` from a read-only member (plain ``readonly`` when it has no id)."""
        if self._selfIsReadonlyNode:
            conn.send(OBSERVER_HANDSHAKE_PREFIX + self.observer_id if self.observer_id else "readonly")
        else:
            conn.send(self._selfNode.id)

    def _onIncomingMessageReceived(self, conn: Any, message: Any) -> None:
        """Extends ``TCPTransport._onIncomingMessageReceived`` (first messages of an incoming connection).

        Why: an observer's handshake names it. Differs: ``observer:<raftId>`` is handled as stock
        ``readonly`` and the new read-only node is remembered with that raftId."""
        if isinstance(message, str) and message.startswith(OBSERVER_HANDSHAKE_PREFIX):
            before = self._readonlyNodesCounter
            super()._onIncomingMessageReceived(conn, "readonly")
            if self._readonlyNodesCounter == before + 1:
                created = next((n for n in self._readonlyNodes if n.id == str(before)), None)
                if created is not None:
                    self.observers = {n: i for n, i in self.observers.items() if n in self._readonlyNodes}
                    self.observers[created] = message[len(OBSERVER_HANDSHAKE_PREFIX) :]
            return
        super()._onIncomingMessageReceived(conn, message)


class GroupCommitTransport(IdentityTransport):
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
        self,
        syncObj: SyncObj,
        selfNode: Any,
        otherNodes: Any,
        *,
        journal: DurableFileJournal,
        observer_id: str | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        """Extends ``pysyncobj.transport.TCPTransport.__init__`` (through ``IdentityTransport``). Why:
        PySyncObj constructs the transport itself, with
        three positional arguments. Differs: takes the journal to sync as a keyword (bound by
        ``functools.partial``) and starts with no held messages."""
        self._held: list[tuple[Any, Any]] = []
        self.journal = journal
        super().__init__(syncObj, selfNode, otherNodes, observer_id=observer_id, max_pending=max_pending)

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
        the journal and releases the held messages before the stock bind/connect work, and closes
        incoming connections that never named themselves."""
        self.sync_and_release()
        if self._opened_at:
            self.close_silent_connections(monotonic_time())
        super()._onTick()

    def sync_and_release(self) -> None:
        """Make the journal durable, then send the held messages in order."""
        self.journal.sync()
        held, self._held = self._held, []
        for node, message in held:
            super().send(node, message)
