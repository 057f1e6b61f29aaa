"""PySyncObj nodes named by their store (docs/raft.md §10)."""

from __future__ import annotations

from pysyncobj.node import TCPNode

from mqha.controller.raft.identity import split_raft_id


class StoreNode(TCPNode):
    """A Raft member named by its store: id ``<host:port>/<storageId>`` (a raftId), dialled at host:port.

    PySyncObj compares, hashes, votes for and keeps in its voter set a node by its id, so two stores at
    one address (a disk replaced) are two members (docs/raft.md §10). PySyncObj builds nodes from ids
    (``nodeClass(id)``), hence the one-string constructor.
    """

    def __init__(self, raft_id: str) -> None:
        address, _ = split_raft_id(raft_id)
        super().__init__(address)
        self._id = raft_id  # Node forbids assigning ``id``, not its backing field

    @property
    def storage_id(self) -> str:
        return split_raft_id(self.id)[1]
