"""Guard: every PySyncObj method we override and every private PySyncObj attribute we read exists, with the
expected signature, in the pinned version (docs/raft.md §9). An upgrade of PySyncObj fails here, loudly,
naming what moved, instead of misbehaving in a tick.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pysyncobj
import pysyncobj.pickle
import pysyncobj.syncobj
import pysyncobj.tcp_connection
import pytest
from pysyncobj import SyncObj, SyncObjConsumer
from pysyncobj.journal import FileJournal, MetaStorer, ResizableFile
from pysyncobj.serializer import Serializer
from pysyncobj.transport import TCPTransport
from pysyncobj.version import VERSION

from mqha.controller.raft.journal import (
    ChecksummedMetaStorer,
    CompactionSafeJournal,
    DurableFileJournal,
    DurableMetaStorer,
)
from mqha.controller.raft.node import PipelinedSyncObj, RecordConsumer
from mqha.controller.raft.transport import GroupCommitTransport, IdentityTransport

# (our class, method, PySyncObj class it overrides, PySyncObj's parameter names)
OVERRIDES: list[tuple[type, str, type, list[str]]] = [
    (
        PipelinedSyncObj,
        "__init__",
        SyncObj,
        ["self", "selfNode", "otherNodes", "conf", "consumers", "nodeClass", "transport", "transportClass"],
    ),
    (PipelinedSyncObj, "_SyncObj__onMessageReceived", SyncObj, ["self", "node", "message"]),
    (PipelinedSyncObj, "_SyncObj__updateClusterConfiguration", SyncObj, ["self", "newNodes"]),
    (PipelinedSyncObj, "_onTick", SyncObj, ["self", "timeToWait"]),
    (PipelinedSyncObj, "_SyncObj__applyLogEntries", SyncObj, ["self"]),
    (PipelinedSyncObj, "_SyncObj__tryLogCompaction", SyncObj, ["self"]),
    (PipelinedSyncObj, "_SyncObj__loadDumpFile", SyncObj, ["self", "clearJournal"]),
    (RecordConsumer, "__init__", SyncObjConsumer, ["self"]),
    (RecordConsumer, "_serialize", SyncObjConsumer, ["self"]),
    (RecordConsumer, "_deserialize", SyncObjConsumer, ["self", "data"]),
    (ChecksummedMetaStorer, "storeMeta", MetaStorer, ["self", "meta"]),
    (DurableMetaStorer, "storeMeta", MetaStorer, ["self", "meta"]),
    (CompactionSafeJournal, "__init__", FileJournal, ["self", "journalFile"]),
    (CompactionSafeJournal, "add", FileJournal, ["self", "command", "idx", "term"]),
    (CompactionSafeJournal, "clear", FileJournal, ["self"]),
    (CompactionSafeJournal, "deleteEntriesFrom", FileJournal, ["self", "entryFrom"]),
    (CompactionSafeJournal, "deleteEntriesTo", FileJournal, ["self", "entryTo"]),
    (DurableFileJournal, "__init__", FileJournal, ["self", "journalFile"]),
    (DurableFileJournal, "add", FileJournal, ["self", "command", "idx", "term"]),
    (DurableFileJournal, "deleteEntriesFrom", FileJournal, ["self", "entryFrom"]),
    (DurableFileJournal, "clear", FileJournal, ["self"]),
    (IdentityTransport, "__init__", TCPTransport, ["self", "syncObj", "selfNode", "otherNodes"]),
    (IdentityTransport, "addNode", TCPTransport, ["self", "node"]),
    (IdentityTransport, "dropNode", TCPTransport, ["self", "node"]),
    (IdentityTransport, "_sendSelfAddress", TCPTransport, ["self", "conn"]),
    (IdentityTransport, "_onIncomingMessageReceived", TCPTransport, ["self", "conn", "message"]),
    (IdentityTransport, "_onNewIncomingConnection", TCPTransport, ["self", "conn"]),
    (GroupCommitTransport, "__init__", TCPTransport, ["self", "syncObj", "selfNode", "otherNodes"]),
    (GroupCommitTransport, "send", TCPTransport, ["self", "node", "message"]),
    (GroupCommitTransport, "_onTick", TCPTransport, ["self"]),
]

# Private state we read or replace, as the pinned source spells its assignment.
PRIVATE_STATE: list[tuple[Callable[..., Any], str]] = [
    (SyncObj.__init__, "self.__raftLog = createJournal(self.__conf.journalFile)"),
    (SyncObj.__init__, "self.__transport = transportClass(self, self.__selfNode, self.__otherNodes)"),
    (SyncObj.__init__, "self.__transport.setOnMessageReceivedCallback(self.__onMessageReceived)"),
    (SyncObj.__init__, "self.__raftNextIndex = {}"),
    (SyncObj.__init__, "self.__lastResponseTime = {}"),
    (SyncObj.__init__, "consumer._syncObj = self"),
    (SyncObj._SyncObj__onMessageReceived, "self.__lastResponseTime[node] = monotonicTime()"),  # type: ignore[attr-defined]
    (SyncObj._SyncObj__onMessageReceived, "self.__raftNextIndex[node] = nextNodeIdx"),  # type: ignore[attr-defined]
    (SyncObj.__init__, "self.__raftMatchIndex = {}"),
    (TCPTransport.__init__, "self._nodeAddrToNode = {}"),
    (TCPTransport.__init__, "self._unknownConnections = set() # set of TcpConnection objects"),
    (TCPTransport.__init__, "self._readonlyNodesCounter = 0"),
    (TCPTransport._onIncomingMessageReceived, "nodeId = str(self._readonlyNodesCounter)"),
    (
        TCPTransport._onIncomingMessageReceived,
        "node = self._nodeAddrToNode[message] if message in self._nodeAddrToNode else None",
    ),
    # CompactionSafeJournal.__init__ sets, instead of the stock constructor, every private attribute
    # FileJournal's other methods use (and only those)
    (FileJournal.__init__, "self.__journalFile = ResizableFile(journalFile"),
    (FileJournal.__init__, "self.__metaStorer = MetaStorer(journalFile + '.meta')"),
    (FileJournal.__init__, "self.__meta = self.__metaStorer.getMeta()"),
    (FileJournal.__init__, "self.__metaSaved = True"),
    (FileJournal.__init__, "self.__journal = []"),
    (FileJournal.__init__, "self.__currentOffset = currentOffset"),
    (FileJournal.add, "self.__setLastRecordOffset(self.__currentOffset)"),
    (FileJournal.add, "cmdData = struct.pack('<QQ', idx, term) + to_bytes(command)"),
    (
        FileJournal.deleteEntriesFrom,
        "prevRecordSize = struct.unpack('<I', self.__journalFile.read(currentOffset - 4, 4))[0]",
    ),
    (FileJournal.clear, "self.__setLastRecordOffset(FIRST_RECORD_OFFSET)"),
    (SyncObj._autoTickThread, "self._onTick(self.__conf.autoTickPeriod)"),  # reaches our override
    (SyncObj._onTick, "if self.__raftElectionDeadline < monotonicTime() and self.__connectedToAnyone():"),
    (SyncObj._onTick, "self.__raftElectionDeadline = monotonicTime() + self.__generateRaftTimeout()"),
    (SyncObj._onTick, "needSendAppendEntries = self.__applyLogEntries()"),
    (SyncObj._onTick, "self.__tryLogCompaction()"),
    (SyncObj._onTick, "self.__loadDumpFile(clearJournal=False)"),
    (SyncObj._onTick, "self.__needLoadDumpFile = False"),
    (SyncObj._SyncObj__onMessageReceived, "self.__loadDumpFile(clearJournal=True)"),  # type: ignore[attr-defined]
    (SyncObj._SyncObj__setState, "self.__raftState = newState"),  # type: ignore[attr-defined]
    (SyncObj.__init__, "self.__raftLeader = None"),
    (ResizableFile.__init__, "self.__f = open(fileName, 'r+b')"),
    (Serializer.serialize, "atomicReplace(tmpFile, self.__fileName)"),
    (TCPTransport.__init__, "self._syncObj.addOnTickCallback(self._onTick)"),
]

# Public or single-underscore SyncObj members ReplicatedLog calls, and the getStatus() keys it reads.
SYNCOBJ_MEMBERS = [
    "_isLeader",
    "_getLeader",
    "raftLastApplied",
    "raftCurrentTerm",
    "getStatus",
    "forceLogCompaction",
    "waitBinded",
    "destroy",
    "tick_thread_alive",
    "otherNodes",
    "addNodeToCluster",
    "removeNodeFromCluster",
    "transferLeadership",
    "addOnTickCallback",
    "raftCommitIndex",
]
STATUS_KEYS = [
    "'state'",
    "'raft_term'",
    "'commit_idx'",
    "'last_applied'",
    "'leader_commit_idx'",
    "'log_len'",
    "'partner_node_status_server_'",
    "'match_idx_server_'",
    "'next_node_idx_server_'",
]


def _params(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_pinned_version() -> None:
    assert VERSION == "0.3.17", "re-read docs/raft.md §1 and §9 before moving the pin"


@pytest.mark.parametrize(
    ("ours", "name", "base", "params"), OVERRIDES, ids=[f"{o.__name__}.{n}" for o, n, _, _ in OVERRIDES]
)
def test_each_override_still_overrides_a_method_with_that_signature(
    ours: type, name: str, base: type, params: list[str]
) -> None:
    assert issubclass(ours, base)
    assert name in ours.__dict__, f"{ours.__name__}.{name} is listed but not defined"
    assert callable(getattr(base, name, None)), f"pysyncobj {base.__name__}.{name} is gone"
    assert _params(getattr(base, name)) == params, f"pysyncobj {base.__name__}.{name} changed its signature"
    doc = " ".join((ours.__dict__[name].__doc__ or "").split())
    stock = name.replace("_SyncObj__", "__")
    assert f"{base.__name__}.{stock}" in doc, (
        f"{ours.__name__}.{name}'s docstring must name what it overrides"
    )


@pytest.mark.parametrize(
    "ours",
    [
        PipelinedSyncObj,
        RecordConsumer,
        ChecksummedMetaStorer,
        DurableMetaStorer,
        CompactionSafeJournal,
        DurableFileJournal,
    ],
)
def test_every_method_shadowing_pysyncobj_is_listed(ours: type) -> None:
    """A new override must come with a row above (and in docs/raft.md §9) and a test of its own."""
    listed = {name for cls, name, _, _ in OVERRIDES if cls is ours}
    shadowing = {
        name
        for name, value in ours.__dict__.items()
        if callable(value)
        and (name == "__init__" or not name.startswith("__"))
        and any(name in base.__dict__ for base in ours.__mro__[1:] if base.__module__.startswith("pysyncobj"))
    }
    assert shadowing == listed


def test_group_commit_transport_shadows_only_its_listed_methods() -> None:
    listed = {name for cls, name, _, _ in OVERRIDES if cls is GroupCommitTransport}
    shadowing = {
        name for name in GroupCommitTransport.__dict__ if callable(getattr(TCPTransport, name, None))
    }
    assert shadowing == listed


@pytest.mark.parametrize(("function", "line"), PRIVATE_STATE, ids=[line for _, line in PRIVATE_STATE])
def test_private_state_we_rely_on_is_still_there(function: Callable[..., Any], line: str) -> None:
    assert line in inspect.getsource(function), f"pysyncobj no longer has: {line}"


def test_create_journal_is_the_module_global_the_constructor_calls() -> None:
    """``PipelinedSyncObj.__init__`` hands our journal in by swapping this name for one call."""
    assert pysyncobj.syncobj.createJournal is pysyncobj.journal.createJournal
    assert _params(pysyncobj.syncobj.createJournal) == ["journalFile"]


def test_syncobj_members_and_status_keys_we_read() -> None:
    for name in SYNCOBJ_MEMBERS:
        assert hasattr(SyncObj, name), f"pysyncobj SyncObj.{name} is gone"
    source = inspect.getsource(SyncObj.getStatus)
    for key in STATUS_KEYS:
        assert f"status[{key}" in source, f"SyncObj.getStatus() no longer reports {key}"


# Every place PySyncObj decodes bytes (file, line as written): each goes through ``pysyncobj.pickle.loads``
# / ``load``, or journal.py's imported ``loads``, which ``mqha.controller.raft.decoding.install`` replaces.
DECODE_SITES = {
    ("journal.py", "from .pickle import to_bytes, loads, dumps"),
    ("journal.py", "meta = loads(open(self.__path, 'rb').read())"),
    ("serializer.py", "import pysyncobj.pickle as pickle"),
    ("serializer.py", "return pickle.load(g)"),
    ("syncobj.py", "import pysyncobj.pickle as pickle"),
    ("syncobj.py", "ver = pickle.loads(command[1:])"),
    ("syncobj.py", "command = pickle.loads(command[1:])"),
    ("syncobj.py", "newEntries = [pickle.loads(self.__recvTransmission)]"),
    ("syncobj.py", "return pickle.loads(command[1:])"),
    ("tcp_connection.py", "import pysyncobj.pickle as pickle"),
    ("tcp_connection.py", "message = pickle.loads(zlib.decompress(data))"),
}


def test_every_decode_site_of_pysyncobj_is_one_the_restricted_decoder_covers() -> None:
    """A new ``loads``/``load``/``Unpickler`` call, or another import of pickle or marshal, fails here."""
    package = Path(pysyncobj.__file__).parent
    pattern = re.compile(
        r"\bloads?\(|\bUnpickler\b|\bmarshal\b|\bimport\b.*\bpickle\b|\bpickle\b.*\bimport\b"
    )
    found = {
        (path.name, line.strip())
        for path in package.glob("*.py")
        if path.name != "pickle.py"
        for line in path.read_text().splitlines()
        if pattern.search(line)
    }
    assert found == DECODE_SITES


def test_pysyncobj_pickles_with_protocol_2_through_the_functions_we_replace() -> None:
    """The allow-list spells protocol 2's names (``__builtin__``, ``_codecs.encode`` for bytes)."""
    source = inspect.getsource(pysyncobj.pickle)
    assert "__protocol = 2" in source
    assert {"loads", "load", "dumps", "dump", "to_bytes"} <= set(vars(pysyncobj.pickle))
    # test_raft_decoding.py drives the frame parser directly (no socket)
    parse = pysyncobj.tcp_connection.TcpConnection._TcpConnection__processParseMessage  # type: ignore[attr-defined]
    assert _params(parse) == ["self"]


def test_the_encryptor_is_the_module_global_the_constructor_calls_and_its_interface_is_used() -> None:
    """``mqha.controller.raft.cipher.install`` swaps ``getEncryptor``; frames use three methods of it."""
    assert "self.__encryptor = getEncryptor(self.__conf.password)" in inspect.getsource(SyncObj.__init__)
    connection = inspect.getsource(pysyncobj.tcp_connection)
    for call in (
        "self.encryptor.encrypt_at_time(data, int(monotonicTime()))",
        "self.encryptor.extract_timestamp(data)",
        "self.encryptor.decrypt(data)",
    ):
        assert call in connection
    used = set(
        re.findall(
            r"encryptor\.(\w+)\(",
            "".join(
                (Path(pysyncobj.__file__).parent / name).read_text()
                for name in ("tcp_connection.py", "transport.py", "syncobj.py")
            ),
        )
    )
    assert used == {"encrypt_at_time", "extract_timestamp", "decrypt"}
