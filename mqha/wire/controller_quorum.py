"""The bodies of the controller's voter-set calls (docs/raft.md §10): add and remove a voter (wire)."""

from __future__ import annotations

from mqha.wire.codec import Request
from mqha.wire.types import Address, RaftId


class AddControllerPeerRequest(Request, frozen=True, kw_only=True):
    """The body of addControllerPeer: the observer to make a voter (docs/raft.md §10)."""

    raft_id: RaftId


class RemoveControllerPeerRequest(Request, frozen=True, kw_only=True):
    """The body of removeControllerPeer: the voter, by raftId or by the API address it serves at."""

    raft_id: RaftId | None = None
    address: Address | None = None
