"""Which controller broker ids belong to this broker set: the HA master's handshake check. SHELL.

The master refuses an HA handshake from a broker id the controller never registered in this set
(a misconfigured broker of another set, or a stray process). The registered ids come from the
controller's sync-state-data (``inSyncReplicas`` + ``notInSyncReplicas``), cached and refreshed in the
background: at start, every ``refresh_interval_s``, and (at most four times a second) when an
unknown id knocks. A refused slave retries within a second, so a freshly registered replica is
admitted as soon as the cache catches up.

Fail-open while the set's membership was never learned (controllers unreachable since start): the
replication of a live master must not depend on the controllers being up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

import aiohttp

from mqha.autoswitch_ha.server import cancel_and_wait

log = logging.getLogger(__name__)

MIN_REFRESH_GAP_S = 0.25  # an unknown id asks the controller again at most this often


class BrokerSetMembers:
    def __init__(
        self, controller_addresses: Iterable[str], broker_name: str, refresh_interval_s: float = 5.0
    ):
        self.addresses = [a.strip() for a in controller_addresses if a.strip()]
        self.broker_name = broker_name
        self.refresh_interval_s = refresh_interval_s
        self.known: set[int] | None = None  # None: never learned
        self._last_attempt = 0.0
        self._refreshing: asyncio.Task[None] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._leader: str | None = None

    def is_known(self, broker_id: int) -> bool:
        if self.known is None:
            self.refresh_soon()
            return True
        if broker_id in self.known:
            return True
        self.refresh_soon()
        return False

    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._loop(), name="broker-set-members")

    async def stop(self) -> None:
        for task in (self._loop_task, self._refreshing):
            if task is not None:
                await cancel_and_wait(task)
        self._loop_task = self._refreshing = None

    def refresh_soon(self) -> None:
        now = time.monotonic()
        if now - self._last_attempt < MIN_REFRESH_GAP_S:
            return
        if self._refreshing is not None and not self._refreshing.done():
            return
        self._last_attempt = now
        self._refreshing = asyncio.get_running_loop().create_task(self.refresh())

    async def _loop(self) -> None:
        while True:
            self._last_attempt = time.monotonic()
            await self.refresh()
            await asyncio.sleep(self.refresh_interval_s)

    async def refresh(self) -> None:
        """Ask the controllers (the last known leader first, following not-leader redirects)."""
        candidates = ([self._leader] if self._leader else []) + [
            a for a in self.addresses if a != self._leader
        ]
        timeout = aiohttp.ClientTimeout(total=1.0)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                for address in candidates:
                    ids = await self._ask(session, address, redirects=2)
                    if ids is not None:
                        if ids != self.known:
                            log.info("broker set %s members: %s", self.broker_name, sorted(ids))
                        self.known = ids
                        return
        except Exception as exc:  # membership is advisory; never let it break the broker
            log.debug("membership refresh failed: %s", exc)

    async def _ask(self, session: aiohttp.ClientSession, address: str, redirects: int) -> set[int] | None:
        url = f"http://{address}/v1/sync-state-data"
        try:
            async with session.get(url, params={"brokerName": self.broker_name}) as response:
                body: Any = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        if not isinstance(body, dict):
            return None
        leader = body.get("leaderAddress")
        if response.status == 421 and isinstance(leader, str) and leader != address and redirects > 0:
            self._leader = leader
            return await self._ask(session, leader, redirects - 1)
        if response.status != 200:
            return None
        self._leader = address
        entry = (body.get("replicasInfoTable") or {}).get(self.broker_name)
        if not isinstance(entry, dict):
            return set()
        ids = set()
        for key in ("inSyncReplicas", "notInSyncReplicas"):
            for replica in entry.get(key) or []:
                if isinstance(replica, dict) and isinstance(replica.get("brokerId"), int):
                    ids.add(replica["brokerId"])
        return ids
