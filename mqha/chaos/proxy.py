"""Per-link TCP fault proxy on 127.0.0.1 (shell): pass, block, delay, or lose a fraction of chunks.

One asyncio loop on its own thread serves every link of ``mqha.chaos.links`` (one listening socket each).
A link's mode changes at once for its existing connections too:

- ``pass``: bytes flow (controller links translate addresses, ``mqha.chaos.links.Translator``);
- ``block``: a silent partition. Nothing is forwarded in either direction; connections stay open and
  frozen (no RST, as when packets are dropped), new connections are accepted by the kernel but never
  reach the upstream -- the peer's connect succeeds and its request times out. Healing resumes the
  frozen streams; whatever the endpoints gave up on in between they have closed themselves;
- ``loss``: each chunk is lost with the given probability. On a TCP link a lost segment is resent
  after the retransmission timeout (200 ms on Linux, doubling while losses repeat), so a lost chunk
  is delivered late and in order -- never dropped from the stream, which TCP cannot do;
- ``delay``: each chunk is forwarded ``delay`` seconds (plus a jitter draw in ``[-jitter, +jitter]``)
  after it was read, in order (``mqha.chaos.links.delivery_time``); reading goes on meanwhile, so the
  link is late, not slow.

Loss draws come from a ``random.Random`` seeded per link; which chunk is hit still depends on how
the kernel cut the stream, so a seed replays the schedule, not the exact chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mqha.chaos.links import Link, Translator, delivery_time, retransmit_delay

PASS = "pass"
BLOCK = "block"
LOSS = "loss"
DELAY = "delay"
QUEUED_CHUNKS = 256  # per direction of a connection: what a delayed link holds in flight

CHUNK = 64 * 1024
FLUSH_AFTER = 0.02  # forward a held-back partial address once the stream is quiet this long


@dataclass
class _LinkState:
    """The fault currently applied to one proxied link."""

    link: Link
    translations: tuple[tuple[bytes, bytes], ...]
    rng: random.Random
    mode: str = PASS
    fraction: float = 0.0
    delay: float = 0.0
    jitter: float = 0.0
    open: asyncio.Event = field(default_factory=asyncio.Event)
    server: asyncio.Server | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class FaultProxy:
    """Serves ``links`` until :meth:`stop`; :meth:`set_mode` / :meth:`heal` from any thread."""

    def __init__(
        self,
        links: Sequence[Link],
        *,
        translations: dict[str, tuple[tuple[bytes, bytes], ...]] | None = None,
        seed: int = 0,
    ) -> None:
        self.links = list(links)
        self._translations = translations or {}
        self._seed = seed
        self._states: dict[str, _LinkState] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> FaultProxy:
        started: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name="chaos-proxy", daemon=True)
        self._thread.start()
        started.result(timeout)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, started: Future[None]) -> None:
        try:
            asyncio.run(self._main(started))
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)

    async def _main(self, started: Future[None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        try:
            for index, link in enumerate(self.links):
                state = _LinkState(
                    link,
                    self._translations.get(link.name, ()),
                    random.Random(f"{self._seed}/{index}/{link.name}"),
                )
                state.open.set()
                host, port = link.listen.rsplit(":", 1)
                state.server = await asyncio.start_server(
                    lambda r, w, s=state: self._accept(s, r, w), host, int(port), reuse_address=True
                )
                self._states[link.name] = state
        except BaseException as exc:
            await self._close_all()
            started.set_exception(exc)
            return
        started.set_result(None)
        await self._stopped.wait()
        await self._close_all()

    async def _close_all(self) -> None:
        for state in self._states.values():
            if state.server is not None:
                state.server.close()
            for task in list(state.tasks):
                task.cancel()
        for state in self._states.values():
            if state.tasks:
                await asyncio.gather(*state.tasks, return_exceptions=True)

    # -- control (any thread) ----------------------------------------------------------------------

    def _call(self, fn: Any, *args: Any) -> Any:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the proxy is not running")
        done: Future[Any] = Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as exc:
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return done.result(5.0)

    def set_mode(
        self,
        names: Iterable[str],
        mode: str,
        fraction: float = 0.0,
        *,
        delay: float = 0.0,
        jitter: float = 0.0,
    ) -> None:
        """Put the named links in ``mode`` (PASS, BLOCK, LOSS with ``fraction``, DELAY with ``delay``
        and ``jitter`` seconds)."""
        if mode not in (PASS, BLOCK, LOSS, DELAY):
            raise ValueError(f"unknown link mode {mode!r}")
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"loss fraction {fraction} outside [0, 1)")
        if delay < 0 or not 0 <= jitter <= max(delay, 0.0):
            raise ValueError(f"delay {delay} s with jitter {jitter} s: need 0 <= jitter <= delay")
        self._call(self._set_mode, list(names), mode, fraction, delay, jitter)

    def _set_mode(self, names: list[str], mode: str, fraction: float, delay: float, jitter: float) -> None:
        for name in names:
            state = self._states[name]
            state.mode, state.fraction, state.delay, state.jitter = mode, fraction, delay, jitter
            if mode == BLOCK:
                state.open.clear()
            else:
                state.open.set()

    def heal(self) -> None:
        """Every link back to PASS."""
        self.set_mode(list(self._states), PASS)

    def modes(self) -> dict[str, str]:
        return self._call(lambda: {name: s.mode for name, s in self._states.items()})

    # -- forwarding --------------------------------------------------------------------------------

    def _accept(self, state: _LinkState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._connection(state, reader, writer))
        state.tasks.add(task)
        task.add_done_callback(state.tasks.discard)

    async def _connection(
        self, state: _LinkState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            await state.open.wait()  # a blocked link never reaches the upstream
            host, port = state.link.upstream.rsplit(":", 1)
            try:
                up_reader, upstream_writer = await asyncio.open_connection(host, int(port))
            except OSError:
                return  # upstream down: close the client's side, as a refused connect would
            translator = Translator(state.translations) if state.translations else None
            await asyncio.gather(
                self._pump(state, reader, upstream_writer, None),
                self._pump(state, up_reader, writer, translator),
            )
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    w.close()
                    with contextlib.suppress(Exception):
                        await w.wait_closed()

    async def _pump(
        self,
        state: _LinkState,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        translator: Translator | None,
    ) -> None:
        """One direction of a connection: a reading side stamps each chunk with the time it may be
        forwarded (now, or later on a delayed link) and a writing side forwards it then."""
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue(QUEUED_CHUNKS)
        reading = asyncio.ensure_future(self._read_side(state, reader, translator, queue))
        forwarding = asyncio.ensure_future(self._forward(state, queue, writer))
        try:
            await asyncio.wait((reading, forwarding), return_when=asyncio.FIRST_COMPLETED)
            if reading.done() and reading.exception() is None:
                await forwarding  # the end of stream is queued: forward up to it
            elif reading.done():
                writer.close()
        finally:
            reading.cancel()
            forwarding.cancel()

    async def _read_side(
        self,
        state: _LinkState,
        reader: asyncio.StreamReader,
        translator: Translator | None,
        queue: asyncio.Queue[tuple[float, bytes | None]],
    ) -> None:
        loop = asyncio.get_running_loop()
        due = 0.0
        while True:
            if translator is not None and translator.held:
                try:
                    data = await asyncio.wait_for(reader.read(CHUNK), FLUSH_AFTER)
                except TimeoutError:
                    data = None
            else:
                data = await reader.read(CHUNK)
            if not data:  # quiet (None) or end of stream (b""): forward what is held back
                out = translator.flush() if translator is not None else b""
            else:
                out = translator.feed(data) if translator is not None else data
            now = loop.time()
            if state.mode == DELAY:
                due = delivery_time(now, state.delay, state.rng.uniform(-state.jitter, state.jitter), due)
            else:
                due = max(due, now)
            if out:
                await queue.put((due, out))
            if data is not None and not data:
                await queue.put((due, None))  # end of stream, after everything before it
                return

    async def _forward(
        self,
        state: _LinkState,
        queue: asyncio.Queue[tuple[float, bytes | None]],
        writer: asyncio.StreamWriter,
    ) -> None:
        loop = asyncio.get_running_loop()
        losses = 0
        try:
            while True:
                due, out = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                await state.open.wait()  # frozen while the link is blocked
                if out is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                if state.mode == LOSS:
                    while state.rng.random() < state.fraction:
                        losses += 1
                        await asyncio.sleep(retransmit_delay(losses))
                    losses = 0
                writer.write(out)
                await writer.drain()
        except (ConnectionError, OSError):
            writer.close()
