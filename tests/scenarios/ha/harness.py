"""Test harness: a master machine and a slave machine joined by an in-memory byte link, no sockets.

Each side's "disk" is a :class:`Replica`: a dict of whole messages by offset plus an epoch history,
standing in for the commit log (``read_raw`` / ``append_raw`` / ``truncate``) and the epoch file.
Messages are self-delimiting (a 4-byte size, then bytes that depend only on the epoch and offset that
wrote them), so two replicas hold the same bytes at an offset exactly when the same epoch wrote them.
:class:`Pair` plays both shells: it executes every action in order and moves bytes in small chunks.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from dataclasses import dataclass, field

from mqha.autoswitch_ha.events import (
    AppendData,
    AppendEpoch,
    CaughtUp,
    ConnectionClosed,
    HandshakeRequest,
    ReadLog,
    ResetLog,
    SetConfirmOffset,
    SlaveAck,
    TruncateTo,
)
from mqha.autoswitch_ha.master import LogView, MasterConfig, MasterConnection
from mqha.autoswitch_ha.slave import SlaveConfig, SlaveConnection
from mqha.epoch.history import EpochHistory
from mqha.errors import NotAlignedError

SIZE = struct.Struct(">i")


def message(epoch: int, offset: int, size: int) -> bytes:
    """The message epoch ``epoch`` writes at ``offset``: ``size`` bytes in all."""
    assert size >= SIZE.size + 1
    seed = hashlib.sha256(f"{epoch}@{offset}".encode()).digest()
    body = (seed * (size // len(seed) + 1))[: size - SIZE.size]
    return SIZE.pack(size) + body


def split_messages(data: bytes) -> list[bytes]:
    out, position = [], 0
    while position < len(data):
        (size,) = SIZE.unpack_from(data, position)
        assert size > SIZE.size and position + size <= len(data), "a batch must hold whole messages"
        out.append(data[position : position + size])
        position += size
    return out


@dataclass
class Replica:
    """One broker's commit log and epoch file, in memory."""

    name: str
    broker_id: int
    messages: dict[int, bytes] = field(default_factory=dict)
    epochs: EpochHistory = field(default_factory=EpochHistory)
    min_offset: int = 0
    confirm_offset: int = -1
    truncations: list[tuple[int, int]] = field(default_factory=list)  # (from max, to offset)

    @classmethod
    def with_log(
        cls, name: str, broker_id: int, pairs: list[tuple[int, int]], max_offset: int, size: int = 100
    ):
        """A replica whose epochs are ``pairs`` and whose log, written by those epochs in ``size``-byte
        messages, ends at ``max_offset``. The first epoch's start is the log's min offset."""
        epochs = EpochHistory.from_pairs(pairs).with_last_end(max_offset)
        replica = cls(name, broker_id, epochs=EpochHistory.from_pairs(pairs))
        replica.min_offset = pairs[0][1] if pairs else 0
        offset = replica.min_offset
        while offset < max_offset:
            entry = epochs.find_by_offset(offset)
            assert entry is not None
            replica.messages[offset] = message(entry.epoch, offset, size)
            offset += size
        assert offset == max_offset
        return replica

    # -- the commit log --------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        if not self.messages:
            return self.min_offset
        last = max(self.messages)
        return last + len(self.messages[last])

    def write(self, count: int, size: int = 100) -> None:
        """The master appends ``count`` messages under its current (last) epoch."""
        epoch = self.epochs.last_epoch()
        assert epoch >= 0, "only a replica with an epoch can write"
        for _ in range(count):
            offset = self.max_offset
            self.messages[offset] = message(epoch, offset, size)

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        starts = sorted(self.messages)
        index = bisect.bisect_left(starts, offset)
        if offset < self.max_offset and (index == len(starts) or starts[index] != offset):
            raise NotAlignedError(self.name, f"read at {offset}: not a message boundary")
        out = b""
        while index < len(starts) and (not out or len(out) + len(self.messages[starts[index]]) <= max_bytes):
            out += self.messages[starts[index]]
            index += 1
        return out

    def append_raw(self, offset: int, data: bytes) -> None:
        if self.messages:
            assert offset == self.max_offset, (
                f"{self.name}: append at {offset}, log ends at {self.max_offset}"
            )
        else:
            self.min_offset = offset
        for chunk in split_messages(data):
            self.messages[offset] = chunk
            offset += len(chunk)

    def truncate(self, offset: int) -> None:
        top = self.max_offset
        if offset >= top:
            return
        if offset > self.min_offset and offset not in self.messages:
            raise NotAlignedError(self.name, f"truncate to {offset}: not a message boundary")
        self.truncations.append((top, offset))
        for start in [s for s in self.messages if s >= offset]:
            del self.messages[start]
        if not self.messages:
            self.min_offset = offset

    def wipe(self) -> None:
        """Manual repair: an empty store."""
        self.messages.clear()
        self.epochs = EpochHistory()
        self.min_offset = 0
        self.confirm_offset = -1

    # -- roles -----------------------------------------------------------------------------------

    def become_master(self, epoch: int) -> None:
        """changeToMaster: record ``<epoch, maxOffset>`` (a zero-length last entry is replaced)."""
        self.epochs = self.epochs.append(epoch, self.max_offset)

    def log_view(self) -> LogView:
        return LogView(
            min_offset=self.min_offset,
            max_offset=self.max_offset,
            # allAckInSyncStateSet off: the master's max (docs/reference-behaviour.md §14)
            confirm_offset=self.max_offset,
            epochs=self.epochs,
        )

    def bytes_in(self, start: int, end: int) -> bytes:
        return b"".join(m for o, m in sorted(self.messages.items()) if start <= o < end)


@dataclass
class Pair:
    """A connection between ``master`` and ``slave`` driven to quiescence by :meth:`pump`."""

    master: Replica
    slave: Replica
    master_config: MasterConfig = field(default_factory=MasterConfig)
    slave_config: SlaveConfig = field(default_factory=SlaveConfig)
    chunk: int = 7  # bytes per delivery, to exercise frame reassembly
    now: int = 0

    def __post_init__(self) -> None:
        self.m = MasterConnection(self.master.log_view(), self.now, self.master_config)
        self.s = SlaveConnection(
            broker_id=self.slave.broker_id,
            epochs=self.slave.epochs,
            max_offset=self.slave.max_offset,
            config=self.slave_config,
            incarnation=f"{self.slave.broker_id:032x}",  # one process per replica in a scenario
        )
        self.master_events: list = []
        self.slave_events: list = []
        self.s.connection_made(self.now)

    @property
    def closed(self) -> list[ConnectionClosed]:
        return [e for e in self.master_events + self.slave_events if isinstance(e, ConnectionClosed)]

    @property
    def truncation(self) -> TruncateTo | None:
        found = [e for e in self.slave_events if isinstance(e, TruncateTo)]
        return found[-1] if found else None

    def refresh(self) -> None:
        """The master's shell tells the connection about its log after a change."""
        self.m.update_log(self.master.log_view())

    def inject_to_slave(self, data: bytes) -> None:
        self.s.receive_data(data, self.now)

    def inject_to_master(self, data: bytes) -> None:
        self.m.receive_data(data, self.now)

    def pump(self, *, max_rounds: int = 100_000, until_slave_offset: int | None = None) -> Pair:
        """Move bytes and execute actions until nothing happens (or the slave's log reaches
        ``until_slave_offset``, after which the connection is cut as a crash would)."""
        for _ in range(max_rounds):
            moved = self.step()
            if until_slave_offset is not None and self.slave.max_offset >= until_slave_offset:
                self.cut()
                return self
            if not moved:
                return self
        raise AssertionError("the pair did not settle")

    def step(self) -> bool:
        """One round trip: slave bytes to the master, its actions, master bytes to the slave, its
        actions. True if anything happened."""
        moved = self._deliver(self.s.data_to_send(), self.m.receive_data)
        moved |= self._run_master()
        moved |= self._deliver(self.m.data_to_send(), self.s.receive_data)
        return self._run_slave() or moved

    def cut(self) -> None:
        """Both sides lose the connection."""
        self.s.close("cut")
        self.m.close("cut")
        self._run_master()
        self._run_slave()

    def tick(self, now: int) -> None:
        self.now = now
        self.m.tick(now)
        self.s.tick(now)

    def _deliver(self, data: bytes, receive) -> bool:
        for i in range(0, len(data), self.chunk):
            receive(data[i : i + self.chunk], self.now)
        return bool(data)

    def _run_master(self) -> bool:
        moved = False
        while (event := self.m.next_event()) is not None:
            moved = True
            self.master_events.append(event)
            if isinstance(event, ReadLog):
                # One batch per read (a log may return less than asked), so that a step moves one batch;
                # reads of several batches run against real logs in tests/integration.
                batch = min(event.batch_bytes or event.max_bytes, event.max_bytes)
                self.m.supply_log(event.offset, self.master.read_raw(event.offset, batch), self.now)
            elif isinstance(event, ConnectionClosed):
                self.s.receive_data(b"", self.now)  # the socket closes under the slave
            else:
                assert isinstance(event, HandshakeRequest | SlaveAck | CaughtUp)
        return moved

    def _run_slave(self) -> bool:
        moved = False
        while (event := self.s.next_event()) is not None:
            moved = True
            self.slave_events.append(event)
            if isinstance(event, TruncateTo):
                self.slave.epochs = event.epochs  # epochs first, then the log (see TruncateTo)
                try:
                    self.slave.truncate(event.offset)
                except NotAlignedError as exc:
                    self.s.truncation_failed(exc)
                else:
                    self.s.truncation_done(self.now)
            elif isinstance(event, ResetLog):
                self.slave.truncations.append((self.slave.max_offset, 0))
                self.slave.wipe()  # the store's reset_log: empty, re-synced from the master's start
            elif isinstance(event, AppendEpoch):
                self.slave.epochs = event.epochs
            elif isinstance(event, AppendData):
                self.slave.append_raw(event.offset, *event.parts)
                self.s.log_appended(self.slave.max_offset, self.now)
            elif isinstance(event, SetConfirmOffset):
                self.slave.confirm_offset = event.offset
            elif isinstance(event, ConnectionClosed):
                self.m.receive_data(b"", self.now)
        return moved


def sync(master: Replica, slave: Replica, **kwargs) -> Pair:
    """Connect ``slave`` to ``master`` and replicate until idle."""
    return Pair(master, slave, **kwargs).pump()


def assert_replica_of(slave: Replica, master: Replica) -> None:
    """``slave`` holds exactly the master's bytes over its whole range, and the same epochs there."""
    assert slave.max_offset <= master.max_offset
    for offset, data in slave.messages.items():
        assert master.messages.get(offset) == data, f"{slave.name} diverges from {master.name} at {offset}"
    # The master's entries that overlap the slave's log (a replica that started from the master's
    # min offset has no entries wholly before its log).
    expected = [
        (e.epoch, e.start_offset)
        for e in master.epochs
        if e.start_offset < slave.max_offset and e.end_offset > slave.min_offset
    ]
    assert slave.epochs.pairs() == expected, (
        f"{slave.name} epochs {slave.epochs.pairs()} vs {master.name} {master.epochs.pairs()}"
    )
