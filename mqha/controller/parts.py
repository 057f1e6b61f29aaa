"""The parts of one controller node that its jobs share, and the base class that hands them to each job.

``ControllerService`` (``service.py``) builds one :class:`NodeParts` and gives it to each job: the write
path, the liveness watch, the role-change fan-out and the status views. Each job reads the shared parts
through :class:`NodePart` under the names it always used (``self.config``, ``self.log``, ...), so the
config replaced by ``PUT /v1/controller/config`` is seen by every job at its next use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from mqha.clock import Clock
from mqha.controller import bootstrap
from mqha.controller.applier import ControllerApplier
from mqha.controller.config import Peer, parse_peers
from mqha.controller.config_store import ConfigStore
from mqha.controller.console_feed import ConsoleFeed
from mqha.controller.election_waits import ElectionWaits
from mqha.controller.liveness import HeartbeatTable
from mqha.controller.raft import ReplicatedLog, api_address_of, storage_file
from mqha.controller.raft import identity as ids
from mqha.controller.sessions import SessionOwner, SessionRegistry
from mqha.history.recorder import HistoryRecorder, controller_observer


class NodeParts:
    """Holds what a controller node's jobs share: config, peers, applier, heartbeats, sessions, Raft log.

    ``start``/``stop`` open and close the shared parts (history, console feed, Raft member, sessions).
    """

    def __init__(self, config_store: ConfigStore, clock: Clock, session_owner: SessionOwner) -> None:
        self.config_store = config_store
        config = config_store.config
        self.clock = clock
        self.peers = parse_peers(config["controllerDLegerPeers"])
        self.node_id: str = config["controllerDLegerSelfId"]
        self.self_peer = next(p for p in self.peers if p.node_id == self.node_id)
        offset = config["controllerRaftPortOffset"]
        self._peer_by_raft = {p.raft_address(offset): p for p in self.peers}
        self.applier = ControllerApplier()
        self.heartbeats = HeartbeatTable()
        self.waits = ElectionWaits()  # sets waiting for a complete replica (docs/architecture.md §3.2)
        self.sessions = SessionRegistry(session_owner)
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
            state_digest_interval=config["controllerStateDigestIntervalMills"] / 1000,
            max_pending_connections=config["controllerRaftMaxPendingConnections"],
        )
        self.history: HistoryRecorder | None = None
        self.console = ConsoleFeed()
        # The store's identity (docs/raft.md §10): read, or a blank store formatted ``pending``, now;
        # its role is decided in start(), asking the peers if need be.
        self.identity: ids.StorageIdentity = bootstrap.load_or_format(
            config["controllerStorePath"], self.node_id
        )
        self.started = False

    @property
    def config(self) -> Mapping[str, Any]:
        """This node's config as of now (``PUT /v1/controller/config`` replaces it as a whole)."""
        return self.config_store.config

    async def start(self) -> None:
        """Decide the store's role, open the history, bind the console feed, start the Raft member."""
        self.identity = await bootstrap.resolve_role(self.identity, self.config)
        self.log.use_identity(
            self.identity.storage_id, list(self.identity.voters), observer=self.identity.role == ids.OBSERVER
        )
        # History (docs/architecture.md §5): every applied entry, journal replays included (re-inserts of a
        # known raftIndex are ignored), queued on the tick thread and written off it in batches.
        self.history = HistoryRecorder.in_store(self.config["controllerStorePath"])
        self.applier.add_observer(controller_observer(self.history, self.node_id))
        self.console.bind(asyncio.get_running_loop())
        self.applier.add_observer(self.console.on_applied)
        self.log.add_leadership_listener(lambda _change: self.console.notify())
        # Waits are this node's soft state: a new term of leadership starts their clocks again.
        self.log.add_leadership_listener(lambda _change: self.waits.clear_all())
        await self.log.start()
        # The role is saved once the journal exists (storage_file.load refuses a voter without one).
        await asyncio.to_thread(storage_file.save, self.config["controllerStorePath"], self.identity)
        self.started = True

    async def stop(self) -> None:
        """Close the sessions, stop the Raft member, flush the history."""
        await self.sessions.close_all()
        await self.log.stop()
        if self.history is not None:
            await asyncio.to_thread(self.history.close, 5.0)

    # ------------------------------------------------------------------------------ leadership

    def leader(self) -> tuple[str | None, str | None]:
        """(node id, API address) of the Raft leader as this node knows it."""
        raft = self.log.leader_address()
        return self.named(raft) if raft else (None, None)

    def named(self, raft: str) -> tuple[str, str]:
        """(node id, API address) of a Raft member (address or raftId); one that is not in
        ``controllerDLegerPeers`` (added online) is named by its API address."""
        address = raft.partition("/")[0]  # a raftId names the store after the address
        peer = self._peer_by_raft.get(address)
        if peer is not None:
            return peer.node_id, peer.api_address
        api_address = api_address_of(address, self.config["controllerRaftPortOffset"])
        return api_address, api_address

    def is_serving_leader(self) -> bool:
        return self.log.is_serving_leader()


class NodePart:
    """Gives one job of a controller node the node's shared parts, under the names every job uses."""

    def __init__(self, parts: NodeParts) -> None:
        self.parts = parts

    @property
    def config(self) -> Mapping[str, Any]:
        return self.parts.config

    @property
    def clock(self) -> Clock:
        return self.parts.clock

    @property
    def log(self) -> ReplicatedLog:
        return self.parts.log

    @property
    def applier(self) -> ControllerApplier:
        return self.parts.applier

    @property
    def heartbeats(self) -> HeartbeatTable:
        return self.parts.heartbeats

    @property
    def sessions(self) -> SessionRegistry:
        return self.parts.sessions

    @property
    def waits(self) -> ElectionWaits:
        return self.parts.waits

    @property
    def console(self) -> ConsoleFeed:
        return self.parts.console

    @property
    def node_id(self) -> str:
        return self.parts.node_id

    @property
    def self_peer(self) -> Peer:
        return self.parts.self_peer

    @property
    def peers(self) -> list[Peer]:
        return self.parts.peers

    def leader(self) -> tuple[str | None, str | None]:
        """(node id, API address) of the Raft leader as this node knows it."""
        return self.parts.leader()
