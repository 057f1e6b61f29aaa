"""The controller's replicated log on PySyncObj 0.3.17, with our customisations of the library as an
explicit layer (docs/raft.md §1, §9).

=============  ==================================================================================
module         job
=============  ==================================================================================
errors         what the log raises; PySyncObj failure codes -> exceptions
addresses      Raft address <-> API address; the member's file names
tuning         timing knobs (``RaftTuning``), the ``SyncObjConf`` built from them, the lease's quorum math
journal        checksummed, crash-safe and durable storage (PySyncObj subclasses); damage found at start
journal_format the journal file's records, each with a CRC32 (pure codec)
identity       who a store is (``storage.json``: nodeId, storageId, role) and how a blank store joins (pure)
storage_file   reading and durably writing ``storage.json``
members        ``StoreNode``: a PySyncObj node named by its store (``<host:port>/<storageId>``)
transport      peers named by raftId (``IdentityTransport``) and group commit (``GroupCommitTransport``)
decoding       peer data (frames, log entries, dumps) is unpickled by an allow-list, never into code
node           ``PipelinedSyncObj`` (the ``SyncObj`` subclass) and ``RecordConsumer`` (the one replicated
               method); every read of PySyncObj's private state goes through them
log            ``ReplicatedLog``: the asyncio face of one member (proposals, leadership, lease, status)
=============  ==================================================================================

Every method that overrides or extends a PySyncObj method names it in its docstring, with why and what
differs; ``tests/unit/controller/test_raft_pins.py`` checks that each one, and each private attribute we
read, still exists with the expected signature in the pinned version.
"""

from mqha.controller.raft.addresses import (
    DUMP_FILE_NAME,
    JOURNAL_FILE_NAME,
    api_address_of,
    raft_address_of,
    store_paths,
)
from mqha.controller.raft.errors import (
    ApplyError,
    ApplyFailure,
    DivergedState,
    NotLeaderError,
    ProposalFailed,
    ProposalTimeout,
    RaftStartError,
    ReplicationError,
    StopApplying,
    UnreadableEntry,
)
from mqha.controller.raft.log import LeadershipChange, ReplicatedLog, Role
from mqha.controller.raft.node import Applier
from mqha.controller.raft.tuning import RaftTuning, build_conf, quorum_ack_age

__all__ = [
    "DUMP_FILE_NAME",
    "JOURNAL_FILE_NAME",
    "Applier",
    "ApplyError",
    "ApplyFailure",
    "DivergedState",
    "LeadershipChange",
    "NotLeaderError",
    "ProposalFailed",
    "ProposalTimeout",
    "RaftStartError",
    "RaftTuning",
    "ReplicatedLog",
    "ReplicationError",
    "Role",
    "StopApplying",
    "UnreadableEntry",
    "api_address_of",
    "build_conf",
    "quorum_ack_age",
    "raft_address_of",
    "store_paths",
]
