"""The confirm offset, saved to the store a few times a second (shell; docs/reference-behaviour.md §14)."""

from __future__ import annotations

import asyncio
import logging

from mqha.autoswitch_ha.gate import AckGate
from mqha.autoswitch_ha.replica import ReplicaStore
from mqha.autoswitch_ha.server import cancel_and_wait

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 0.2


class ConfirmCheckpoint:
    """Saves the effective confirm offset to the store periodically and once more at stop."""

    def __init__(self, store: ReplicaStore, gate: AckGate, interval_s: float = CHECKPOINT_INTERVAL_S) -> None:
        self._store = store
        self._gate = gate
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="confirm-checkpoint")

    async def stop(self) -> None:
        """Stop the task and save the last value."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        self._store.save_confirm_offset(self._gate.confirm_offset())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                self._store.save_confirm_offset(self._gate.confirm_offset())
            except Exception:
                log.exception("persisting the confirm offset failed; will retry")
