"""Asyncio slave side of HA replication: connect to the master's HA address and replicate. SHELL.

:class:`HAClient` keeps one TCP connection to the master at a time and drives a fresh sans-IO
:class:`~mqha.autoswitch_ha.slave.SlaveConnection` per connection, built from the replica as it is at that
moment. Actions run strictly in the order the machine returns them (its docstring explains why):

    TruncateTo(o, epochs)  → save the epochs, cut the log to o → ``truncation_done`` (or ``_failed``)
    ResetLog(start)        → empty the replica: the master's log starts beyond it (retention)
    AppendEpoch(.., epochs)→ save the epochs
    AppendData(o, data)    → append the bytes verbatim → ``log_appended(new max)`` (which ACKs)
    SetConfirmOffset(o)    → store it
    ConnectionClosed       → close the socket; reconnect after ``reconnect_delay_ms``

The appends of one receive (the batches it completed) are written with one call and acknowledged once,
as the reference's slave acknowledges once per read.

The client writes to the broker store itself (a :class:`~mqha.autoswitch_ha.replica.ReplicaStore`)
and takes its broker id from the broker's ``BrokerRole``. A failure of one connection (corrupt frame,
refused handshake, unreachable master) is logged once and retried; it never stops the broker.

With credentials (``authenticationEnabled``) each connection first runs the slave's half of the
exchange of ``auth.py``: read the master's challenge, send the hello, read and check the master's
proof (within ``auth_timeout_ms``). Until the proof checks out no byte reaches the ``SlaveConnection``:
a master that cannot prove the credentials writes nothing to this replica.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from ssl import SSLContext

from mqha.autoswitch_ha.auth import HAAuthError, SlaveAuth
from mqha.autoswitch_ha.auth_frames import AUTH_CHALLENGE, AUTH_PROOF
from mqha.autoswitch_ha.events import (
    AppendData,
    AppendEpoch,
    ConnectionClosed,
    ResetLog,
    SetConfirmOffset,
    TruncateTo,
)
from mqha.autoswitch_ha.lineage import Following, slave_read_refusal
from mqha.autoswitch_ha.replica import ReplicaStore
from mqha.autoswitch_ha.server import RateMeter, cancel_and_wait, wait_event, wait_for_tick
from mqha.autoswitch_ha.slave import SlaveConfig, SlaveConnection
from mqha.clock import wall_ms
from mqha.role import BrokerRole
from mqha.security.credentials import InnerCredentials
from mqha.security.ha_proof import CHALLENGE_SIZE

log = logging.getLogger(__name__)

RECEIVE_MIN_BYTES = 1024 * 1024
"""Free receive-buffer space offered to each ``recv_into``: a read takes up to this much at once, and
its batches are written with one call (1 MiB measured faster than 256 KiB at both batch sizes)."""


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"HA address {address!r} is not host:port")
    return host, int(port)


class HAClient:
    """The slave's replication task (``AutoSwitchHAClient``)."""

    def __init__(
        self,
        store: ReplicaStore,
        role: BrokerRole,
        config: SlaveConfig,
        clock: Callable[[], int],
        *,
        reconnect_delay_ms: int = 1000,
        connect_timeout_ms: int = 3000,
        on_bytes: Callable[[int, int], None] | None = None,
        credentials: InnerCredentials | None = None,
        auth_timeout_ms: int = 5000,
        ssl: SSLContext | None = None,
        incarnation: str | None = None,
    ) -> None:
        self._store = store
        self.on_link_closed: Callable[[], None] | None = None
        """Called when a connection to the master closes (the broker heartbeats at once)."""
        self.incarnation = incarnation  # this process's, announced on every connection
        self._ssl = ssl  # verifies the master's certificate (docs/architecture.md §12.5)
        self._credentials = credentials
        self.auth_timeout_ms = auth_timeout_ms
        self._role = role
        self.config = config
        self._clock = clock
        self.reconnect_delay_ms = reconnect_delay_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._on_bytes = on_bytes
        self.master_address: str | None = None
        self.master_epoch = -1  # the master epoch of the role change that named master_address
        self.verified: Following | None = None  # the master of the last completed handshake truncation
        self.problem: str | None = None  # why the last handshake with the current master failed
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.conn: SlaveConnection | None = None  # the current connection's machine
        self.received = RateMeter()
        self.sent = RateMeter()
        self.last_read_wall_ms = 0
        self.last_write_wall_ms = 0
        self.sessions = 0  # connections that reached the master (tests, status)
        self.held: str | None = None  # why replication is held (``hold``), None: it is not

    @property
    def is_running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def is_connected(self) -> bool:
        return self.conn is not None and self.conn.is_open

    def set_master_address(self, address: str | None, epoch: int = -1) -> None:
        """Follow ``address`` (``host:port`` of the master's HA port) in master epoch ``epoch``; a change
        of either drops the connection: the next handshake checks the log against the master again."""
        if (address, epoch) != (self.master_address, self.master_epoch):
            self.master_address, self.master_epoch = address, epoch
            self.problem = None
            if self.conn is not None:
                self.conn.close(f"now following {address} in master epoch {epoch}")
            self._changed.set()

    @property
    def following(self) -> Following:
        return Following(self.master_address, self.master_epoch)

    def hold(self, reason: str | None) -> None:
        """While ``reason`` is set, replicate nothing: the connection closes and none is opened, so this
        replica acknowledges nothing and its master takes it out of the SyncStateSet (a damaged record,
        docs/architecture.md §4.7). None resumes."""
        if reason == self.held:
            return
        self.held = reason
        if reason is not None:
            log.warning("HA client: not replicating while %s", reason)
            if self.conn is not None:
                self.conn.close(reason)
        else:
            log.info("HA client: replicating again")
        self._changed.set()

    def read_refusal(self) -> str | None:
        """Why this replica, as a slave, must not serve reads now (``lineage.slave_read_refusal``)."""
        return slave_read_refusal(self.following, self.verified, self.problem)

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
            if not address or self.held is not None:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                link = await self._connect(address)
            except (OSError, TimeoutError, ValueError) as exc:
                # One line per outage, not one per retry.
                level = logging.INFO if failures == 0 else logging.DEBUG
                reason = exc or type(exc).__name__
                log.log(level, "HA client: cannot connect to master %s: %s", address, reason)
                failures += 1
            else:
                try:
                    if link is not None:
                        if self._credentials is not None:
                            await self._authenticate(link, self._credentials)
                        failures = 0
                        await self._session(address, link)
                except (HAAuthError, TimeoutError) as exc:
                    level = logging.WARNING if failures == 0 else logging.DEBUG
                    reason = "timed out" if isinstance(exc, TimeoutError) else exc
                    log.log(level, "HA client: master %s did not authenticate: %s", address, reason)
                    failures += 1
                except (ConnectionError, OSError) as exc:
                    log.info("HA client: connection to %s lost: %s", address, exc)
                except Exception:
                    # A bug must not end replication for good: log it, reconnect with a fresh machine.
                    log.exception("HA client: session with %s failed", address)
                finally:
                    self.conn = None
                    if link is not None:
                        link.abort()
            if self.master_address == address:
                self._changed.clear()
                await wait_event(self._changed, self.reconnect_delay_ms / 1000)

    async def _connect(self, address: str) -> _Link | None:
        """A connected link with a fresh machine; None (logged) while this broker has no id yet."""
        broker_id = self._role.broker_id
        if broker_id is None:
            log.warning("HA client: no controller broker id yet; not connecting to %s", address)
            return None
        # The machine starts from the replica as it is now: only this task changes the log.
        store = self._store
        conn = SlaveConnection(
            broker_id=broker_id,
            epochs=store.epochs,
            max_offset=store.max_offset,
            min_offset=store.min_offset,
            config=self.config,
            borrow=True,
            incarnation=self.incarnation,
        )
        first = AUTH_CHALLENGE.size if self._credentials is not None else None
        link = _Link(conn, self.following, self._clock, self._count_received, first_frame_size=first)
        host, port = split_address(address)
        async with asyncio.timeout(self.connect_timeout_ms / 1000):
            await asyncio.get_running_loop().create_connection(lambda: link, host, port, ssl=self._ssl)
        return link

    def _count_received(self, count: int) -> None:
        self.received.add(count)
        self.last_read_wall_ms = wall_ms()
        if self._on_bytes is not None:
            self._on_bytes(0, count)

    async def _authenticate(self, link: _Link, credentials: InnerCredentials) -> None:
        """The slave's half of the exchange (``auth.py``); raises :class:`HAAuthError` or TimeoutError."""
        auth = SlaveAuth(credentials, link.conn.broker_id, secrets.token_bytes(CHALLENGE_SIZE))
        async with asyncio.timeout(self.auth_timeout_ms / 1000):
            hello = auth.answer(await link.read_frame())
            link.write(hello)
            self.sent.add(len(hello))
            auth.check_proof(await link.read_frame(AUTH_PROOF.size))
        # Reading stays paused until the session's loop resumes it; from then on bytes go to the machine.

    async def _session(self, address: str, link: _Link) -> None:
        conn = link.conn
        self.conn = conn
        self.sessions += 1
        conn.connection_made(self._clock())
        log.info(
            "HA client: connected to master %s as broker %d (log ends at %d)",
            address,
            conn.broker_id,
            conn.expected_offset,
        )
        last_tick = self._clock()
        while True:
            if await self._run_actions(conn, link.following):
                return
            link.resume_reading()  # every borrowed batch is written: the buffer may be reused
            out = conn.data_to_send()
            if out:
                link.write(out)
                self.sent.add(len(out))
                self.last_write_wall_ms = wall_ms()
                if self._on_bytes is not None:
                    self._on_bytes(len(out), 0)
                if not await wait_event(link.writable, self.config.housekeeping_interval_ms / 1000):
                    conn.close("the master stopped reading (send buffer full for the housekeeping interval)")
            now = await wait_for_tick(link.wake, last_tick, self._clock)
            if now is not None:
                last_tick = now
                self.received.roll()
                self.sent.roll()
                conn.tick(now)

    async def _run_actions(self, conn: SlaveConnection, following: Following) -> bool:
        """Execute every pending action in order; True when the connection is over. ``following``: the
        master this connection was opened to (a completed truncation verifies the log against it)."""
        while (event := conn.next_event()) is not None:
            if not conn.is_open and not isinstance(event, ConnectionClosed):
                continue  # the connection ended (e.g. a failed append): the rest is fetched again
            if isinstance(event, AppendData):
                run, confirm = _take_appends(conn, event)
                parts = [part for append in run for part in append.parts]
                try:
                    new_max = await self._store.append_replicated(event.offset, parts)
                except Exception as exc:  # bad bytes from the master: this connection only
                    log.error("HA client: appending %d batches from %r failed: %s", len(parts), event, exc)
                    conn.close(f"append at {event.offset} failed: {exc}")
                    continue
                conn.log_appended(new_max, self._clock())
                if confirm is not None:
                    self._store.set_stored_confirm_offset(confirm.offset)
            elif isinstance(event, SetConfirmOffset):
                self._store.set_stored_confirm_offset(event.offset)
            elif isinstance(event, AppendEpoch):
                try:
                    saved = self._store.append_epoch(event.epoch, event.start_offset).pairs()
                    # Retention may have dropped old entries meanwhile (truncate_epoch_prefix): the file
                    # must hold the expected history's newest entries, not necessarily all of them.
                    if not saved or event.epochs.pairs()[-len(saved) :] != saved:
                        expected = event.epochs.pairs()
                        raise RuntimeError(f"epoch file holds {saved} but the connection expects {expected}")
                except Exception as exc:
                    log.error(
                        "HA client: saving epoch %d at %d failed: %s", event.epoch, event.start_offset, exc
                    )
                    conn.close(f"epoch file write failed: {exc}")
            elif isinstance(event, ResetLog | TruncateTo):
                self._handshake_action(conn, event, following)
            else:
                assert isinstance(event, ConnectionClosed)
                if event.error is not None:  # recorded only while the log is not verified yet
                    self._note_problem(following, f"HA handshake failed: {event.reason}")
                level = logging.WARNING if event.error is not None else logging.INFO
                log.log(level, "HA client: connection to %s closed: %s", self.master_address, event.reason)
                if self.on_link_closed is not None:
                    self.on_link_closed()
                return True
        return False

    def _handshake_action(
        self, conn: SlaveConnection, event: ResetLog | TruncateTo, following: Following
    ) -> None:
        """Empty the replica or cut it to the consistent point; a completed truncation verifies the log
        against ``following`` (reads may resume, ``lineage``)."""
        if isinstance(event, ResetLog):
            log.warning("HA client: emptying this replica to re-sync from the master: %s", event.reason)
            try:
                self._store.reset_log(event.reason)
            except Exception as exc:
                log.error("HA client: emptying the replica failed: %s", exc)
                self._note_problem(following, f"emptying the replica failed: {exc}")
                conn.close(f"reset failed: {exc}")
            return
        try:
            self._store.apply_truncation(event.offset, event.epochs)
        except Exception as exc:
            log.error("HA client: truncation to %d failed: %s", event.offset, exc)
            self._note_problem(following, f"truncation to {event.offset} failed: {exc}")
            conn.truncation_failed(exc)
            return
        conn.truncation_done(self._clock())
        if conn.is_open and following == self.following:
            self.verified, self.problem = following, None

    def _note_problem(self, following: Following, problem: str) -> None:
        if following == self.following and self.verified != following:
            self.problem = problem


def _take_appends(
    conn: SlaveConnection, first: AppendData
) -> tuple[list[AppendData], SetConfirmOffset | None]:
    """``first`` and the appends queued right behind it (the batches of one receive), with the last
    confirm offset set among them: the shell writes them at once and ACKs once. The confirm offset is
    applied after the run, i.e. later than the machine asked, never before data it covers."""
    run, confirm = [first], None
    while True:
        event = conn.peek_event()
        if isinstance(event, AppendData) and event.offset == run[-1].end_offset:
            run.append(event)
        elif isinstance(event, SetConfirmOffset):
            confirm = event
        else:
            return run, confirm
        conn.next_event()


class _Link(asyncio.BufferedProtocol):
    """Moves the bytes of one connection to the master between its socket and the machine's buffer.

    Received bytes land directly in the machine's buffer (``recv_into``: no copy on the way). Once a
    receive completes a frame that asks for an action, reading pauses until the session has executed it,
    because actions borrow the buffer (:class:`SlaveConnection` ``borrow``); part of a frame just waits for
    the rest.
    """

    def __init__(
        self,
        conn: SlaveConnection,
        following: Following,
        clock: Callable[[], int],
        on_received: Callable[[int], None],
        *,
        first_frame_size: int | None = None,
    ):
        self.conn = conn
        self.following = following  # the master this connection was opened to
        self._clock = clock
        self._on_received = on_received
        self._transport: asyncio.Transport | None = None
        self.wake = asyncio.Event()  # something for the session to do
        self.writable = asyncio.Event()  # the transport's send buffer is below its high-water mark
        self.writable.set()
        # The authentication exchange: an exact-size buffer that a frame is read into, never more,
        # so no byte reaches the machine before the master is proved.
        self._frame = bytearray(first_frame_size) if first_frame_size else None
        self._frame_got = 0
        self._frame_done = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    async def read_frame(self, size: int | None = None) -> bytes:
        """The next ``size`` bytes (None: the frame of ``first_frame_size``), before the machine sees any;
        reading pauses after them. :class:`HAAuthError` if the master closes first."""
        if size is not None:
            self._frame, self._frame_got = bytearray(size), 0
            self._frame_done.clear()
            self.resume_reading()
        await self._frame_done.wait()
        frame = self._frame
        if frame is None or self._frame_got < len(frame):
            raise HAAuthError("the master closed the connection during authentication")
        self._frame = None
        return bytes(frame)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_got :]
        return self.conn.receive_buffer(RECEIVE_MIN_BYTES)

    def buffer_updated(self, nbytes: int) -> None:
        self._on_received(nbytes)
        if self._frame is not None:
            self._frame_got += nbytes
            if self._frame_got == len(self._frame):
                assert self._transport is not None
                self._transport.pause_reading()
                self._frame_done.set()
            return
        self.conn.buffer_updated(nbytes, self._clock())
        if self.conn.peek_event() is None:
            return  # only part of a frame so far: keep reading, nothing for the session yet
        assert self._transport is not None
        self._transport.pause_reading()
        self.wake.set()

    def eof_received(self) -> bool:
        self._closed()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.info("HA client: connection lost: %s", exc)
        self._closed()
        self.writable.set()  # a session waiting to send must not wait for a dead socket

    def _closed(self) -> None:
        self._frame_done.set()  # an exchange waiting for a frame fails now, not at its timeout
        self.conn.receive_data(b"", self._clock())
        self.wake.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def resume_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def abort(self) -> None:
        # abort, not close: a finished connection's unsent bytes are useless, and a peer that stopped
        # reading would otherwise keep the transport (and its buffer) alive.
        if self._transport is not None:
            self._transport.abort()
