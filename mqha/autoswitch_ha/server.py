"""Asyncio master side of HA replication: the accept loop and one task per slave connection. SHELL.

Each accepted socket gets a :class:`MasterLink` whose task drives one sans-IO
:class:`~mqha.autoswitch_ha.master.MasterConnection` in the order its docstring gives:

    bytes from the socket (a small reader task) → ``receive_data`` → wake the link
    every ``TICK_MS`` → ``tick`` (heartbeats, housekeeping, caught-up time)
    events, until None:  HandshakeRequest → ``MasterSide.accept_slave`` (may refuse: close)
                         ReadLog          → ``supply_batches(read_log(...))`` (the store's)
                         CaughtUp/SlaveAck→ ``MasterSide`` callbacks
                         ConnectionClosed → close the socket, ``MasterSide.link_closed``
    ``data_to_send()`` → socket, then ``drain`` (back-pressure: the machine reads the log only when
    its own buffer is empty, and we only empty it into a transport that is not over its limit).

Decisions (who may connect, what an ack means for the SyncStateSet and waiting puts) belong to the
:class:`MasterSide` (the ``AutoSwitchHAService``); this module only moves bytes and events. A corrupt
frame or an unknown slave closes that connection only, with one log line.

With credentials (``authenticationEnabled``) a link first runs the exchange of ``auth.py``: it sends
the challenge, reads the slave's hello (at most 78 + 256 bytes, within ``auth_timeout_ms``) and answers
with its proof; only then does its ``MasterConnection`` see a byte, and a HANDSHAKE must claim the
proved slave id. A failed exchange closes the socket with one log line and nothing more sent.

A peer that has not sent its HANDSHAKE ``auth_timeout_ms`` (5 s) after it connected is closed, with or
without authentication (docs/architecture.md §12.10): before, an idle unknown peer was held for
``haHousekeepingInterval``. At most ``max_pending`` (``haMaxPendingConnections``) such peers are held at
once: one more is closed as it is accepted, before any byte is sent or buffer allocated; slaves already
past their HANDSHAKE are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any, Protocol

from mqha.autoswitch_ha.auth import HAAuthError, MasterAuth
from mqha.autoswitch_ha.auth_frames import AUTH_HELLO_HEADER, auth_hello_size
from mqha.autoswitch_ha.events import CaughtUp, ConnectionClosed, HandshakeRequest, ReadLog, SlaveAck
from mqha.autoswitch_ha.master import LogView, MasterConfig, MasterConnection
from mqha.errors import RemoteProtocolError
from mqha.security.credentials import InnerCredentials
from mqha.security.ha_proof import CHALLENGE_SIZE

log = logging.getLogger(__name__)

TICK_MS = 100
READ_CHUNK = 256 * 1024
WRITE_HIGH_WATER = 1024 * 1024  # room for a few batches in flight: the slave's acks are not a window
DEFAULT_MAX_PENDING = 64
"""``haMaxPendingConnections``: peers held at once before their HANDSHAKE."""
JOIN_MAX_BYTES = 64 * 1024
"""Frames whose pieces are all at most this size go out joined in one write: below it a copy costs
less than another send (and another TCP segment); larger batches are written as they are."""


class MasterSide(Protocol):
    """The HA service as the master links see it."""

    def accept_slave(self, link: MasterLink, request: HandshakeRequest) -> str | None:
        """None to accept; else why the slave is refused (the connection closes)."""

    def on_caught_up(self, link: MasterLink, event: CaughtUp) -> None: ...

    def on_slave_ack(self, link: MasterLink, event: SlaveAck) -> None: ...

    def link_closed(self, link: MasterLink, event: ConnectionClosed) -> None: ...


@dataclass(frozen=True)
class LinkSettings:
    """What every master link of one HA server is built with."""

    config: MasterConfig
    clock: Callable[[], int]
    read_log: Callable[[int, int, int], list[bytes | memoryview]]
    """The store's ``read_batches(offset, batch_bytes, max_bytes)``."""
    log_view: Callable[[], LogView]
    """The log as a new link starts from (``AckGate.log_view``)."""
    flow_limit_bytes_per_s: int | None = None  # haFlowControlEnable / maxHaTransferByteInSecond
    on_bytes: Callable[[int, int], None] | None = None  # metrics: (sent, received)
    credentials: InnerCredentials | None = None  # authenticationEnabled: slaves must prove these
    auth_timeout_ms: int = 5000


class RateMeter:
    """Bytes per second over the last whole second (haStatus ``transferredByteInSecond``)."""

    def __init__(self) -> None:
        self.total = 0
        self._window_start = time.monotonic()
        self._window_bytes = 0
        self.per_second = 0

    def add(self, count: int) -> None:
        self.total += count
        self._window_bytes += count
        self.roll()

    def roll(self) -> None:
        now = time.monotonic()
        elapsed = now - self._window_start
        if elapsed >= 1.0:
            self.per_second = int(self._window_bytes / elapsed)
            self._window_start, self._window_bytes = now, 0


class MasterLink:
    """One slave connection: the socket, its :class:`MasterConnection`, and counters for haStatus."""

    def __init__(
        self,
        side: MasterSide,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        settings: LinkSettings,
    ) -> None:
        self.side = side
        self._read_log = settings.read_log
        self._reader = reader
        self._writer = writer
        self._clock = clock = settings.clock
        self.peer = _peer(writer)
        self.conn = MasterConnection(settings.log_view(), clock(), settings.config)
        self.sent = RateMeter()
        self.received = RateMeter()
        self._wake = asyncio.Event()
        self._flow_limit = settings.flow_limit_bytes_per_s
        self._flow_window = (0.0, 0)  # (second it started, bytes sent in it)
        self._on_bytes = settings.on_bytes  # metrics: (sent, received)
        self._credentials = settings.credentials
        self._auth_timeout_s = settings.auth_timeout_ms / 1000
        self._handshake_deadline_ms = clock() + settings.auth_timeout_ms  # a silent peer is closed then
        self.auth: MasterAuth | None = None  # the passed exchange (None: authentication off or not yet)
        self.closed: ConnectionClosed | None = None

    @property
    def slave_id(self) -> int | None:
        return self.conn.slave_id

    def wake(self) -> None:
        self._wake.set()

    def update_log(self, view: LogView) -> None:
        self.conn.update_log(view)
        self._wake.set()

    def close(self, reason: str) -> None:
        """Local orderly close (role change, duplicate connection, shutdown)."""
        if self._credentials is not None and self.auth is None:
            self._writer.transport.abort()  # ends an exchange still waiting for the peer
        self.conn.close(reason)
        self._wake.set()

    async def run(self) -> None:
        if self._credentials is not None and not await self._authenticate(self._credentials):
            self._writer.transport.abort()
            self.conn.close("not authenticated")
            self._ended(ConnectionClosed(reason="not authenticated"))
            return
        reader_task = asyncio.create_task(self._read_loop(), name=f"ha-master-read:{self.peer}")
        with contextlib.suppress(AttributeError, NotImplementedError):
            self._writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        try:
            await self._serve()
        except (ConnectionError, OSError) as exc:
            self.conn.receive_data(b"", self._clock())
            await self._pump()
            self._ended(ConnectionClosed(reason=f"socket error: {exc}", error=exc))
        except Exception as exc:  # a bug ends this connection only, loudly; the slave reconnects
            log.exception("HA link %s (slave %s) failed", self.peer, self.slave_id)
            self.conn.close(f"internal error: {exc}")
            self._ended(ConnectionClosed(reason=f"internal error: {exc}", error=exc))
        finally:
            await cancel_and_wait(reader_task)
            # abort: a finished connection's unsent bytes are useless, and a peer that stopped reading
            # would otherwise keep the transport (and its buffer) alive.
            self._writer.transport.abort()
            self.conn.close("master shutting down")  # no-op unless cancelled (shutdown)
            self._ended(ConnectionClosed(reason="master shutting down"))

    async def _authenticate(self, credentials: InnerCredentials) -> bool:
        """The master's half of the exchange (``auth.py``); False (logged once) if the peer failed it."""
        auth = MasterAuth(credentials, secrets.token_bytes(CHALLENGE_SIZE))
        reader = self._reader
        try:
            async with asyncio.timeout(self._auth_timeout_s):
                self._writer.write(auth.challenge_frame())
                hello = await reader.readexactly(4)  # the code first: a legacy HANDSHAKE is 16 bytes
                auth_hello_size(hello)
                hello += await reader.readexactly(AUTH_HELLO_HEADER.size - len(hello))
                size = auth_hello_size(hello)
                assert size is not None
                hello += await reader.readexactly(size - len(hello))
                self._writer.write(auth.check_hello(hello))
        except (HAAuthError, RemoteProtocolError, TimeoutError, asyncio.IncompleteReadError, OSError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            log.warning("HA link %s: refused, the peer did not authenticate: %s", self.peer, reason)
            return False
        self.auth = auth
        return True

    def _ended(self, event: ConnectionClosed) -> None:
        """Tell the service once that this link is over."""
        if self.closed is None:
            self.closed = event
            self.side.link_closed(self, event)

    async def _serve(self) -> None:
        """The loop of the module docstring, until the machine reports ``ConnectionClosed``."""
        last_tick = self._clock()
        while True:
            await self._pump()
            if self.closed is not None:
                return
            chunks = self.conn.chunks_to_send()
            if chunks:
                sent = sum(map(len, chunks))
                if max(map(len, chunks)) <= JOIN_MAX_BYTES:
                    self._writer.write(b"".join(chunks))
                else:
                    for chunk in chunks:
                        self._writer.write(chunk)
                self.sent.add(sent)
                if self._on_bytes is not None:
                    self._on_bytes(sent, 0)
                if not await drain_within(self._writer, self.conn.config.housekeeping_interval_ms):
                    # A peer that stopped reading (SIGSTOP, dead host) must not pin this task:
                    # ticks (housekeeping) do not run while we wait here.
                    self.conn.close(
                        "the slave stopped reading (send buffer full for the housekeeping interval)"
                    )
                continue  # the machine may want to read the next batch right away
            now = await wait_for_tick(self._wake, last_tick, self._clock)
            if now is not None:
                last_tick = now
                self.sent.roll()
                self.received.roll()
                self.conn.tick(now)
                if self.conn.slave_id is None and now > self._handshake_deadline_ms:
                    self.conn.close("no HANDSHAKE within the handshake timeout")

    async def _pump(self) -> None:
        while (event := self.conn.next_event()) is not None:
            if isinstance(event, ReadLog):
                await self._flow_control()
                try:
                    batch_bytes = event.batch_bytes or event.max_bytes  # 0: one batch
                    batches = self._read_log(event.offset, batch_bytes, event.max_bytes)
                except Exception as exc:  # a log that cannot be read ends this connection only
                    log.error(
                        "HA link %s: reading the commit log at %d failed: %s", self.peer, event.offset, exc
                    )
                    self.conn.close(f"commit log read at {event.offset} failed: {exc}")
                    continue
                self._note_flow(sum(map(len, batches)))
                self.conn.supply_batches(event.offset, batches, self._clock())
            elif isinstance(event, HandshakeRequest):
                refusal = self.auth.handshake_refusal(event.slave_id) if self.auth is not None else None
                # A role refusal is routine (a failover, a replica registered a moment ago that the
                # membership cache learns on this knock); the slave retries. Auth failures are not.
                level = logging.WARNING if refusal is not None else logging.INFO
                refusal = refusal or self.side.accept_slave(self, event)
                if refusal is not None:
                    log.log(level, "HA link %s: refusing slave %d: %s", self.peer, event.slave_id, refusal)
                    self.conn.close(f"refused: {refusal}")
                else:
                    log.info(
                        "HA link %s: slave %d connected (incarnation %s, syncFromLastFile=%s, "
                        "asyncLearner=%s)",
                        self.peer,
                        event.slave_id,
                        event.incarnation or "unknown",
                        event.sync_from_last_file,
                        event.async_learner,
                    )
            elif isinstance(event, SlaveAck):
                self.side.on_slave_ack(self, event)
            elif isinstance(event, CaughtUp):
                self.side.on_caught_up(self, event)
            else:
                assert isinstance(event, ConnectionClosed)
                self.closed = event
                if event.error is not None:
                    log.warning("HA link %s (slave %s) closed: %s", self.peer, self.slave_id, event.reason)
                else:
                    log.info("HA link %s (slave %s) closed: %s", self.peer, self.slave_id, event.reason)
                self.side.link_closed(self, event)

    async def _flow_control(self) -> None:
        # haFlowControlEnable: at most maxHaTransferByteInSecond per connection per second.
        if self._flow_limit is None:
            return
        start, count = self._flow_window
        now = time.monotonic()
        if now - start >= 1.0:
            self._flow_window = (now, 0)
            return
        if count >= self._flow_limit:
            await asyncio.sleep(1.0 - (now - start))
            self._flow_window = (time.monotonic(), 0)

    def _note_flow(self, count: int) -> None:
        if self._flow_limit is not None:
            start, sent = self._flow_window
            self._flow_window = (start, sent + count)

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(READ_CHUNK)
                self.received.add(len(data))
                if data and self._on_bytes is not None:
                    self._on_bytes(0, len(data))
                self.conn.receive_data(data, self._clock())
                self._wake.set()
                if not data:
                    return
        except (ConnectionError, OSError):
            self.conn.receive_data(b"", self._clock())
            self._wake.set()


async def cancel_and_wait(task: asyncio.Task[Any] | asyncio.Future[Any], retry_s: float = 1.0) -> None:
    """Cancel ``task`` and wait until it ended. A cancellation of the caller is not swallowed
    (``asyncio.wait`` raises it; a ``suppress(CancelledError)`` around ``await task`` would hide it),
    and a task that swallowed its cancel (3.11 ``wait_for``) is cancelled again."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=retry_s)
    if not task.cancelled() and task.exception() is not None:
        log.debug("task %r ended with an error while being cancelled", task, exc_info=task.exception())


# Bounded waits use ``asyncio.timeout``, never ``asyncio.wait_for``: in Python 3.11 ``wait_for``
# swallows a cancellation that arrives as the awaited thing completes, and a task that ignores its
# cancel hangs whoever stops it (a role change waiting for the HA client, for one).


async def wait_for_tick(wake: asyncio.Event, last_tick: int, clock: Callable[[], int]) -> int | None:
    """Sleep until ``wake`` is set or the tick after ``last_tick`` is due, and clear ``wake`` (the
    caller's next round handles whatever set it). The time now if a tick is due, else None."""
    wait_ms = TICK_MS - (clock() - last_tick)
    if wait_ms > 0 and not wake.is_set():
        await wait_event(wake, wait_ms / 1000)
    wake.clear()
    now = clock()
    return now if now - last_tick >= TICK_MS else None


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s``; True if it was set."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def drain_within(writer: asyncio.StreamWriter, timeout_ms: int) -> bool:
    """``drain`` bounded by ``timeout_ms``; False when the peer did not take the data in time."""
    transport = writer.transport
    if (
        transport.get_write_buffer_size() <= transport.get_write_buffer_limits()[1]
        and not transport.is_closing()
    ):
        return True  # below the high-water mark drain returns at once: skip the timeout's set-up
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            await writer.drain()
    except TimeoutError:
        return False
    return True


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


class HAServer:
    """The accept loop on ``haListenPort``: one :class:`MasterLink` task per connection."""

    def __init__(
        self,
        side: MasterSide,
        host: str,
        port: int,
        settings: LinkSettings,
        *,
        ssl: SSLContext | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self.side = side
        self.max_pending = max_pending
        self.refused_pending = 0  # connections closed at once: ``max_pending`` unknown peers were held
        self.ssl = ssl  # TLS before any frame (docs/architecture.md §12.5)
        self.host = host
        self.port = port
        self.settings = settings
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._links: set[MasterLink] = set()

    @property
    def bound_port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, reuse_address=True, ssl=self.ssl
        )
        log.info("HA server listening on %s:%d", self.host, self.bound_port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if sum(1 for held in self._links if held.slave_id is None) >= self.max_pending:
            writer.transport.abort()
            self.refused_pending += 1
            if self.refused_pending == 1 or self.refused_pending % 1000 == 0:
                log.warning(
                    "HA port: %d connections refused so far, %d peers without a HANDSHAKE being held "
                    "(haMaxPendingConnections)",
                    self.refused_pending,
                    self.max_pending,
                )
            return
        link = MasterLink(self.side, reader, writer, self.settings)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._links.add(link)
        try:
            await link.run()
        except asyncio.CancelledError:
            pass  # stop() gave up waiting; the link already cleaned up in its finally
        finally:
            self._tasks.discard(task)
            self._links.discard(link)

    async def stop(self, timeout: float = 2.0) -> None:
        """Stop accepting, close every link in order (each tells the service), then wait for them."""
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.close("master shutting down")
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:  # a link stuck in a write to a frozen peer
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=timeout)
        if self._server is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(timeout):
                    await self._server.wait_closed()
            self._server = None
