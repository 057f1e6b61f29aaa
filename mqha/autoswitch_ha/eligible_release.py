"""The master's ELR release (shell; docs/architecture.md §3.2).

A replica the controller keeps *eligible* (ELR) after it left the SyncStateSet is credited with the
acknowledged offset at its departure; the controller may elect it while it holds that much. The credit
is only true while the master acknowledges nothing beyond it, and the controller cannot see the
master's acks as they happen. So before a master answers a put past the credits -- the first put
after it became master, and the first after each confirmed shrink -- the controller empties the ELR
(an alterSyncStateSet with ``releaseEligible``) and the put waits for that verdict. While the group is
idle the credits stay, and a replica that stopped cleanly stays electable when the master is lost.

``arm`` marks a release needed after a confirmed shrink (an election empties the ELR itself);
``wait`` is the put path's check (it asks when a put needs the release; one attribute read when
nothing is needed); ``done`` is the controller's verdict, which counts only for this master term and for a
SyncStateSet epoch at or after the one that armed it (a release answered for an older set does not
cover a later shrink).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)

RETRY_AFTER_S = 0.05
"""After a refused or failed release, the next ask waits this long (no request storm while the
controller is unreachable)."""

ASK_AGAIN_AFTER_S = 1.0
"""An ask still unanswered after this long is repeated (a request the agent dropped, e.g. while its role
change was superseded)."""


@runtime_checkable
class ReleaseRequester(Protocol):
    """Takes release requests to the controller (the ReplicasManager, through the broker)."""

    def release_eligible_replicas(self, master_epoch: int) -> None: ...


class EligibleRelease:
    """Whether this master must have the ELR released before its next acknowledgement."""

    def __init__(self, requester: ReleaseRequester | None) -> None:
        self._requester = requester
        self.needed = False
        self._master_epoch = -1
        self._sync_state_set_epoch = -1
        self._next_ask = 0.0  # monotonic seconds: when a waiter may ask (again)
        self._changed = asyncio.Event()

    def arm(self, master_epoch: int, sync_state_set_epoch: int) -> None:
        """Acks beyond the credits need a release as of this master term and set epoch."""
        if self._requester is None:
            return  # no controller agent (tests of the HA layer alone): nothing to release
        self.needed = True
        self._master_epoch = master_epoch
        self._sync_state_set_epoch = max(sync_state_set_epoch, self._sync_state_set_epoch)
        self._next_ask = 0.0

    def disarm(self) -> None:
        """No longer master: nothing to release; waiting puts fail on the role check."""
        self.needed = False
        self._sync_state_set_epoch = -1
        self._changed.set()

    def done(self, master_epoch: int, sync_state_set_epoch: int, ok: bool) -> None:
        """The controller's verdict on a release asked for ``master_epoch``."""
        if not self.needed or master_epoch != self._master_epoch:
            return
        if ok and sync_state_set_epoch >= self._sync_state_set_epoch:
            self.needed = False
            log.info("eligible replicas released (masterEpoch %d)", master_epoch)
        else:  # refused, failed, or for an older set: ask again, a little later
            self._next_ask = min(self._next_ask, time.monotonic() + RETRY_AFTER_S)
        self._changed.set()

    async def wait(self, timeout_s: float) -> bool:
        """True once no release is needed; False after ``timeout_s`` (the put is not acknowledged)."""
        deadline = time.monotonic() + timeout_s
        while self.needed:
            now = time.monotonic()
            if now >= self._next_ask:
                self._ask()
            left = min(deadline, self._next_ask) - now
            if now >= deadline:
                return False
            self._changed.clear()
            try:
                async with asyncio.timeout(max(left, 0.001)):
                    await self._changed.wait()
            except TimeoutError:
                continue  # time to ask again, or the deadline: the loop decides
        return True

    def _ask(self) -> None:
        assert self._requester is not None
        self._next_ask = time.monotonic() + ASK_AGAIN_AFTER_S
        try:
            self._requester.release_eligible_replicas(self._master_epoch)
        except Exception:
            log.exception("asking for the eligible replicas' release failed")
            self._next_ask = time.monotonic() + RETRY_AFTER_S
