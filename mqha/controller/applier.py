"""The state machine behind the replicated log: holds the current ``ControllerState`` (shell glue).

``ControllerApplier`` implements ``mqha.controller.raft.Applier``. Each committed entry is decoded (an
entry that is no readable record stops the member: ``UnreadableEntry``, docs/raft.md §11) and applied by
the compare-and-set ``apply`` (never raises), and the resulting ``Outcome`` is returned, which
PySyncObj hands back to the proposer on this node (``ReplicatedLog.propose``), so the
reply of a write is built from what apply did (docs/raft.md §3).

Threads. ``apply``, ``snapshot`` and ``restore`` run on PySyncObj's tick thread. The state is an
immutable value and the applier only ever *replaces* its reference (one attribute store, atomic under
the GIL), so readers on the asyncio loop read ``applier.state`` without a lock and always see a whole
state as of some applied index.

``noop_record`` is the bytes of the leader barrier (a ``NoopRecord``): apply accepts it without
touching any group and only advances ``applied_index``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from mqha.controller.apply import Outcome, apply
from mqha.controller.raft.errors import DivergedState, UnreadableEntry
from mqha.controller.records import NoopRecord, RecordFormatError, decode_record, encode_record
from mqha.controller.state import SNAPSHOT_VERSION, ControllerState, decode_state, encode_state

log = logging.getLogger(__name__)

NOOP_RECORD: bytes = encode_record(NoopRecord(tag="leader-barrier"))
DIGEST_TAG = "state-digest"  # a no-op whose tag carries the leader's state digest (docs/raft.md §11)
DIGESTS_KEPT = 16  # this member's digests at the last digest records: the leader's comes one record later
# Digests are compared only between members whose code encodes states alike: a rolling upgrade that
# changes the encoding must not look like divergence.
DIGEST_SCHEME = f"s{SNAPSHOT_VERSION}"

OutcomeObserver = Callable[[Outcome], None]


class ControllerApplier:
    """Current controller state; the only writer is the tick thread, through :meth:`apply`/:meth:`restore`."""

    noop_record: bytes = NOOP_RECORD

    def __init__(self, state: ControllerState | None = None) -> None:
        self._state = ControllerState.empty() if state is None else state
        self._observers: list[OutcomeObserver] = []
        self.restores = 0
        self._digests: dict[int, str] = {}  # raft index of a digest record -> digest of the state before it
        self.last_digest: tuple[int, str] | None = None  # the newest of them
        self.digests_compared = 0

    @property
    def state(self) -> ControllerState:
        return self._state

    def add_observer(self, observer: OutcomeObserver) -> None:
        """Call ``observer(outcome)`` after each applied entry, ON THE TICK THREAD (post to a loop
        with ``call_soon_threadsafe`` if needed). Exceptions are logged and swallowed."""
        self._observers.append(observer)

    def apply(self, data: bytes, raft_index: int) -> Outcome:
        """Apply one committed entry. An entry that is not a record this node can read raises
        :class:`UnreadableEntry`: the member stops there (docs/raft.md §11). Skipping it as a no-op
        would leave this member's state behind its peers' for good (issue 45: a flipped ``{`` made an
        ElectMaster a no-op, and that member, once leader, rolled the master epoch back)."""
        try:
            record = decode_record(data)
        except RecordFormatError as exc:
            raise UnreadableEntry(f"not a record this controller can read: {exc}") from None
        except Exception as exc:  # decode_record should only raise RecordFormatError; stop all the same
            raise UnreadableEntry(f"not a record this controller can read: {type(exc).__name__}") from None
        if isinstance(record, NoopRecord) and record.tag.startswith(DIGEST_TAG):
            self._check_digest(record.tag, raft_index)
        state, outcome = apply(self._state, record, raft_index)
        self._state = state  # one reference store: loop-side readers see old or new, never a mix
        for observer in self._observers:
            try:
                observer(outcome)
            except Exception:  # an observer must not wedge the Raft node (docs/raft.md §4, P3)
                log.exception("outcome observer %r raised at raft index %d", observer, raft_index)
        return outcome

    def digest_record(self) -> bytes:
        """The next state-digest record, for the leader to propose (loop side; docs/raft.md §11).

        When applied at raft index M, every member notes the digest of its state before M; the record
        also carries this member's digest at the last digest record it applied, which every member
        compares with its own at that index."""
        last = self.last_digest
        tag = DIGEST_TAG if last is None else f"{DIGEST_TAG} {last[0]} {last[1]} {DIGEST_SCHEME}"
        return encode_record(NoopRecord(tag=tag))

    def _check_digest(self, tag: str, raft_index: int) -> None:
        """Tick thread: compare the leader's digest the record carries with ours at that index (raising
        :class:`DivergedState` when they differ), then note ours before this record."""
        claim = _digest_claim(tag)
        if claim is not None and (mine := self._digests.get(claim[0])) is not None:
            if mine != claim[1]:
                raise DivergedState(
                    f"the applied state before raft index {claim[0]} differs from the leader's "
                    f"(digest {mine} here, {claim[1]} on the leader)"
                )
            self.digests_compared += 1
        digest = state_digest(self._state)
        self._digests[raft_index] = digest
        for index in sorted(self._digests)[:-DIGESTS_KEPT]:
            del self._digests[index]
        self.last_digest = (raft_index, digest)

    def snapshot(self) -> bytes:
        return encode_state(self._state)

    def restore(self, data: bytes) -> None:
        # Raises SnapshotFormatError on foreign bytes; ReplicatedLog reports that as unhealthy.
        self._state = decode_state(data)
        self.restores += 1
        self._digests.clear()  # states before the snapshot are not ours to compare any more
        self.last_digest = None


def state_digest(state: ControllerState) -> str:
    """A digest of the whole applied state (its canonical encoding: equal states, equal digests)."""
    return hashlib.blake2b(encode_state(state), digest_size=16).hexdigest()


def _digest_claim(tag: str) -> tuple[int, str] | None:
    """``(raft index, digest)`` from ``state-digest <index> <digest> <scheme>``; None for a bare or foreign
    tag, or a digest of another scheme (a leader running code that encodes states otherwise)."""
    parts = tag.split()
    if len(parts) != 4 or parts[0] != DIGEST_TAG or not parts[1].isdigit() or parts[3] != DIGEST_SCHEME:
        return None
    return int(parts[1]), parts[2]
