"""What both ends of one HA connection share (core; docs/reference-behaviour.md §11). No sockets, clocks
or files.

``MasterConnection`` (``master.py``) and ``SlaveConnection`` (``slave.py``) are each a
:class:`Connection`: one :class:`~mqha.autoswitch_ha.state.ConnectionStateMachine` for their role, the
queue of events for the shell, the wire codes each state accepts, and the one way a connection ends
(a terminal state, nothing more to send, a :class:`ConnectionClosed` event).
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

from mqha.autoswitch_ha.events import ConnectionClosed
from mqha.autoswitch_ha.frames import CODE_HANDSHAKE, CODE_TRANSFER
from mqha.autoswitch_ha.state import ConnectionState, ConnectionStateMachine, Role, Trigger, expected_codes

FRAME_CODES = {
    Trigger.HANDSHAKE_REQUEST: CODE_HANDSHAKE,
    Trigger.EPOCH_HISTORY_OFFER: CODE_HANDSHAKE,
    Trigger.OFFSET_REPORT: CODE_TRANSFER,
    Trigger.TRANSFER_BATCH: CODE_TRANSFER,
}
"""The wire code of each frame trigger (frames.py defines the codes, state.py the triggers)."""

EXPECTED_CODES = {role: expected_codes(role, FRAME_CODES) for role in Role}
"""Role -> state -> the wire codes a frame may have there, computed once: a connection looks it up
per frame."""

E = TypeVar("E")


class Connection(Generic[E]):
    """Owns an HA connection's state machine, its event queue and its ending, for either role."""

    def __init__(self, role: Role) -> None:
        self._machine = ConnectionStateMachine(role)
        self._events: deque[E | ConnectionClosed] = deque()

    @property
    def state(self) -> ConnectionState:
        return self._machine.state

    @property
    def is_open(self) -> bool:
        return self._machine.is_open

    def _end(self, trigger: Trigger, reason: str, error: Exception | None = None) -> None:
        self._machine.process(trigger)
        self._drop_pending()
        self._events.append(ConnectionClosed(reason=reason, error=error))

    def _drop_pending(self) -> None:
        """Forget what a finished connection will never send or wait for (each role has its own)."""

    def _fail(self, error: Exception) -> None:
        self._end(Trigger.FAIL, str(error), error)
