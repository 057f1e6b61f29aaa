"""The HA connection state machine: every state and transition of both roles lives in this file.

Rules (h11 ``_state.py`` style, docs/architecture.md §11 rule 1):

* Nobody else assigns a connection state: ``master.py`` and ``slave.py`` own a
  :class:`ConnectionStateMachine` and call :meth:`ConnectionStateMachine.process` with a
  :class:`Trigger`; the table below says what happens.
* An illegal transition raises :class:`~mqha.errors.LocalProtocolError` naming the role, the state and
  the trigger, and leaves the state unchanged. The connection machines convert it to
  :class:`~mqha.errors.RemoteProtocolError` when a received frame caused it.

Theory of operation. The reference names five connection states (``HAConnectionState``: READY,
HANDSHAKE, TRANSFER, SUSPEND, SHUTDOWN); we give each a precise meaning per role and add ERROR, a
local-only state for a connection that failed (it never appears on the wire):

* master (one machine per accepted connection)
  READY --slave HandshakeRequest--> HANDSHAKE (offer sent) --first OffsetReport--> TRANSFER
* slave (one machine per TCP connection to the master)
  READY --connection made (handshake sent)--> HANDSHAKE --EpochHistoryOffer--> SUSPEND
  (the shell is truncating; no frame may arrive) --truncation done--> TRANSFER
* any open state --CLOSE--> SHUTDOWN (orderly: local close, peer EOF, idle timeout)
* any open state --FAIL--> ERROR (peer broke the protocol, or a local step such as truncation failed)

SHUTDOWN and ERROR are terminal: a new TCP connection gets a new machine. Wire state codes are not
derived from these enums; ``frames.py`` defines them as explicit numbers (docs/architecture.md §11 rule 7).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from mqha.errors import LocalProtocolError


class Role(Enum):
    """Names the end of an HA connection a machine runs: the master's or the slave's."""

    MASTER = "master"
    SLAVE = "slave"

    # Members are singletons: hash by identity in C. Enum's own __hash__ hashes the name in Python,
    # and the machines look states and triggers up several times per frame.
    __hash__ = object.__hash__


class ConnectionState(Enum):
    """Names the states of one HA connection (the module docstring gives each one's meaning per role)."""

    READY = "READY"
    HANDSHAKE = "HANDSHAKE"
    TRANSFER = "TRANSFER"
    SUSPEND = "SUSPEND"
    SHUTDOWN = "SHUTDOWN"
    ERROR = "ERROR"

    __hash__ = object.__hash__  # see Role

    def __repr__(self) -> str:
        return self.value


READY = ConnectionState.READY
HANDSHAKE = ConnectionState.HANDSHAKE
TRANSFER = ConnectionState.TRANSFER
SUSPEND = ConnectionState.SUSPEND
SHUTDOWN = ConnectionState.SHUTDOWN
ERROR = ConnectionState.ERROR

OPEN_STATES = frozenset({READY, HANDSHAKE, TRANSFER, SUSPEND})
TERMINAL_STATES = frozenset({SHUTDOWN, ERROR})


class Trigger(Enum):
    """What happened to a connection: a frame received, a local step finished, or an ending."""

    CONNECTION_MADE = "connection made"  # slave: TCP connected, handshake queued
    HANDSHAKE_REQUEST = "HandshakeRequest frame"  # master: the slave introduced itself
    EPOCH_HISTORY_OFFER = "EpochHistoryOffer frame"  # slave: the master's handshake answer
    TRUNCATION_DONE = "truncation done"  # slave: the shell applied TruncateTo
    OFFSET_REPORT = "OffsetReport frame"  # master: an ACK
    TRANSFER_BATCH = "TransferBatch frame"  # slave: data or heartbeat
    CLOSE = "close"
    FAIL = "failure"

    __hash__ = object.__hash__  # see Role

    def __repr__(self) -> str:
        return self.value


# Role -> state -> trigger -> next state, for the happy path; CLOSE/FAIL rows are added below so
# that the table stays the single complete description (a diagram script can read it).
_FORWARD: dict[Role, dict[ConnectionState, dict[Trigger, ConnectionState]]] = {
    Role.MASTER: {
        READY: {Trigger.HANDSHAKE_REQUEST: HANDSHAKE},
        HANDSHAKE: {Trigger.OFFSET_REPORT: TRANSFER},
        TRANSFER: {Trigger.OFFSET_REPORT: TRANSFER},
    },
    Role.SLAVE: {
        READY: {Trigger.CONNECTION_MADE: HANDSHAKE},
        HANDSHAKE: {Trigger.EPOCH_HISTORY_OFFER: SUSPEND},
        SUSPEND: {Trigger.TRUNCATION_DONE: TRANSFER},
        TRANSFER: {Trigger.TRANSFER_BATCH: TRANSFER},
    },
}


def _with_endings(
    forward: dict[Role, dict[ConnectionState, dict[Trigger, ConnectionState]]],
) -> dict[Role, dict[ConnectionState, dict[Trigger, ConnectionState]]]:
    table: dict[Role, dict[ConnectionState, dict[Trigger, ConnectionState]]] = {}
    for role, rows in forward.items():
        table[role] = {}
        for state in (READY, HANDSHAKE, TRANSFER, SUSPEND):
            row = dict(rows.get(state, {}))
            if row or state in rows:
                row[Trigger.CLOSE] = SHUTDOWN
                row[Trigger.FAIL] = ERROR
                table[role][state] = row
    return table


TRANSITIONS = _with_endings(_FORWARD)
"""Role -> state -> trigger -> next state. A state missing from a role's rows is unreachable for it."""

FRAME_TRIGGERS = frozenset(
    {Trigger.HANDSHAKE_REQUEST, Trigger.EPOCH_HISTORY_OFFER, Trigger.OFFSET_REPORT, Trigger.TRANSFER_BATCH}
)


def expected_frames(role: Role, state: ConnectionState) -> frozenset[Trigger]:
    """The frame triggers the table accepts for ``role`` in ``state`` (used to reject out-of-order frames)."""
    return frozenset(t for t in TRANSITIONS[role].get(state, {}) if t in FRAME_TRIGGERS)


def expected_codes(role: Role, codes: Mapping[Trigger, int]) -> dict[ConnectionState, frozenset[int]]:
    """:func:`expected_frames` for every state as wire codes (``codes``: frame trigger -> its code),
    computed once: a connection looks it up per frame."""
    return {state: frozenset(codes[t] for t in expected_frames(role, state)) for state in ConnectionState}


class ConnectionStateMachine:
    """The state of one HA connection seen from one role; changes only through :meth:`process`."""

    def __init__(self, role: Role) -> None:
        self.role = role
        self._state = READY

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def is_open(self) -> bool:
        return self._state in OPEN_STATES

    def can(self, trigger: Trigger) -> bool:
        return trigger in TRANSITIONS[self.role].get(self._state, {})

    def process(self, trigger: Trigger) -> ConnectionState:
        """Apply ``trigger``; raise :class:`LocalProtocolError` (state unchanged) when illegal."""
        row = TRANSITIONS[self.role].get(self._state, {})
        if trigger not in row:
            raise LocalProtocolError(
                f"can't handle {trigger.value} when role={self.role.value} and state={self._state.value}"
            )
        self._state = row[trigger]
        return self._state

    def __repr__(self) -> str:
        return f"ConnectionStateMachine(role={self.role.value}, state={self._state.value})"
