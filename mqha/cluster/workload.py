"""A background produce workload: ``concurrency`` send loops on their own event loop thread (shell).

Used by the demo, the recovery benchmark and tests: the caller's thread stays free for blocking cluster
operations (kill, restart, status), while the workload keeps sending through a real :class:`Producer`.
Every :class:`SendResult` is kept (a demo or a test run holds tens of thousands at most); a
failover's gap is measured from them by :class:`~mqha.cluster.recovery.RecoveryMeter`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Sequence

from mqha.client.producer import Producer
from mqha.client.recording import RecordTarget
from mqha.client.results import SendResult, SendStatus
from mqha.security.credentials import User


class ProduceWorkload:
    """Sends ``body_size``-byte messages to ``broker_name`` from ``concurrency`` loops until stopped."""

    def __init__(
        self,
        controllers: str | Sequence[str],
        broker_name: str,
        *,
        concurrency: int = 4,
        topic: str = "demo",
        body_size: int = 100,
        batch: int = 1,
        record_to: RecordTarget | None = None,
        client_id: str | None = None,
        send_timeout: float = 10.0,
        pause: float = 0.0,
        user: User | None = None,
        local_address: str | None = None,
    ) -> None:
        self.controllers = controllers
        self.user = user  # the brokers' API user, when they run with authenticationEnabled
        self.local_address = local_address  # the clients' own source address (chaos: client-partition)
        self.broker_name = broker_name
        self.concurrency = concurrency
        self.topic = topic
        self.body_size = body_size
        self.batch = batch
        self.record_to = record_to
        self.client_id = client_id
        self.send_timeout = send_timeout
        self.pause = pause
        self.results: list[SendResult] = []
        self.sequences: list[list[SendResult]] = [[] for _ in range(concurrency)]  # per send loop, in order
        self.counts: Counter[SendStatus] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.started_at = 0.0

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> ProduceWorkload:
        self._thread = threading.Thread(target=self._run, name=f"workload-{self.broker_name}", daemon=True)
        self.started_at = time.monotonic()
        self._thread.start()
        self._ready.wait(timeout)
        return self

    def stop(self, timeout: float = 15.0, *, cancel: bool = False) -> None:
        """Stop sending; in-flight sends finish (bounded by their deadline) and the recorder flushes.
        With ``cancel`` (an interrupted run) in-flight sends are abandoned at once, unrecorded."""
        self._stop.set()
        loop, tasks = self._loop, self._tasks
        if cancel and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may close in between
                loop.call_soon_threadsafe(lambda: [t.cancel() for t in tasks])
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise RuntimeError(f"workload failed: {self._error!r}") from self._error

    def __enter__(self) -> ProduceWorkload:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        producer = Producer(
            self.controllers,
            self.broker_name,
            send_timeout=self.send_timeout,
            record_to=self.record_to,
            client_id=self.client_id,
            user=self.user,
            local_address=self.local_address,
        )
        async with producer:
            loops = [asyncio.create_task(self._send_loop(producer, i)) for i in range(self.concurrency)]
            self._loop, self._tasks = asyncio.get_running_loop(), loops
            self._ready.set()
            outcomes = await asyncio.gather(*loops, return_exceptions=True)
            errors = [o for o in outcomes if isinstance(o, BaseException)]
            real = [e for e in errors if not isinstance(e, asyncio.CancelledError)]
            if real:
                raise real[0]

    async def _send_loop(self, producer: Producer, index: int) -> None:
        n = 0
        pad = "x" * max(0, self.body_size - 24)
        while not self._stop.is_set():
            bodies = [f"w{index}-{n + i:09d}-{pad}" for i in range(self.batch)]
            n += self.batch
            if self.batch == 1:
                results = [await producer.send(self.topic, bodies[0])]
            else:
                results = await producer.send_batch(self.topic, bodies)
            with self._lock:
                self.results.extend(results)
                self.sequences[index].extend(results)
                self.counts.update(r.status for r in results)
            if self.pause:
                await asyncio.sleep(self.pause)

    # -- observation -------------------------------------------------------------------------------

    @property
    def acked(self) -> int:
        return self.counts[SendStatus.PUT_OK]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def snapshot(self) -> list[SendResult]:
        with self._lock:
            return list(self.results)

    def sequence_snapshot(self) -> list[list[SendResult]]:
        """Each send loop's results in the order it sent them (one producer, one send at a time)."""
        with self._lock:
            return [list(sequence) for sequence in self.sequences]

    def last_ack(self) -> SendResult | None:
        with self._lock:
            for result in reversed(self.results):
                if result.ok:
                    return result
        return None

    def wait_acked(self, count: int, timeout: float = 30.0) -> None:
        """Wait until at least ``count`` sends in total were acknowledged."""
        deadline = time.monotonic() + timeout
        while self.acked < count:
            if self._error is not None:
                raise RuntimeError(f"workload failed: {self._error!r}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"only {self.acked} of {count} sends acknowledged within {timeout:g} s")
            time.sleep(0.01)


class ConsumeWorkload:
    """Reads ``broker_name`` from offset 0 on its own event loop thread until stopped.

    Every delivered message is recorded (``reads``) when ``record_to`` is given; read errors during a
    failover are waited out, not raised.
    """

    def __init__(
        self,
        controllers: str | Sequence[str],
        broker_name: str,
        *,
        record_to: RecordTarget | None = None,
        client_id: str | None = None,
        batch: int = 256,
        user: User | None = None,
        local_address: str | None = None,
    ) -> None:
        self.controllers = controllers
        self.user = user
        self.local_address = local_address
        self.broker_name = broker_name
        self.record_to = record_to
        self.client_id = client_id
        self.batch = batch
        self.delivered = 0
        self.offset = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self) -> ConsumeWorkload:
        self._thread = threading.Thread(target=self._run, name=f"consumer-{self.broker_name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise RuntimeError(f"consumer failed: {self._error!r}") from self._error

    def catch_up(self, end_offset: int, timeout: float = 30.0) -> bool:
        """Wait (bounded) until everything before ``end_offset`` was delivered."""
        deadline = time.monotonic() + timeout
        while self.offset < end_offset and time.monotonic() < deadline and self._error is None:
            time.sleep(0.05)
        return self.offset >= end_offset

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by stop()
            self._error = exc

    async def _main(self) -> None:
        from mqha.client.consumer import Consumer
        from mqha.client.results import ReadError

        async with Consumer(
            self.controllers,
            self.broker_name,
            record_to=self.record_to,
            client_id=self.client_id,
            user=self.user,
            local_address=self.local_address,
        ) as consumer:
            while not self._stop.is_set():
                try:
                    messages = await consumer.poll(self.batch, timeout=2.0)
                except ReadError:
                    self.errors += 1
                    messages = []
                self.delivered += len(messages)
                self.offset = consumer.offset
                if not messages:
                    await asyncio.sleep(0.05)
