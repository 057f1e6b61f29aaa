"""Blocking wrappers of :class:`Producer` and :class:`Consumer` for code without an event loop.

Each wrapper runs its async client on a private event loop in one daemon thread; calls block until
the coroutine is done. Usage::

    with SyncProducer("127.0.0.1:9878", "broker-a") as producer:
        print(producer.send("orders", "hello").status)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, Self, TypeVar

from mqha.client.consumer import Consumer
from mqha.client.producer import Body, Producer
from mqha.client.results import Message, SendResult

T = TypeVar("T")


class _LoopThread:
    """Runs one private event loop in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class _SyncClient:
    """Closes an async client and then its loop thread; a context manager."""

    _thread: _LoopThread

    def _client(self) -> Producer | Consumer:
        raise NotImplementedError

    def close(self) -> None:
        self._thread.run(self._client().close())
        self._thread.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SyncProducer(_SyncClient):
    """Offers :class:`Producer` with blocking ``send`` / ``send_batch``; same arguments (``user=`` too)."""

    def __init__(self, controllers: str | Sequence[str], broker_name: str, **kwargs: Any) -> None:
        self._thread = _LoopThread(f"mqha-producer-{broker_name}")
        self.producer: Producer = self._thread.run(_make_producer(controllers, broker_name, kwargs))

    def _client(self) -> Producer:
        return self.producer

    def send(self, topic: str, body: Body, *args: Any, **kwargs: Any) -> SendResult:
        """:meth:`Producer.send` (keys, properties, timeout), blocking."""
        return self._thread.run(self.producer.send(topic, body, *args, **kwargs))

    def send_batch(
        self, topic: str, bodies: Sequence[Body], keys: Sequence[str | None] | None = None, **kwargs: Any
    ) -> list[SendResult]:
        return self._thread.run(self.producer.send_batch(topic, bodies, keys, **kwargs))


class SyncConsumer(_SyncClient):
    """Offers :class:`Consumer` with a blocking ``poll``; same arguments (``user=`` too)."""

    def __init__(self, controllers: str | Sequence[str], broker_name: str, **kwargs: Any) -> None:
        self._thread = _LoopThread(f"mqha-consumer-{broker_name}")
        self.consumer: Consumer = self._thread.run(_make_consumer(controllers, broker_name, kwargs))

    def _client(self) -> Consumer:
        return self.consumer

    @property
    def offset(self) -> int:
        return self.consumer.offset

    def poll(self, max_messages: int | None = None, *, timeout: float | None = None) -> list[Message]:
        return self._thread.run(self.consumer.poll(max_messages, timeout=timeout))


async def _make_producer(
    controllers: str | Sequence[str], broker_name: str, kwargs: dict[str, Any]
) -> Producer:
    return await Producer(controllers, broker_name, **kwargs).start()  # the session binds to this loop


async def _make_consumer(
    controllers: str | Sequence[str], broker_name: str, kwargs: dict[str, Any]
) -> Consumer:
    return await Consumer(controllers, broker_name, **kwargs).start()
