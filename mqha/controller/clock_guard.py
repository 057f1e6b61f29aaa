"""Acts on ``SignatureWatch`` (shell): a node that cannot verify any broker's signature because of its
own clock alarms, reports unhealthy and, leading, hands leadership over (docs/architecture.md §12.2).

Checked once a second. The alarm is one ERROR line when a stall starts (and one when it ends) and the
``mqha_controller_signature_stalled_seconds`` gauge; a leader asks Raft to transfer leadership at most
once per ``controllerSignatureStallMills`` while the stall lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from mqha.controller.auth import ControllerAuth
from mqha.controller.parts import NodeParts

log = logging.getLogger(__name__)

CHECK_S = 1.0


class ClockGuard:
    """Watches ``auth.watch`` and steps a stalled leader down."""

    def __init__(self, parts: NodeParts, auth: ControllerAuth) -> None:
        self.parts = parts
        self.auth = auth
        self.alarmed = False
        self.handovers = 0
        self._last_handover_ms: int | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="clock-guard")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_S)
            try:
                self.check()
            except Exception:  # a guard that dies would hide the next stall
                log.exception("clock guard check failed")

    def check(self) -> None:
        stalled = self.auth.enabled and self.auth.signatures_stalled()
        if stalled != self.alarmed:
            self.alarmed = stalled
            if stalled:
                log.error(
                    "ALARM: no broker signature verified for %d ms while they keep failing on this node's "
                    "clock (last skew %s ms): check this node's wall clock; reporting unhealthy",
                    self.auth.signatures_stalled_ms(),
                    self.auth.watch.last_skew_ms,
                )
            else:
                log.error("broker signatures verify again: the clock alarm is over")
        if not stalled or not self.parts.log.is_serving_leader():
            return
        now = self.parts.clock.now_ms()
        if self._last_handover_ms is not None and now - self._last_handover_ms < self.auth.watch.stall_ms:
            return
        self._last_handover_ms = now
        self.handovers += 1
        log.error("this leader cannot verify any broker (its clock): handing leadership over")
        self.parts.log.transfer_leadership()
