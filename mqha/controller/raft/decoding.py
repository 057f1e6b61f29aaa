"""What a Raft peer sends us is decoded by a restricted unpickler: data, never code (docs/raft.md §7.1, §9).

PySyncObj 0.3.17 encodes everything it exchanges with pickle protocol 2 and decodes it through two
functions of its module ``pysyncobj.pickle``: ``loads`` (every frame in ``tcp_connection.py``; every
command of the log at apply, including big entries sent in pieces, in ``syncobj.py``) and ``load``
(the dump a leader sends a lagging member, in ``serializer.py``); ``journal.py`` binds ``loads`` for
its ``.meta`` file. :func:`install` points all three at :func:`peer_loads` / :func:`peer_load`, for
the whole process and for good.

The decoder builds containers and scalars as pickle always does, and resolves a global name only
through :data:`ADMITTED`: the few the protocol really carries (captured from a live cluster by
``tests/integration/test_raft_port_attack.py``). Any other global (``os.system``, ``builtins.eval``,
``subprocess.Popen``, any class) raises :class:`RefusedPeerData`, so the frame's connection closes
(PySyncObj closes it on any decode error) and the node keeps serving. What a name resolves to cannot be
changed by a pickle either: callables are slot-less instances and the one class is sealed, since
pickle's BUILD opcode would otherwise ``setattr`` on whatever object it is handed.
"""

from __future__ import annotations

import io
import logging
import pickle
import threading
import time
from collections.abc import Callable
from typing import IO, Any, NoReturn

import pysyncobj.journal
import pysyncobj.pickle
from pysyncobj.node import TCPNode

from mqha.controller.raft.members import StoreNode
from mqha.errors import MqhaError

log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL = 60.0  # seconds between two log lines about refused peer data


class RefusedPeerData(MqhaError, pickle.UnpicklingError):
    """Peer data named a global the Raft protocol does not carry (or misused an admitted one)."""


def _refuse(what: str) -> NoReturn:
    raise RefusedPeerData(f"refused Raft data: {what} is not something the PySyncObj protocol carries")


class _SealedClass(type):
    """Metaclass whose classes refuse attribute assignment, so a pickle cannot rewrite them."""

    def __setattr__(cls, name: str, value: object) -> None:
        _refuse(f"setting attribute {name!r} of class {cls.__name__}")

    def __delattr__(cls, name: str) -> None:
        _refuse(f"deleting attribute {name!r} of class {cls.__name__}")


class _EncodesAsItsBase:
    """Pickles as the class it was decoded from, which :data:`ADMITTED` maps back to it.

    A controller writes the member set it decoded from a peer into its own dump and decodes that dump at
    its next start: naming the decoding class there would make it refuse its own file (the issue-27 soak:
    a controller never came back from a restart after a membership change)."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        base = type(self).__mro__[2]  # the class after this mixin: TCPNode or StoreNode
        return (base, (self.id,), dict(vars(self)))  # built from its id, as PySyncObj builds nodes


class PeerTCPNode(_EncodesAsItsBase, TCPNode, metaclass=_SealedClass):
    """A ``TCPNode`` decoded from peer data (the member set in a dump); equal to the same address's node."""


class PeerStoreNode(_EncodesAsItsBase, StoreNode, metaclass=_SealedClass):
    """A :class:`StoreNode` decoded from peer data (a membership change, the member set in a dump)."""


class _Latin1Bytes:
    """Protocol 2 spells a non-empty ``bytes`` as ``_codecs.encode(text, "latin1")``: only that."""

    __slots__ = ()

    def __call__(self, text: object, encoding: object = None, *rest: object) -> bytes:
        if rest or encoding not in ("latin1", "latin-1") or not isinstance(text, str):
            _refuse("_codecs.encode with other arguments than (str, 'latin1')")
        return text.encode("latin-1")


class _EmptyBytes:
    """Protocol 2 spells ``b""`` as ``bytes()``: only that."""

    __slots__ = ()

    def __call__(self, *args: object) -> bytes:
        if args:
            _refuse("bytes() with arguments")
        return b""


def _builtin(name: str, value: object) -> dict[tuple[str, str], object]:
    # Protocol 2 writes Python 2's module name; the C unpickler maps it only in the stock find_class.
    return {("builtins", name): value, ("__builtin__", name): value}


# (module, name) as written in the pickle -> what it decodes to. Exactly what PySyncObj 0.3.17 sends
# with our configuration: bytes (commands, keys, snapshot chunks), the member set of a dump and its nodes.
ADMITTED: dict[tuple[str, str], object] = {
    ("_codecs", "encode"): _Latin1Bytes(),
    **_builtin("bytes", _EmptyBytes()),
    **_builtin("set", set),
    ("pysyncobj.node", "TCPNode"): PeerTCPNode,
    ("mqha.controller.raft.members", "StoreNode"): PeerStoreNode,
}


class PeerUnpickler(pickle.Unpickler):
    """Unpickles peer data, resolving globals only through :data:`ADMITTED`."""

    def find_class(self, module: str, name: str) -> Any:
        """Overrides ``pickle.Unpickler.find_class``: the allow-list instead of importing anything."""
        try:
            return ADMITTED[(module, name)]
        except KeyError:
            _refuse(f"global {module}.{name}")

    def persistent_load(self, pid: Any) -> NoReturn:
        """Overrides ``pickle.Unpickler.persistent_load``: PySyncObj never sends persistent ids."""
        _refuse("a persistent id")


def restricted_loads(data: bytes | str) -> Any:
    """Decode one pickle from a peer (or written from peer data). Raises ``RefusedPeerData``."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8")  # as pysyncobj.pickle.to_bytes
    return PeerUnpickler(io.BytesIO(raw)).load()


def restricted_load(file: IO[bytes]) -> Any:
    """Decode one pickle from a file (PySyncObj's dump). Raises ``RefusedPeerData``."""
    return PeerUnpickler(file).load()


class RefusalLog:
    """Logs refused peer data at most once per ``interval`` seconds, with the count left unlogged."""

    def __init__(self, interval: float = REFUSAL_LOG_INTERVAL, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()  # the tick thread decodes; tests may too
        self._next_at: float | None = None
        self._unlogged = 0

    def refused(self, exc: RefusedPeerData) -> bool:
        """Note one refusal; True when it was logged."""
        with self._lock:
            now = self.clock()
            if self._next_at is not None and now < self._next_at:
                self._unlogged += 1
                return False
            unlogged, self._unlogged = self._unlogged, 0
            self._next_at = now + self.interval
        log.warning(
            "%s; the frame's connection is closed (a log entry or dump is not used)%s. Further "
            "refusals within %.0f s are only counted",
            exc,
            f"; {unlogged} more were refused since the last such line" if unlogged else "",
            self.interval,
        )
        return True


REFUSALS = RefusalLog()


def peer_loads(data: bytes | str) -> Any:
    """``pysyncobj.pickle.loads`` once :func:`install` ran: restricted, refusals logged (rate-limited)."""
    try:
        return restricted_loads(data)
    except RefusedPeerData as exc:
        REFUSALS.refused(exc)
        raise


def peer_load(file: IO[bytes]) -> Any:
    """``pysyncobj.pickle.load`` once :func:`install` ran: restricted, refusals logged (rate-limited)."""
    try:
        return restricted_load(file)
    except RefusedPeerData as exc:
        REFUSALS.refused(exc)
        raise


def install() -> None:
    """Make every PySyncObj decode in this process restricted. Idempotent; never undone."""
    pysyncobj.pickle.loads = peer_loads
    pysyncobj.pickle.load = peer_load
    pysyncobj.journal.loads = peer_loads  # type: ignore[attr-defined]


def installed() -> bool:
    """True when every PySyncObj decode site we know of goes through the restricted decoder."""
    return (
        pysyncobj.pickle.loads is peer_loads
        and pysyncobj.pickle.load is peer_load
        and pysyncobj.journal.loads is peer_loads  # type: ignore[attr-defined]
    )
