"""What the HA layer uses of the broker store (``mqha.broker.store.BrokerStore`` implements it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mqha.epoch.history import EpochHistory


class ReplicaStore(Protocol):
    """The replica's log, epochs and stored confirm offset, as the HA links and client call them."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    @property
    def epochs(self) -> EpochHistory: ...

    @property
    def stored_confirm_offset(self) -> int: ...

    def set_stored_confirm_offset(self, value: int) -> None: ...

    def save_confirm_offset(self, value: int, *, durable: bool = False) -> None: ...

    def read_batches(self, offset: int, batch_bytes: int, max_bytes: int) -> list[bytes | memoryview]: ...

    def apply_truncation(self, offset: int, epochs: EpochHistory) -> None: ...

    def reset_log(self, reason: str = ...) -> None: ...

    def append_epoch(self, epoch: int, start_offset: int) -> EpochHistory: ...

    async def append_replicated(self, offset: int, parts: Sequence[bytes | memoryview]) -> int: ...
