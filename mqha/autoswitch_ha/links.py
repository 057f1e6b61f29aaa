"""The master's live slave links, one per slave id (shell state; docs/reference-behaviour.md §10.4)."""

from __future__ import annotations

from collections.abc import Iterator

from mqha.autoswitch_ha.master import LogView
from mqha.autoswitch_ha.server import MasterLink


class SlaveLinks:
    """Registers the master's slave links (the newest per slave id wins) and reads their acks."""

    def __init__(self) -> None:
        self._links: set[MasterLink] = set()
        self._by_slave: dict[int, MasterLink] = {}

    def __iter__(self) -> Iterator[MasterLink]:
        return iter(self._links)

    def __bool__(self) -> bool:
        return bool(self._links)

    def register(self, link: MasterLink, slave_id: int) -> None:
        old = self._by_slave.get(slave_id)
        if old is not None and old is not link:
            # A reconnect whose old socket is not dead yet (half-open): the newest connection wins.
            old.close(f"slave {slave_id} reconnected from {link.peer}")
        self._links.add(link)
        self._by_slave[slave_id] = link

    def is_current(self, link: MasterLink, slave_id: int) -> bool:
        """``link`` is the registered link of ``slave_id`` (an older duplicate's events are ignored)."""
        return self._by_slave.get(slave_id) is link

    def remove(self, link: MasterLink) -> int | None:
        """Forget ``link``; the slave id it was the current link of, else None."""
        self._links.discard(link)
        slave_id = link.slave_id
        if slave_id is None or self._by_slave.get(slave_id) is not link:
            return None
        del self._by_slave[slave_id]
        return slave_id

    def acks(self) -> dict[int, int]:
        """Slave id → acked offset, over live connections past the handshake."""
        return {sid: link.conn.ack_offset for sid, link in self._by_slave.items() if link.conn.is_open}

    def incarnations(self) -> dict[int, str]:
        """Slave id → the incarnation its live connection announced (unknown ones left out)."""
        return {
            sid: link.conn.incarnation
            for sid, link in self._by_slave.items()
            if link.conn.is_open and link.conn.incarnation is not None
        }

    def learners(self) -> set[int]:
        """Slave ids whose live connection is an ``asyncLearner``."""
        return {sid for sid, link in self._by_slave.items() if link.conn.is_open and link.conn.async_learner}

    def lowest_transfer_offset(self) -> int | None:
        """The lowest offset a slave is being sent from (its catch-up), over open links past the
        handshake; None when no slave is streaming. Retention keeps what lies above it a while."""
        offsets = [
            link.conn.next_offset for link in self._links if link.conn.is_open and link.conn.next_offset >= 0
        ]
        return min(offsets) if offsets else None

    def update_log(self, view: LogView) -> None:
        for link in self._links:
            link.update_log(view)

    def close_all(self, reason: str) -> None:
        for link in list(self._links):
            link.close(reason)
