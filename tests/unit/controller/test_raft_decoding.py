"""The restricted decoder of Raft peer data (mqha/controller/raft/decoding.py, docs/raft.md §7.1, §9).

Admits every shape PySyncObj 0.3.17 sends (each built here as ``syncobj.py`` builds it, encoded by
PySyncObj's own ``pysyncobj.pickle.dumps``; the live capture is in
``tests/integration/test_raft_port_attack.py``) and refuses every global outside the allow-list.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import struct
import subprocess
import zlib
from collections import OrderedDict
from typing import Any

import pysyncobj.journal
import pysyncobj.pickle
import pysyncobj.serializer
import pysyncobj.syncobj
import pysyncobj.tcp_connection
import pytest
from pysyncobj.node import Node, TCPNode
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection

from mqha.controller.raft import decoding
from mqha.controller.raft.decoding import (
    PeerTCPNode,
    RefusalLog,
    RefusedPeerData,
    restricted_load,
    restricted_loads,
)

A, B, C = (TCPNode(f"127.0.0.1:{port}") for port in (7001, 7002, 7003))
COMMAND = b"\x00" + pysyncobj.pickle.dumps(({}, 0, (b'{"op": "set"}',)))  # REGULAR type byte + call

# One of each message PySyncObj's syncobj.py / transport.py sends, as it builds them.
MESSAGES: list[Any] = [
    "127.0.0.1:7001",  # the handshake: the connecting member's address
    "readonly",
    os.urandom(32),  # the per-connection key (with a password)
    (os.urandom(32), {"type": "response_vote", "term": 3}),  # with a password: (key, message)
    {"type": "request_vote", "term": 3, "last_log_index": 10, "last_log_term": 2},
    {"type": "response_vote", "term": 3},
    {"type": "timeout_now", "term": 3},
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "entries": [],
        "prevLogIdx": 9,
        "prevLogTerm": 3,
    },
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "entries": [(COMMAND, 10, 3), (b"", 11, 3), (b"\x00" + b"\xff" * 70_000, 12, 3)],
        "prevLogIdx": 9,
        "prevLogTerm": 3,
    },
    {
        "type": "append_entries",
        "term": 3,
        "commit_index": 9,
        "transmission": "start",
        "data": pysyncobj.pickle.dumps((COMMAND, 10, 3))[:100],
        "prevLogIdx": 9,
        "prevLogTerm": 3,
    },
    {"type": "append_entries", "term": 3, "commit_index": 9, "serialized": (b"\x1f\x8b" * 9, True, False)},
    {"type": "next_node_idx", "next_node_idx": 11, "reset": False, "success": True},
    {"type": "apply_command", "command": COMMAND, "request_id": 4},
    {"type": "apply_command_response", "request_id": 4, "log_idx": 10, "log_term": 3},
    {"type": "apply_command_response", "request_id": 4, "error": 2},
    ["status"],  # a utility command
    "SUCCESS status",
]

# The pickled payloads of a log entry, a big entry sent in pieces, a dump and the journal's .meta.
PAYLOADS: list[Any] = [
    ({}, 0, (b'{"op": "set"}',)),
    ({}, 0, (b"",)),
    0,  # a VERSION command
    (COMMAND, 10, 3),
    (
        [{"_SyncObj__enabledCodeVersion": 0}, {"format": 1, "applier": b"state \x00\xff"}],
        (COMMAND, 313, 3),
        (COMMAND, 312, 3),
        {A, B, C},
    ),
    {"term": 3, "votedForNodeId": "127.0.0.1:7002", "raftCommitIndex": 313},
]


@pytest.mark.parametrize("value", MESSAGES + PAYLOADS, ids=lambda v: type(v).__name__)
def test_every_shape_pysyncobj_sends_decodes_as_the_stock_decoder_does(value: Any) -> None:
    data = pysyncobj.pickle.dumps(value)
    assert restricted_loads(data) == pickle.loads(data) == value
    assert restricted_load(io.BytesIO(data)) == value


def test_nodes_come_back_as_sealed_tcp_nodes_equal_to_the_configured_ones() -> None:
    decoded = restricted_loads(pysyncobj.pickle.dumps({A, B}))
    assert decoded == {A, B} and all(type(n) is PeerTCPNode for n in decoded)
    for node in decoded:
        assert isinstance(node, TCPNode) and node.address == f"{node.host}:{node.port}" == node.id


class _Call:
    """Pickles as ``function(*args)``."""

    def __init__(self, function: Any, *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (self.function, self.args)


def _global(module: str, name: str) -> bytes:
    """A protocol-2 pickle that only pushes the global ``module.name``."""
    return b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n."


_SLOTSTATE_EQ = b"N}X\x06\x00\x00\x00__eq__K\x01s\x86b."  # (None, {"__eq__": 1}), BUILD, STOP

ATTACKS: dict[str, bytes] = {
    "os.system": pickle.dumps(_Call(os.system, "true"), protocol=2),
    "eval": pickle.dumps(_Call(eval, "1"), protocol=2),
    "exec": pickle.dumps(_Call(exec, "pass"), protocol=2),
    "subprocess.Popen": pickle.dumps(_Call(subprocess.Popen, ["true"]), protocol=2),
    "os.system protocol 5": pickle.dumps(_Call(os.system, "true"), protocol=5),
    "nested in a message": pysyncobj.pickle.dumps({"type": "response_vote", "term": _Call(eval, "1")}),
    "builtins.getattr": _global("builtins", "getattr"),
    "__builtin__.__import__": _global("__builtin__", "__import__"),
    "pysyncobj Node": pickle.dumps(Node("x"), protocol=2),
    "pysyncobj SyncObj": _global("pysyncobj.syncobj", "SyncObj"),
    "collections.OrderedDict": pickle.dumps(OrderedDict(a=1), protocol=2),
    "builtins.frozenset": pickle.dumps(frozenset({1}), protocol=2),
    "_codecs.encode other codec": pickle.dumps(_Call(__import__("_codecs").encode, "x", "rot13"), protocol=2),
    "_codecs.encode non-text": pickle.dumps(_Call(__import__("_codecs").encode, 12, "latin1"), protocol=2),
    "bytes(size)": pickle.dumps(_Call(bytes, 10**9), protocol=2),
    # BUILD on the admitted class itself (None, {"__eq__": 1}): setattr(TCPNode, ...) for every later node.
    "setattr on the node class": _global("pysyncobj.node", "TCPNode")[:-1] + _SLOTSTATE_EQ,
    "persistent id": b"\x80\x02X\x01\x00\x00\x00xQ.",
}


@pytest.mark.parametrize("data", ATTACKS.values(), ids=ATTACKS.keys())
def test_globals_outside_the_allow_list_are_refused(data: bytes) -> None:
    with pytest.raises(RefusedPeerData):
        restricted_loads(data)
    assert "__eq__" not in PeerTCPNode.__dict__


def test_an_extension_code_resolves_nothing() -> None:
    """EXT opcodes look up copyreg's registry, empty in our process: no object, just an error."""
    with pytest.raises((ValueError, pickle.UnpicklingError)):
        restricted_loads(b"\x80\x02\x82\x01.")


def test_install_routes_every_pysyncobj_decode_site_through_the_restricted_decoder() -> None:
    decoding.install()
    assert decoding.installed()
    # The modules that decode reach the functions through the module object at call time.
    for module in (pysyncobj.tcp_connection, pysyncobj.syncobj, pysyncobj.serializer):
        assert module.pickle is pysyncobj.pickle
    assert pysyncobj.pickle.loads is decoding.peer_loads
    assert pysyncobj.pickle.load is decoding.peer_load
    assert pysyncobj.journal.loads is decoding.peer_loads  # type: ignore[attr-defined]
    with pytest.raises(RefusedPeerData):
        pysyncobj.pickle.loads(ATTACKS["os.system"])


def _frame(message: bytes) -> bytes:
    data = zlib.compress(message, 3)
    return struct.pack("i", len(data)) + data


def _parse(connection: TcpConnection, frame: bytes) -> Any:
    connection._TcpConnection__readBuffer = frame  # type: ignore[attr-defined]
    return connection._TcpConnection__processParseMessage()  # type: ignore[attr-defined]


def test_pysyncobj_drops_a_refused_frame_and_still_reads_good_ones() -> None:
    """The real parse path of ``tcp_connection.py``, fed without a socket."""
    decoding.install()
    connection = TcpConnection(poller=None)
    assert _parse(connection, _frame(ATTACKS["os.system"])) is None  # refused: disconnect, nothing handed on
    assert connection.state == CONNECTION_STATE.DISCONNECTED
    message = {"type": "response_vote", "term": 3}
    assert _parse(connection, _frame(pysyncobj.pickle.dumps(message))) == message


def test_refusals_are_logged_once_per_interval_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    refusals = RefusalLog(interval=60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger=decoding.__name__)
    exc = RefusedPeerData("refused Raft data: global posix.system ...")
    assert refusals.refused(exc)
    assert not refusals.refused(exc) and not refusals.refused(exc)
    now[0] += 60.0
    assert refusals.refused(exc)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "posix.system" in lines[0] and "more were refused" not in lines[0]
    assert "2 more were refused since the last such line" in lines[1]


def test_decoded_nodes_encode_again_as_what_the_protocol_carries() -> None:
    # A controller decodes the member set from a peer (a membership change, a snapshot) and writes it
    # into its own dump; at its next start it decodes that dump. The issue-27 soak: a re-encoded node
    # named its decoding class, the node refused its own dump 175,276 times and never came back.
    from mqha.controller.raft.members import StoreNode

    members = {StoreNode("127.0.0.1:9/" + "a" * 32), TCPNode("127.0.0.1:7")}
    once = restricted_loads(pickle.dumps(members, 2))
    twice = restricted_loads(pickle.dumps(once, 2))
    assert twice == once == members
    assert {type(n).__name__ for n in twice} == {"PeerStoreNode", "PeerTCPNode"}
    assert b"decoding" not in pickle.dumps(once, 2)
