"""The broker's integrity task: the commit log's scrub, and repair of damaged records from another
replica (docs/architecture.md §4.7). SHELL.

- **Scrub.** A ``commitlog.scrub.Scrubber`` step every so often, paced to ``scrubCommitLogBytesPerSecond``
  (0: off), each in a worker thread: oldest segment first, pass after pass, at least
  ``PASS_PAUSE_S`` between passes. Reads and the HA read path find damaged records too; every finder
  notes them in the log (``CommitLog.bad_records``).
- **Damaged.** While a damaged record is known the broker says so: ``/healthz`` 503 with the reason,
  ``/v1/status`` ``integrity``, the metrics below, and its heartbeats report ``lossyRecovery`` with
  ``maxOffset`` at the first damaged record (``hooks_impl.BrokerRuntime.progress``), so the controllers'
  election rule (§3.2) takes it for an incomplete replica: never elected over a complete one. A slave
  also stops replicating (``HAClient.hold``): it acknowledges nothing, and its master takes it out of
  the SyncStateSet after ``haMaxTimeSlaveNotCatchup``. ``on_change`` tells the broker when that starts
  and ends (an immediate heartbeat).
- **Repair.** Each damaged record is asked for, in turn, from the other replicas of the set (the
  in-sync ones first, the master first among them; the controllers' sync-state-data), with
  ``GET /v1/log/record?offset=`` (the read credentials, TLS as configured). A peer serves the record
  only when its own copy passes every check and lies below its read limit (the confirm offset), so the
  bytes are the group's acknowledged ones; ``CommitLog.rewrite_unit`` checks them again (one whole
  message, its physicalOffset, CRCs, where the next unit starts) before it writes them in place and
  fsyncs. Then the queue index is rebuilt (``log_generation``). Attempts repeat every
  ``REPAIR_RETRY_S`` while any damaged record is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import aiohttp
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mqha.broker.commitlog.scrub import Scrubber
from mqha.broker.store import BrokerStore
from mqha.clock import wall_ms
from mqha.errors import StorageError
from mqha.security.basic import basic_header
from mqha.security.credentials import parse_user
from mqha.security.tls import client_context, scheme_of

log = logging.getLogger(__name__)

RECORD_PATH = "/v1/log/record"
STEP_BYTES = 256 * 1024  # one scrub step reads at most this much (less at a low rate)
PASS_PAUSE_S = 1.0
REPAIR_RETRY_S = 2.0
IDLE_CHECK_S = 1.0  # the HA read path notes damage in the log without a call here: look this often
FETCH_TIMEOUT_S = 5.0


class IntegrityTask:
    """Runs the scrub and the repairs of one broker's commit log."""

    def __init__(
        self,
        store: BrokerStore,
        config: Mapping[str, Any],
        *,
        peers: Callable[[], Sequence[str]] = tuple,
        on_change: Callable[[str | None], None] | None = None,
    ) -> None:
        self.store = store
        self.rate = int(config.get("scrubCommitLogBytesPerSecond", 0))
        self.own_address = f"{config['brokerIP1']}:{config['listenPort']}"
        user = config.get("initAuthenticationUser") if config.get("authenticationEnabled") else None
        self._authorization = basic_header(parse_user(user)) if user else None
        self._ssl = client_context(config)
        self._peers = peers
        self._on_change = on_change
        self.scrubber = Scrubber(store.log)
        self.verified_bytes = 0
        self.passes = 0
        self.last_pass_end_ms: int | None = None
        self.found = 0  # damaged records found since start (any finder)
        self.repaired: deque[dict[str, Any]] = deque(maxlen=16)  # the last repairs: offset, source, at
        self.repaired_total = 0
        self.last_repair_error: str | None = None
        self._seen: set[int] = set()
        self._reported: str | None = None
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._step: asyncio.Future[Any] | None = None  # the scrub step running in a worker thread

    # -- the broker's view ----------------------------------------------------------------------

    def damage(self) -> str | None:
        """Why this replica is damaged now (a one-line reason), or None."""
        bad = self.store.log.bad_records()
        if not bad:
            return None
        first = min(bad)
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        return f"damaged commit-log record at offset {first} ({bad[first]}){more}; repairing from a replica"

    def status(self) -> dict[str, Any]:
        """``/v1/status`` ``integrity``."""
        bad = self.store.log.bad_records()
        return {
            "damagedRecords": [{"offset": at, "reason": why} for at, why in sorted(bad.items())],
            "damaged": self.damage(),
            "scrubBytesPerSecond": self.rate,
            "scrubPosition": self.scrubber.position,
            "scrubPasses": self.passes,
            "scrubVerifiedBytes": self.verified_bytes,
            "lastPassEndMs": self.last_pass_end_ms,
            "found": self.found,
            "repaired": list(self.repaired),
            "repairedTotal": self.repaired_total,
            "lastRepairError": self.last_repair_error,
        }

    def notice(self) -> None:
        """A reader or the HA path met a damaged record: publish it and try a repair now."""
        self._wake.set()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._repair_loop(), name="repair"),
                asyncio.create_task(self._scrub_loop(), name="scrub"),
            ]

    def set_rate(self, rate: int) -> None:
        """``scrubCommitLogBytesPerSecond`` changed at run time (``updateBrokerConfig``): taken at the
        next step; 0 pauses the scrub where it is."""
        self.rate = rate

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._step is not None:  # its thread still reads through the scrubber's file handle
            with contextlib.suppress(Exception):
                await self._step
        self.scrubber.close()

    # -- the scrub -------------------------------------------------------------------------------

    async def _scrub_loop(self) -> None:
        while True:
            if self.rate <= 0:  # off (maybe turned on later)
                await asyncio.sleep(PASS_PAUSE_S)
                continue
            step_bytes = max(4096, min(STEP_BYTES, self.rate // 4))
            started = time.monotonic()
            try:
                self._step = asyncio.ensure_future(asyncio.to_thread(self.scrubber.step, step_bytes))
                step = await asyncio.shield(self._step)
            except (OSError, StorageError) as exc:  # a closed log at shutdown, an unreadable file
                log.warning("scrub step at %d failed: %s", self.scrubber.position, exc)
                await asyncio.sleep(PASS_PAUSE_S)
                continue
            self.verified_bytes += step.read
            if step.found:
                self._wake.set()
            if step.pass_done:
                self.passes += 1
                self.last_pass_end_ms = wall_ms()
                await asyncio.sleep(PASS_PAUSE_S)
                continue
            await asyncio.sleep(max(0.0, step.read / max(1, self.rate) - (time.monotonic() - started)))

    # -- damage and repair -----------------------------------------------------------------------

    async def _repair_loop(self) -> None:
        while True:
            self._publish()
            bad = self.store.log.bad_records()
            for offset in sorted(bad):
                await self._repair(offset)
            self._publish()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), REPAIR_RETRY_S if bad else IDLE_CHECK_S)

    def _publish(self) -> None:
        """Count new damaged records and tell the broker when the damage starts, moves or ends."""
        bad = self.store.log.bad_records()
        for offset in bad.keys() - self._seen:
            self.found += 1
            log.error("DAMAGED RECORD at commit-log offset %d: %s", offset, bad[offset])
        self._seen = set(bad)
        reason = self.damage()
        if reason != self._reported:
            self._reported = reason
            if self._on_change is not None:
                self._on_change(reason)

    async def _repair(self, offset: int) -> bool:
        if await asyncio.to_thread(self.store.log.confirm_damage, offset) is None:
            return True  # sound again, or no longer in the log (cut, retained): nothing to repair
        sources = [peer for peer in self._peers() if peer != self.own_address]
        if not sources:
            self.last_repair_error = f"offset {offset}: no other replica known to repair from"
            return False
        problems = []
        for peer in sources:
            try:
                data = await self._fetch(peer, offset)
                await asyncio.to_thread(self.store.log.rewrite_unit, offset, data)
            except Exception as exc:  # a peer that cannot help: ask the next one
                problems.append(f"{peer}: {exc}")
                continue
            self.store.log_generation += 1  # the queue index takes the record at its next read
            self.repaired.append({"offset": offset, "source": peer, "atMs": wall_ms()})
            self.repaired_total += 1
            self.last_repair_error = None
            log.warning(
                "REPAIRED the damaged record at commit-log offset %d with the copy of %s", offset, peer
            )
            return True
        self.last_repair_error = f"offset {offset}: " + "; ".join(problems)
        log.warning("cannot repair the record at commit-log offset %d yet: %s", offset, "; ".join(problems))
        return False

    async def _fetch(self, peer: str, offset: int) -> bytes:
        headers = {"Authorization": self._authorization} if self._authorization else {}
        url = f"{scheme_of(self._ssl)}://{peer}{RECORD_PATH}?offset={offset}"
        timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers=headers, ssl=self._ssl or False) as response,
        ):
            body = await response.read()
            if response.status != 200:
                raise OSError(f"HTTP {response.status}: {body[:300].decode('utf-8', 'replace')}")
            return body


class IntegrityCollector(Collector):
    """The scrub's and the repairs' metrics (docs/metrics.md)."""

    def __init__(self, broker_name: str, task: IntegrityTask) -> None:
        self.broker_name = broker_name
        self.task = task

    def collect(self) -> Iterator[Metric]:
        task, name = self.task, self.broker_name
        damaged = GaugeMetricFamily(
            "mqha_broker_commitlog_damaged_records",
            "damaged commit-log records known now (found by the scrub, a read or the HA path; not repaired)",
            labels=["broker_name"],
        )
        damaged.add_metric([name], float(len(task.store.log.bad_records())))
        yield damaged
        for metric, doc, value in (
            ("mqha_broker_commitlog_damaged_records_found", "damaged records found since start", task.found),
            (
                "mqha_broker_commitlog_records_repaired",
                "damaged records repaired from another replica",
                task.repaired_total,
            ),
            (
                "mqha_broker_scrub_verified_bytes",
                "bytes the scrub verified (CRCs) since start",
                task.verified_bytes,
            ),
            (
                "mqha_broker_scrub_passes",
                "complete scrub passes over the commit log since start",
                task.passes,
            ),
        ):
            counter = CounterMetricFamily(metric, doc, labels=["broker_name"])
            counter.add_metric([name], float(value))
            yield counter
