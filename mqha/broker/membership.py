"""Which controller broker ids belong to this broker set: the HA master's handshake check. SHELL.

The master refuses an HA handshake from a broker id the controller never registered in this set
(a misconfigured broker of another set, or a stray process). The registered ids come from the
controller's sync-state-data (``inSyncReplicas`` + ``notInSyncReplicas``), cached and refreshed in the
background: at start, every ``refresh_interval_s``, and (at most four times a second) when an
unknown id knocks. A refused slave retries within a second, so a freshly registered replica is
admitted as soon as the cache catches up. The controllers are asked with the one leader-following
policy (``mqha.controller_client``): one round, the last known leader first, not-leader hints
followed, no pause (the next refresh is the retry).

Fail-open while the set's membership was never learned (controllers unreachable since start): the
replication of a live master must not depend on the controllers being up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from ssl import SSLContext

from mqha.autoswitch_ha.server import cancel_and_wait
from mqha.controller_client.caller import LeaderCaller, Signer
from mqha.controller_client.policy import Policy, parse_addresses
from mqha.wire.controller_api import ReplicasInfo, SyncStateDataPayload

log = logging.getLogger(__name__)

MIN_REFRESH_GAP_S = 0.25  # an unknown id asks the controller again at most this often
POLICY = Policy(rounds=1, discover=False, max_redirects=2)
TIMEOUT_S = 1.0


class BrokerSetMembers:
    """Caches the broker ids the controller registered in this broker set."""

    def __init__(
        self,
        controller_addresses: Iterable[str],
        broker_name: str,
        refresh_interval_s: float = 5.0,
        signer: Signer | None = None,
        ssl: SSLContext | None = None,
    ):
        self.addresses = parse_addresses(controller_addresses)
        self.broker_name = broker_name
        self.refresh_interval_s = refresh_interval_s
        self.known: set[int] | None = None  # None: never learned
        self._sources: tuple[str, ...] = ()  # broker API addresses to repair from (repair_sources)
        # Unknown ids that knocked, and when first: one still unknown after a later refresh is a
        # broker the controller never registered in this set (warned once), not a cache lag.
        self._knocked: dict[int, float] = {}
        self._warned: set[int] = set()
        self._last_attempt = 0.0
        self._refreshing: asyncio.Task[None] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._caller = LeaderCaller(
            self.addresses,
            POLICY,
            call_timeout_s=TIMEOUT_S,
            connect_timeout_s=TIMEOUT_S,
            signer=signer,
            ssl=ssl,
        )

    def is_known(self, broker_id: int) -> bool:
        if self.known is None:
            self.refresh_soon()
            return True
        if broker_id in self.known:
            return True
        self._knocked.setdefault(broker_id, time.monotonic())
        self.refresh_soon()
        return False

    def repair_sources(self) -> tuple[str, ...]:
        """The set's alive replicas' broker API addresses, to repair a damaged record from
        (docs/architecture.md §4.7): the in-sync ones first, the master first among them."""
        return self._sources

    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._loop(), name="broker-set-members")

    async def stop(self) -> None:
        for task in (self._loop_task, self._refreshing):
            if task is not None:
                await cancel_and_wait(task)
        self._loop_task = self._refreshing = None
        await self._caller.close()

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
        """Ask the controller leader for this set's sync-state-data; keep the old view on failure."""
        asked = time.monotonic()
        try:
            answer = await self._caller.call(
                "GET", "/v1/sync-state-data", params={"brokerName": self.broker_name}
            )
            if not answer.reply.ok:
                log.debug("membership refresh: %s %s", answer.reply.code.name, answer.reply.remark)
                return
            table = SyncStateDataPayload.from_json(answer.reply.payload).replicas_info_table
        except Exception as exc:  # membership is advisory; never let it break the broker
            log.debug("membership refresh failed: %s", exc)
            return
        entry = table.get(self.broker_name)
        replicas = () if entry is None else (*entry.in_sync_replicas, *entry.not_in_sync_replicas)
        ids = {replica.broker_id for replica in replicas}
        self._sources = _repair_order(entry) if entry is not None else ()
        if ids != self.known:
            log.info("broker set %s members: %s", self.broker_name, sorted(ids))
        self.known = ids
        for broker_id, since in list(self._knocked.items()):
            if broker_id in ids:
                del self._knocked[broker_id]
            elif since < asked and broker_id not in self._warned:
                self._warned.add(broker_id)
                log.warning(
                    "broker id %d asks to replicate from this master, but the controller has not "
                    "registered it in broker set %s (a broker of another set, or a stray process?)",
                    broker_id,
                    self.broker_name,
                )


def _repair_order(entry: ReplicasInfo) -> tuple[str, ...]:
    in_sync = sorted(
        (r for r in entry.in_sync_replicas if r.alive), key=lambda r: r.broker_id != entry.master_broker_id
    )
    others = [r for r in entry.not_in_sync_replicas if r.alive]
    return tuple(dict.fromkeys(r.broker_address for r in (*in_sync, *others)))
