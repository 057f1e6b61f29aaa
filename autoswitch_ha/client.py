"""Asyncio slave side of HA replication: connect to the master's HA address and replicate. SHELL.

:class:`HAClient` keeps one TCP connection to the master at a time and drives a fresh sans-IO
:class:`~autoswitch_ha.slave.SlaveConnection` per connection, built from the replica as it is at that
moment. Actions run strictly in the order the machine returns them (its docstring explains why):

    TruncateTo(o, epochs)  → save the epochs, cut the log to o → ``truncation_done`` (or ``_failed``)
    AppendEpoch(.., epochs)→ save the epochs
    AppendData(o, data)    → append the bytes verbatim → ``log_appended(new max)`` (which ACKs)
    SetConfirmOffset(o)    → store it
    ConnectionClosed       → close the socket; reconnect after ``reconnect_delay_ms``

The replica's storage is behind :class:`SlaveSide` (the ``AutoSwitchHAService`` over the broker
store). A failure of one connection (corrupt frame, refused handshake, unreachable master) is logged
once and retried; it never stops the broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from autoswitch_ha.events import AppendData, AppendEpoch, ConnectionClosed, SetConfirmOffset, TruncateTo
from autoswitch_ha.server import READ_CHUNK, TICK_MS, RateMeter, cancel_and_wait, drain_within, wait_event
from autoswitch_ha.slave import SlaveConfig, SlaveConnection
from epoch.history import EpochHistory
from mqha.clock import wall_ms

log = logging.getLogger(__name__)


class SlaveSide(Protocol):
    """The replica as the HA client sees it."""

    def local_broker_id(self) -> int | None: ...

    def replica_snapshot(self) -> tuple[EpochHistory, int, int]:
        """(epoch history, max offset, min offset) now."""

    async def apply_truncation(self, offset: int, epochs: EpochHistory) -> None: ...

    def append_epoch(self, epoch: int, start_offset: int, epochs: EpochHistory) -> None: ...

    async def append_data(self, offset: int, data: bytes) -> int:
        """Append replicated bytes; return the new log end."""

    def set_confirm_offset(self, offset: int) -> None: ...


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"HA address {address!r} is not host:port")
    return host, int(port)


class HAClient:
    """The slave's replication task (``AutoSwitchHAClient``)."""

    def __init__(
        self,
        side: SlaveSide,
        config: SlaveConfig,
        clock: Callable[[], int],
        *,
        reconnect_delay_ms: int = 1000,
        connect_timeout_ms: int = 3000,
        on_bytes: Callable[[int, int], None] | None = None,
    ) -> None:
        self.side = side
        self.config = config
        self._clock = clock
        self.reconnect_delay_ms = reconnect_delay_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._on_bytes = on_bytes
        self.master_address: str | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.conn: SlaveConnection | None = None  # the current connection's machine
        self.received = RateMeter()
        self.sent = RateMeter()
        self.last_read_wall_ms = 0
        self.last_write_wall_ms = 0
        self.sessions = 0  # connections that reached the master (tests, status)

    @property
    def is_running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def is_connected(self) -> bool:
        return self.conn is not None and self.conn.is_open

    def set_master_address(self, address: str | None) -> None:
        """Follow ``address`` (``host:port`` of the master's HA port); a change drops the connection."""
        if address != self.master_address:
            self.master_address = address
            if self.conn is not None:
                self.conn.close(f"master HA address changed to {address}")
            self._changed.set()

    def start(self) -> None:
        if not self.is_running:
            self._task = asyncio.create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        self.conn = None

    async def _run(self) -> None:
        failures = 0
        while True:
            address = self.master_address
            if not address:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                host, port = split_address(address)
                async with asyncio.timeout(self.connect_timeout_ms / 1000):
                    reader, writer = await asyncio.open_connection(host, port)
            except (OSError, TimeoutError, ValueError) as exc:
                # One line per outage, not one per retry.
                level = logging.INFO if failures == 0 else logging.DEBUG
                log.log(
                    level, "HA client: cannot connect to master %s: %s", address, exc or type(exc).__name__
                )
                failures += 1
            else:
                failures = 0
                try:
                    await self._session(address, reader, writer)
                except (ConnectionError, OSError) as exc:
                    log.info("HA client: connection to %s lost: %s", address, exc)
                except Exception:
                    # A bug must not end replication for good: log it, reconnect with a fresh machine.
                    log.exception("HA client: session with %s failed", address)
                finally:
                    self.conn = None
                    # abort: a finished connection's unsent bytes are useless, and a peer that stopped reading
                    # would otherwise keep the transport (and its buffer) alive.
                    writer.transport.abort()
            if self.master_address == address:
                self._changed.clear()
                await wait_event(self._changed, self.reconnect_delay_ms / 1000)

    async def _session(
        self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        broker_id = self.side.local_broker_id()
        if broker_id is None:
            log.warning("HA client: no controller broker id yet; not connecting to %s", address)
            return
        epochs, max_offset, min_offset = self.side.replica_snapshot()
        conn = SlaveConnection(
            broker_id=broker_id,
            epochs=epochs,
            max_offset=max_offset,
            min_offset=min_offset,
            config=self.config,
        )
        self.conn = conn
        self.sessions += 1
        wake = asyncio.Event()
        conn.connection_made(self._clock())
        log.info(
            "HA client: connected to master %s as broker %d (log ends at %d)", address, broker_id, max_offset
        )

        reader_task = asyncio.create_task(
            self._read_loop(conn, reader, wake), name=f"ha-client-read:{address}"
        )
        last_tick = self._clock()
        try:
            while True:
                if await self._run_actions(conn):
                    return
                out = conn.data_to_send()
                if out:
                    writer.write(out)
                    self.sent.add(len(out))
                    self.last_write_wall_ms = wall_ms()
                    if self._on_bytes is not None:
                        self._on_bytes(len(out), 0)
                    if not await drain_within(writer, self.config.housekeeping_interval_ms):
                        conn.close(
                            "the master stopped reading (send buffer full for the housekeeping interval)"
                        )
                now = self._clock()
                wait_ms = TICK_MS - (now - last_tick)
                if wait_ms > 0 and not wake.is_set():
                    await wait_event(wake, wait_ms / 1000)
                wake.clear()
                now = self._clock()
                if now - last_tick >= TICK_MS:
                    last_tick = now
                    self.received.roll()
                    self.sent.roll()
                    conn.tick(now)
        finally:
            await cancel_and_wait(reader_task)

    async def _read_loop(
        self, conn: SlaveConnection, reader: asyncio.StreamReader, wake: asyncio.Event
    ) -> None:
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if data:
                    self.received.add(len(data))
                    self.last_read_wall_ms = wall_ms()
                    if self._on_bytes is not None:
                        self._on_bytes(0, len(data))
                conn.receive_data(data, self._clock())
                wake.set()
                if not data:
                    return
        except (ConnectionError, OSError):
            conn.receive_data(b"", self._clock())
            wake.set()

    async def _run_actions(self, conn: SlaveConnection) -> bool:
        """Execute every pending action in order; True when the connection is over."""
        while (event := conn.next_event()) is not None:
            if not conn.is_open and not isinstance(event, ConnectionClosed):
                continue  # the connection ended (e.g. a failed append): the rest is fetched again
            if isinstance(event, AppendData):
                try:
                    new_max = await self.side.append_data(event.offset, event.data)
                except Exception as exc:  # bad bytes from the master: this connection only
                    log.error("HA client: appending %r failed: %s", event, exc)
                    conn.close(f"append at {event.offset} failed: {exc}")
                    continue
                conn.log_appended(new_max, self._clock())
            elif isinstance(event, SetConfirmOffset):
                self.side.set_confirm_offset(event.offset)
            elif isinstance(event, AppendEpoch):
                try:
                    self.side.append_epoch(event.epoch, event.start_offset, event.epochs)
                except Exception as exc:
                    log.error(
                        "HA client: saving epoch %d at %d failed: %s", event.epoch, event.start_offset, exc
                    )
                    conn.close(f"epoch file write failed: {exc}")
            elif isinstance(event, TruncateTo):
                try:
                    await self.side.apply_truncation(event.offset, event.epochs)
                except Exception as exc:
                    log.error("HA client: truncation to %d failed: %s", event.offset, exc)
                    conn.truncation_failed(exc)
                else:
                    conn.truncation_done(self._clock())
            else:
                assert isinstance(event, ConnectionClosed)
                level = logging.WARNING if event.error is not None else logging.INFO
                log.log(level, "HA client: connection to %s closed: %s", self.master_address, event.reason)
                return True
        return False
