"""Acts on ``SignatureWatch`` (shell): a node that cannot verify any broker's signature because of its
own clock alarms, reports unhealthy and, leading, hands leadership over (docs/architecture.md §12.2).

Checked once a second. A stall (signatures refused for their timestamps, none accepted) is only a
suspicion: one broker with a skewed clock looks the same while the others' sessions sign nothing. So
the guard asks the other controllers for their time (the ``Date`` header of ``GET /healthz``) and acts
only when the median of them is over half the window from this node's clock (``own_clock_off``). Then:
one ERROR line when the alarm starts (and one when it ends), ``/healthz`` 503, a leader asks Raft to
transfer leadership at most once per ``controllerSignatureStallMills``, and the node stands for no
election (it still votes and follows). The alarm lasts until the clock checks out again
(``clock_alarm``: a signature verifies, or the peers' clocks agree), so the peers are asked every round
while it lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from email.utils import parsedate_to_datetime

import aiohttp

from mqha.clock import wall_ms
from mqha.controller.auth import ControllerAuth
from mqha.controller.parts import NodeParts
from mqha.controller.signature_watch import clock_alarm
from mqha.security.signing import REPLAY_WINDOW_MS
from mqha.security.tls import client_context, scheme_of

log = logging.getLogger(__name__)

CHECK_S = 1.0
PEER_TIMEOUT_S = 1.0


class ClockGuard:
    """Watches ``auth.watch``, confirms a stall with the peers' clocks, steps a stalled leader down."""

    def __init__(self, parts: NodeParts, auth: ControllerAuth) -> None:
        self.parts = parts
        self.auth = auth
        self.alarmed = False
        self.handovers = 0
        self.peer_offsets_ms: list[int] = []  # the last answers: each peer's clock minus ours
        self._last_handover_ms: int | None = None
        self._verified_at_alarm = 0  # the watch's verified count when the alarm started
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
                stalled = self.auth.enabled and self.auth.signatures_stalled()
                if stalled or self.alarmed:
                    self.peer_offsets_ms = await self.peer_offsets()
                self.check(stalled)
            except Exception:  # a guard that dies would hide the next stall
                log.exception("clock guard check failed")

    async def peer_offsets(self) -> list[int]:
        """Each answering peer's wall clock minus ours, in ms (its ``Date`` header: to the second)."""
        context = client_context(self.parts.config)
        others = [p for p in self.parts.peers if p is not self.parts.self_peer]
        timeout = aiohttp.ClientTimeout(total=PEER_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            answers = await asyncio.gather(
                *(
                    self._offset(session, f"{scheme_of(context)}://{p.api_address}/healthz", context)
                    for p in others
                )
            )
        return [a for a in answers if a is not None]

    @staticmethod
    async def _offset(session: aiohttp.ClientSession, url: str, context: object) -> int | None:
        try:
            async with session.get(url, ssl=context if context is not None else False) as response:
                date = response.headers.get("Date")
                local = wall_ms()  # Date is whole seconds, sent as the answer was made
            return int(parsedate_to_datetime(date).timestamp() * 1000) + 500 - local if date else None
        except (aiohttp.ClientError, TimeoutError, ValueError, TypeError):
            return None

    def check(self, stalled: bool) -> None:
        """One round: ``stalled`` from the watch, the peers' offsets already asked when it is."""
        others = len(self.parts.peers) - 1
        off = clock_alarm(
            self.alarmed,
            stalled=stalled,
            verified_since_alarm=self.auth.watch.verified_total > self._verified_at_alarm,
            peer_offsets_ms=self.peer_offsets_ms,
            window_ms=REPLAY_WINDOW_MS,
            peers=others,
        )
        # Alone, abstaining would leave no one to lead; with peers, one of them leads meanwhile.
        self.parts.log.abstain("its wall clock is off (clock alarm)" if off and others else None)
        if off != self.alarmed:
            self.alarmed = off
            self._verified_at_alarm = self.auth.watch.verified_total
            if off:
                log.error(
                    "ALARM: no broker signature verified for %d ms while they keep failing on this node's "
                    "clock (last skew %s ms; the other controllers' clocks differ by %s ms): check this "
                    "node's wall clock; reporting unhealthy and standing for no election",
                    self.auth.signatures_stalled_ms(),
                    self.auth.watch.last_skew_ms,
                    self.peer_offsets_ms,
                )
            else:
                log.error("the clock alarm is over: signatures verify, or this clock agrees with its peers")
        if not off or not self.parts.log.is_serving_leader():
            return
        now = self.parts.clock.now_ms()
        if self._last_handover_ms is not None and now - self._last_handover_ms < self.auth.watch.stall_ms:
            return
        self._last_handover_ms = now
        self.handovers += 1
        log.error("this leader cannot verify any broker (its clock): handing leadership over")
        self.parts.log.transfer_leadership()
