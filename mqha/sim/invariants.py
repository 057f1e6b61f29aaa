"""What must hold after every step of a run; the first violation ends it.

- **No acknowledged message lost.** Every acknowledged message stays, at the offset it was
  acknowledged at, on some broker's disk (checked after anything that cuts a log: a truncation, a
  reset, a power loss, a wipe), and at the end, once every fault is healed, on the master.
- **One master per epoch.** Two broker processes never serve as master under the same masterEpoch
  (a process that restarted is another process: it must come back under a new epoch).
- **Monotone epochs.** The committed masterEpoch and SyncStateSet epoch of the set never go back, nor
  does the masterEpoch a broker process serves under.
- **Replicas agree below the confirm offset.** What any replica exposes to readers (below its confirm
  offset: a serving master, or a slave streaming from its master) was never exposed as another message
  at that offset anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqha.errors import MqhaError
from mqha.sim.storage import MESSAGE_SIZE, message_at

if TYPE_CHECKING:
    from mqha.sim.brokers import Broker
    from mqha.sim.controllers import Controllers
    from mqha.sim.world import World


class Violation(MqhaError):
    """An invariant broke; the message says which and how."""


class Checker:
    """Keeps what the invariants need (acknowledged messages, masters by epoch, what readers saw)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.acked: dict[int, int] = {}  # msg id -> offset it was acknowledged at
        self.masters: dict[int, str] = {}  # masterEpoch -> the incarnation that served it
        self.exposed: dict[int, tuple[int, str]] = {}  # offset -> (msg id, by whom) a reader saw
        self._checked: dict[str, tuple[str, int, int]] = {}  # broker -> (incarnation, store.changed, up to)
        self._epochs = (0, 0)
        self._cuts_seen = -1
        self.cuts = 0  # bumped by anything that may cut a log

    def fail(self, text: str) -> None:
        self.world.note(f"VIOLATION: {text}")
        raise Violation(text)

    # -- events ------------------------------------------------------------------------------------

    def on_acked(self, broker: Broker, msg_id: int, offset: int) -> None:
        self.acked[msg_id] = offset
        if message_at(broker.disk.log, offset) != msg_id:
            self.fail(
                f"{broker.label} acknowledged msg {msg_id} at offset {offset}, which its log does not hold"
            )

    def on_master(self, broker: Broker, epoch: int) -> None:
        held = self.masters.setdefault(epoch, broker.label)
        if held != broker.label:
            self.fail(f"two masters in masterEpoch {epoch}: {held} and {broker.label}")
        if epoch < broker.master_epochs_seen:
            self.fail(f"{broker.label} serves masterEpoch {epoch} after {broker.master_epochs_seen}")
        broker.master_epochs_seen = epoch

    # -- after each step ---------------------------------------------------------------------------

    def check(self, controllers: Controllers, brokers: list[Broker]) -> None:
        group = next(iter(controllers.state.groups.values()), None)
        if group is not None:
            epochs = (group.master_epoch, group.sync_state_set_epoch)
            if epochs[0] < self._epochs[0] or epochs[1] < self._epochs[1]:
                self.fail(f"committed epochs went back from {self._epochs} to {epochs}")
            self._epochs = epochs
        for broker in brokers:
            if broker.up:
                self._check_exposed(broker)
        cuts = self.cuts + sum(b.store.changed for b in brokers if b.up)
        if cuts != self._cuts_seen:
            self._cuts_seen = cuts
            self.check_no_loss(brokers)

    def _check_exposed(self, broker: Broker) -> None:
        role, store = broker.role, broker.store
        if role.is_master:
            if role.fenced:
                return
        elif broker.link is None or broker.link.slave_conn.state.value != "TRANSFER":
            return  # a slave not (yet) verified against its master serves no reads
        key = (broker.label, store.changed)
        known = self._checked.get(broker.name)
        start = known[2] if known is not None and known[:2] == key else 0
        # A read fsyncs up to the confirm offset first (docs/architecture.md §7): what was never
        # fsynced was never read.
        end = min(broker.gate.confirm_offset(), store.max_offset, broker.disk.flushed)
        end -= end % MESSAGE_SIZE
        log, exposed = broker.disk.log, self.exposed
        for offset in range(start, end, MESSAGE_SIZE):
            msg = message_at(log, offset)
            seen = exposed.setdefault(offset, (msg, broker.label))  # type: ignore[arg-type]
            if seen[0] != msg:
                self.fail(
                    f"{broker.label} exposes msg {msg} at offset {offset} below its confirm offset {end}, "
                    f"where {seen[1]} exposed msg {seen[0]} before"
                )
        self._checked[broker.name] = (*key, max(start, end))

    def check_no_loss(self, brokers: list[Broker]) -> None:
        logs = [b.disk.log for b in brokers]
        for msg_id, offset in self.acked.items():
            if not any(message_at(log, offset) == msg_id for log in logs):
                self.fail(f"acknowledged msg {msg_id} (offset {offset}) is on no disk")

    def check_final(self, brokers: list[Broker]) -> str | None:
        """Once healed: the serving master holds every acknowledged message (None), or why it cannot
        be checked (no master)."""
        masters = [b for b in brokers if b.up and b.role.is_master and not b.role.fenced]
        if len(masters) != 1:
            return f"{len(masters)} serving masters after the heal"
        log = masters[0].disk.log
        for msg_id, offset in self.acked.items():
            if message_at(log, offset) != msg_id:
                self.fail(
                    f"acknowledged msg {msg_id} (offset {offset}) is not on the final master "
                    f"{masters[0].label}"
                )
        return None
