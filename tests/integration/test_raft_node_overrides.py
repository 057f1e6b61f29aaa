"""One test per PySyncObj override in mqha/controller/raft/node.py (``PipelinedSyncObj``) and transport.py
(``GroupCommitTransport``), on an in-process member (docs/raft.md §9).

The member is built with ``autoTick=False``: no tick thread, it binds a port on 127.0.0.1 and ticks
only when a test says so, so each override can be driven by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysyncobj.pickle
import pysyncobj.syncobj
import pytest
from pysyncobj import SyncObj
from pysyncobj.journal import FileJournal
from pysyncobj.transport import TCPTransport

from mqha.controller.raft.addresses import store_paths
from mqha.controller.raft.identity import OBSERVER_HANDSHAKE_PREFIX, new_storage_id, raft_id, split_raft_id
from mqha.controller.raft.journal import DurableFileJournal
from mqha.controller.raft.members import StoreNode
from mqha.controller.raft.node import LEADER, PipelinedSyncObj, RecordConsumer
from mqha.controller.raft.transport import GroupCommitTransport, IdentityTransport
from mqha.controller.raft.tuning import RaftTuning, build_conf
from tests.helpers.processes import free_port
from tests.integration.raft_node import KVApplier

pytestmark = pytest.mark.integration


class Member:
    """A hand-ticked member and its journal (None when not durable)."""

    def __init__(self, store: Path, partners: int, durable: bool) -> None:
        store.mkdir(parents=True, exist_ok=True)
        address = f"127.0.0.1:{free_port()}"
        conf = build_conf(address, str(store), RaftTuning())
        conf.autoTick = False
        self.journal = DurableFileJournal(*store_paths(str(store))) if durable else None
        others = [f"127.0.0.1:{free_port()}" for _ in range(partners)]  # nobody listens there
        self.sync = PipelinedSyncObj(address, others, conf, RecordConsumer(KVApplier()), journal=self.journal)

    def partner(self) -> Any:
        return next(iter(self.sync._SyncObj__otherNodes))


@pytest.fixture
def members(tmp_path: Path) -> Iterator[list[Member]]:
    built: list[Member] = []
    yield built
    for member in built:
        member.sync.destroy()  # autoTick=False: closes transport and journal at once


def _member(members: list[Member], store: Path, *, partners: int = 1, durable: bool = True) -> Member:
    member = Member(store, partners, durable)
    members.append(member)
    return member


def test_init_builds_the_member_on_our_journal_and_transport(members: list[Member], tmp_path: Path) -> None:
    """``PipelinedSyncObj.__init__`` extends ``SyncObj.__init__``."""
    original = pysyncobj.syncobj.createJournal
    durable = _member(members, tmp_path / "durable")
    assert pysyncobj.syncobj.createJournal is original  # the swap lasted one constructor call
    assert durable.journal is not None and durable.sync.uses(durable.journal)
    assert durable.sync.raft_log() is durable.journal
    transport = durable.sync.raft_transport()
    assert isinstance(transport, GroupCommitTransport) and transport.journal is durable.journal
    assert len(durable.journal) == 1 and durable.journal.dirty  # the constructor's NO_OP, not yet synced

    stock = _member(members, tmp_path / "stock", durable=False)
    assert type(stock.sync.raft_log()) is FileJournal
    assert type(stock.sync.raft_transport()) is IdentityTransport  # stock sends, peers named by id
    assert not stock.sync.uses(durable.journal)


def _ack(next_index: int, *, reset: bool = False) -> dict[str, Any]:
    return {"type": "next_node_idx", "next_node_idx": next_index, "reset": reset, "success": not reset}


def test_on_message_received_keeps_the_further_next_index(members: list[Member], tmp_path: Path) -> None:
    """``PipelinedSyncObj._SyncObj__onMessageReceived`` extends ``SyncObj.__onMessageReceived`` (P20)."""
    member = _member(members, tmp_path)
    sync, node = member.sync, member.partner()
    sync._SyncObj__raftState = LEADER  # as if elected; entries up to 9 are in flight to the partner
    next_index, match_index = sync._SyncObj__raftNextIndex, sync._SyncObj__raftMatchIndex
    next_index[node], match_index[node] = 10, 3

    sync._SyncObj__onMessageReceived(node, _ack(6))  # ack of entry 5 while 6..9 are in flight
    assert (next_index[node], match_index[node]) == (10, 5)  # no re-send of 6..9
    assert node in sync.last_response_times()

    SyncObj._SyncObj__onMessageReceived(sync, node, _ack(8))  # stock: rewinds to the acked index + 1
    assert (next_index[node], match_index[node]) == (8, 7)

    next_index[node] = 10
    sync._SyncObj__onMessageReceived(node, _ack(4, reset=True))  # the follower misses entries
    assert next_index[node] == 4  # the stock rewind stands


def test_send_holds_messages_while_the_journal_is_dirty(
    members: list[Member], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GroupCommitTransport.send`` overrides ``TCPTransport.send``."""
    member = _member(members, tmp_path)
    assert member.journal is not None
    sent: list[Any] = []
    monkeypatch.setattr(TCPTransport, "send", lambda self, node, message: sent.append(message) or True)
    transport = member.sync.raft_transport()
    assert isinstance(transport, GroupCommitTransport)
    node = member.partner()

    assert member.journal.dirty
    assert transport.send(node, "first") is True and sent == []  # held: the NO_OP is not on disk yet
    member.journal.sync()
    assert transport.send(node, "second") is True and sent == []  # held behind the first, in order
    transport.sync_and_release()
    assert sent == ["first", "second"]
    assert transport.send(node, "third") and sent == ["first", "second", "third"]  # clean: straight out


def test_on_tick_syncs_then_releases_before_the_stock_tick(
    members: list[Member], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GroupCommitTransport._onTick`` extends ``TCPTransport._onTick``."""
    member = _member(members, tmp_path)
    journal = member.journal
    assert journal is not None
    events: list[str] = []
    monkeypatch.setattr(TCPTransport, "send", lambda self, node, message: events.append(message) or True)
    monkeypatch.setattr(TCPTransport, "_onTick", lambda self: events.append("stock tick"))
    stock_sync = DurableFileJournal.sync
    monkeypatch.setattr(
        DurableFileJournal, "sync", lambda self: events.append(f"sync dirty={self.dirty}") or stock_sync(self)
    )
    transport = member.sync.raft_transport()
    assert isinstance(transport, GroupCommitTransport)
    transport.send(member.partner(), "append_entries")

    transport._onTick()
    assert events == ["sync dirty=True", "append_entries", "stock tick"]
    assert not journal.dirty


class _Conn:
    """The parts of a ``TcpConnection`` the handshake touches."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.disconnected = False
        self.sendRandKey = None

    def send(self, message: Any) -> None:
        self.sent.append(message)

    def disconnect(self) -> None:
        self.disconnected = True

    def setOnMessageReceivedCallback(self, callback: Any) -> None:
        pass


def _identity_member(tmp_path: Path, *, observer: bool = False) -> tuple[PipelinedSyncObj, str, str]:
    """A hand-ticked member named by raftIds, with one partner that nobody serves."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    self_id = raft_id(f"127.0.0.1:{free_port()}", new_storage_id())
    partner = raft_id(f"127.0.0.1:{free_port()}", new_storage_id())
    conf = build_conf(split_raft_id(self_id)[0], str(tmp_path), RaftTuning(), dynamic_membership=True)
    conf.autoTick = False
    sync = PipelinedSyncObj(
        None if observer else self_id,
        [partner],
        conf,
        RecordConsumer(KVApplier()),
        node_class=StoreNode,
        observer_id=self_id if observer else None,
    )
    return sync, self_id, partner


def test_identity_transport_knows_peers_by_raft_id_not_address(tmp_path: Path) -> None:
    """``IdentityTransport.addNode``/``_onIncomingMessageReceived``: a store replaced at the same
    address is another member, and its connection is refused."""
    sync, _, partner = _identity_member(tmp_path)
    try:
        transport = sync.raft_transport()
        assert (
            partner in transport._nodeAddrToNode
            and split_raft_id(partner)[0] not in transport._nodeAddrToNode
        )
        replaced = raft_id(split_raft_id(partner)[0], new_storage_id())
        stranger = _Conn()
        transport._unknownConnections.add(stranger)
        transport._onIncomingMessageReceived(stranger, replaced)
        assert stranger.disconnected
        known = _Conn()
        transport._unknownConnections.add(known)
        transport._onIncomingMessageReceived(known, partner)
        assert not known.disconnected and transport._connections[StoreNode(partner)] is known
        transport.dropNode(StoreNode(partner))
        assert partner not in transport._nodeAddrToNode
    finally:
        sync.destroy()


def test_identity_transport_names_observers(tmp_path: Path) -> None:
    """``_sendSelfAddress`` says the raftId (or ``observer:<raftId>``); an observer's handshake is
    remembered under its raftId."""
    sync, self_id, _ = _identity_member(tmp_path / "voter")
    observer, observer_id, _ = _identity_member(tmp_path / "observer", observer=True)
    try:
        conn = _Conn()
        sync.raft_transport()._sendSelfAddress(conn)
        observer.raft_transport()._sendSelfAddress(conn)
        assert conn.sent == [self_id, OBSERVER_HANDSHAKE_PREFIX + observer_id]
        transport = sync.raft_transport()
        incoming = _Conn()
        transport._unknownConnections.add(incoming)
        transport._onIncomingMessageReceived(incoming, OBSERVER_HANDSHAKE_PREFIX + observer_id)
        assert not incoming.disconnected
        assert list(transport.observers.values()) == [observer_id]
    finally:
        sync.destroy()
        observer.destroy()


def test_a_damaged_member_grants_no_vote_never_stands_and_a_leader_steps_down(
    members: list[Member], tmp_path: Path
) -> None:
    """``PipelinedSyncObj._onTick`` and ``_SyncObj__onMessageReceived`` while damaged (docs/raft.md §11)."""
    member = _member(members, tmp_path, partners=2)
    sync, node = member.sync, member.partner()
    sync._SyncObj__raftState = LEADER  # as if elected
    sync.mark_damaged("test damage")
    sync.mark_damaged("a later reason")
    assert sync.damage == "test damage"  # the first reason stays
    sync._onTick()
    assert not sync._isLeader() and sync._getLeader() is None  # stepped down
    term = sync.raftCurrentTerm
    sync._SyncObj__raftElectionDeadline = 0  # overdue: stock would stand for election at this tick
    sync._SyncObj__connectedNodes.add(node)  # and it needs to be connected to someone
    sync._onTick()
    assert sync.raftCurrentTerm == term and sync._SyncObj__raftState != 1  # no candidacy, no new term
    vote = {"type": "request_vote", "term": term + 5, "last_log_index": 99, "last_log_term": term + 5}
    sync._SyncObj__onMessageReceived(node, vote)
    assert sync.raftCurrentTerm == term and sync._SyncObj__votedForNodeId is None  # dropped, not granted


def test_an_entry_that_raises_at_apply_damages_the_member_and_is_never_skipped(
    members: list[Member], tmp_path: Path
) -> None:
    """``PipelinedSyncObj._SyncObj__applyLogEntries`` extends ``SyncObj.__applyLogEntries``."""
    from mqha.controller.raft import UnreadableEntry

    member = _member(members, tmp_path)
    sync = member.sync
    consumer = sync._consumer
    applied: list[int] = []

    def apply(data: bytes, raft_index: int) -> object:
        if data == b"bad":
            raise UnreadableEntry("not a record")
        applied.append(raft_index)
        return None

    consumer._applier.apply = apply  # type: ignore[method-assign]
    journal = sync.raft_log()
    for index, data in ((2, b"ok"), (3, b"bad"), (4, b"ok")):
        command = b"\x00" + pysyncobj.pickle.dumps((0, (data,)))
        journal.add(command, index, 1)  # type: ignore[attr-defined]
    sync._SyncObj__raftCommitIndex = 4
    sync._SyncObj__applyLogEntries()
    assert applied == [2] and sync.raftLastApplied == 2  # stopped before index 3, which is not skipped
    assert sync.damage is not None and "committed entry 3 cannot be applied: not a record" in sync.damage
    sync._SyncObj__applyLogEntries()
    assert applied == [2]  # nothing more, ever
    assert consumer.apply_failures == 0
