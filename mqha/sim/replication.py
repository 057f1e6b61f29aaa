"""HA replication between simulated brokers: the real sans-IO connection machines over simulated TCP.

One ``HaLink`` is one TCP connection: a production ``SlaveConnection`` at the slave, a production
``MasterConnection`` (inside ``MasterEnd``, the ``MasterLink`` shape the real ``SlaveLinks`` keeps) at
the master, and the bytes between them delivered in order after a random delay. A cut between the
two brokers, or either end going down, closes it (the peer sees the close when it next looks).

The event handling is the shells' (``autoswitch_ha.server`` / ``service`` at the master,
``autoswitch_ha.client`` at the slave), restated without sockets.
"""

from __future__ import annotations

from typing import Any

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
from mqha.autoswitch_ha.master import MasterConfig, MasterConnection
from mqha.autoswitch_ha.slave import SlaveConfig, SlaveConnection

MASTER_CONFIG = MasterConfig(
    transfer_batch_size=64, read_ahead_bytes=256, heartbeat_interval_ms=200, housekeeping_interval_ms=1_000
)
SLAVE_CONFIG = SlaveConfig(heartbeat_interval_ms=200, housekeeping_interval_ms=1_000)
LEARNER_CONFIG = SlaveConfig(heartbeat_interval_ms=200, housekeeping_interval_ms=1_000, async_learner=True)


class MasterEnd:
    """The master's end of one link: what ``SlaveLinks`` expects of a ``MasterLink``."""

    def __init__(self, link: HaLink, conn: MasterConnection, number: int) -> None:
        self.link = link
        self.conn = conn
        self.peer = link.slave.name
        self._number = number

    def __hash__(self) -> int:
        # ``SlaveLinks`` keeps its links in a set: a hash by creation order (not by address) makes its
        # iteration order, and so the run, the same in every process.
        return self._number

    @property
    def slave_id(self) -> int | None:
        return self.conn.slave_id

    def update_log(self, view: object) -> None:
        self.conn.update_log(view)  # type: ignore[arg-type]
        self.link.kick()

    def close(self, reason: str) -> None:
        self.conn.close(reason)
        self.link.kick()


class HaLink:
    """One connection from ``slave`` to ``master``."""

    def __init__(self, slave: Any, master: Any) -> None:
        self.slave = slave
        self.master = master
        self.world = slave.world
        now = self.world.now_ms
        self.slave_conn = SlaveConnection(
            broker_id=slave.role.broker_id or 0,
            epochs=slave.store.epochs,
            max_offset=slave.store.max_offset,
            config=LEARNER_CONFIG if slave.config.async_learner else SLAVE_CONFIG,
            incarnation=slave.incarnation,
        )
        conn = MasterConnection(master.gate.log_view(), now, MASTER_CONFIG)
        self.master_end = MasterEnd(self, conn, self.world.next_number())
        self.to_master_due = self.to_slave_due = 0
        self.closed = False
        self._kicked = False
        self.slave_conn.connection_made(now)
        self.pump()

    # -- bytes ---------------------------------------------------------------------------------------

    def _deliver(self, data: bytes, to_master: bool) -> None:
        world = self.world
        due = world.now_ms + world.rng.randint(1, max(1, world.faults.max_delay_ms))
        if to_master:
            due = self.to_master_due = max(due, self.to_master_due)
        else:
            due = self.to_slave_due = max(due, self.to_slave_due)

        def arrive() -> None:
            if self.closed or not self.alive():
                self.close("cut")
                return
            now = world.now_ms
            if to_master:
                self.master_end.conn.receive_data(data, now)
                self.master.on_master_events(self.master_end)
            else:
                self.slave_conn.receive_data(data, now)
                self.slave.on_slave_events(self)
            self.pump()

        world.at(due - world.now_ms, arrive)

    def kick(self) -> None:
        """Something changed at an end: pump soon (not now: the caller may be mid-update)."""
        if not self._kicked:
            self._kicked = True

            def go() -> None:
                self._kicked = False
                if not self.closed:
                    self.master.on_master_events(self.master_end)
                    self.pump()

            self.world.at(0, go)

    def pump(self) -> None:
        if self.closed:
            return
        if data := self.slave_conn.data_to_send():
            self._deliver(data, to_master=True)
        if data := self.master_end.conn.data_to_send():
            self._deliver(data, to_master=False)
        if not self.slave_conn.is_open or not self.master_end.conn.is_open:
            self.close("ended")

    def alive(self) -> bool:
        return self.slave.up and self.master.up and self.world.reachable(self.slave.name, self.master.name)

    def close(self, reason: str) -> None:
        """Both ends learn the connection is over (a cut is seen as a reset)."""
        if self.closed:
            return
        self.closed = True
        now = self.world.now_ms
        self.slave_conn.close(reason)
        self.master_end.conn.close(reason)
        if self.master.up and self.master.link_of(self):
            self.master.on_master_events(self.master_end)
        if self.slave.up and self.slave.link is self:
            self.slave.on_slave_events(self)
            self.slave.link = None
        del now

    def tick(self) -> None:
        if self.closed:
            return
        if not self.alive():
            self.close("cut")
            return
        now = self.world.now_ms
        self.slave_conn.tick(now)
        self.master_end.conn.tick(now)
        self.master.on_master_events(self.master_end)
        self.slave.on_slave_events(self)
        self.pump()


def master_events(broker: Any, end: MasterEnd) -> None:
    """``MasterLink``'s event loop and ``AutoSwitchHAService``'s handlers at the master."""
    conn = end.conn
    now = broker.world.now_ms
    while (event := conn.next_event()) is not None:
        if isinstance(event, HandshakeRequest):
            role = broker.role
            if not role.is_master or event.slave_id == role.broker_id:
                conn.close("not the master")
                continue
            broker.links.register(end, event.slave_id)  # type: ignore[arg-type]
        elif isinstance(event, CaughtUp):
            if broker.links.is_current(end, event.slave_id):  # type: ignore[arg-type]
                broker.keeper.caught_up(event.slave_id, event.at_ms, event.incarnation)
        elif isinstance(event, SlaveAck):
            broker.on_slave_ack(end, event)
        elif isinstance(event, ReadLog):
            conn.supply_batches(
                event.offset, broker.store.read_batches(event.offset, event.batch_bytes, event.max_bytes), now
            )
        elif isinstance(event, ConnectionClosed):
            broker.on_link_closed(end)


def slave_events(broker: Any, link: HaLink) -> None:
    """``HAClient._run_actions`` at the slave: execute the connection's actions in order."""
    conn = link.slave_conn
    store = broker.store
    now = broker.world.now_ms
    while (event := conn.next_event()) is not None:
        if not conn.is_open and not isinstance(event, ConnectionClosed):
            continue
        if isinstance(event, AppendData):
            if event.offset != store.max_offset:
                conn.close(f"append at {event.offset} but the log ends at {store.max_offset}")
                continue
            data = b"".join(bytes(part) for part in event.parts)
            new_max = store.append(data, fsync=broker.fsync_on_write())
            conn.log_appended(new_max, now)
        elif isinstance(event, SetConfirmOffset):
            store.set_stored_confirm_offset(event.offset)
        elif isinstance(event, AppendEpoch):
            store.append_epoch(event.epoch, event.start_offset)
        elif isinstance(event, ResetLog):
            broker.world.note(f"{broker.name}: reset log ({event.reason})")
            store.reset_log(event.reason)
        elif isinstance(event, TruncateTo):
            try:
                if event.offset < store.max_offset:
                    broker.world.note(f"{broker.name}: truncate {store.max_offset} -> {event.offset}")
                store.apply_truncation(event.offset, event.epochs)
            except ValueError as exc:
                conn.truncation_failed(exc)
                continue
            conn.truncation_done(now)
        else:
            assert isinstance(event, ConnectionClosed)
            link.closed = True
            if broker.link is link:
                broker.link = None
                broker.planner_input(broker.planner.on_master_link_closed)
