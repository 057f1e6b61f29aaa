"""Broker liveness: soft state fed by heartbeats, never in the log (docs/reference-behaviour.md §7.1,
docs/architecture.md §11 rule 5).

``HeartbeatTable`` is the per-node table (mutable, owned by the controller service's thread); time
enters only as ``now_ms`` arguments. Decisions never read the table directly: they receive a
``LivenessView`` — normally ``table.view(now_ms)``, a frozen ``LivenessSnapshot`` — so they stay pure
and a test can hand them any liveness it likes.

Deviation (docs/architecture.md §7): the latest report of the broker's current process wins. The reference
only lets epoch/maxOffset move forward and never updates the address, so after a broker truncated
its log (or restarted elsewhere) the controller kept ranking it by progress it no longer has. Here
every heartbeat overwrites the entry. ``session`` (an opaque token of the connection a heartbeat came
on, e.g. the WebSocket) lets the shell drop an entry when a session closes without dropping the entry
a newer process of the same broker has already refreshed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from mqha.controller.state import FrozenMap
from mqha.wire.controller_api import INT32_MAX, BrokerHeartbeatRequest

LiveKey = tuple[str, int]
"""(brokerName, controller broker id): the controller keys everything by broker name
(docs/reference-behaviour.md §1.1)."""


@dataclass(frozen=True)
class BrokerLiveInfo:
    """What the last heartbeat of one replica said, and when it arrived."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = INT32_MAX
    timeout_ms: int = 10_000
    last_seen_ms: int = 0
    session: Hashable | None = field(default=None, compare=False)
    # The start report of the broker process (docs/architecture.md §3.2); None / -1 from older brokers.
    incarnation: str | None = None
    clean_shutdown: bool | None = None
    lossy_recovery: bool | None = None
    confirm_offset_before_recovery: int = -1
    first_seen_master_epoch: int = -1
    """The set's masterEpoch when this node first heard this incarnation: its confirm offset before
    recovery counts in elections only until the set's masterEpoch moves on (an election folded it into
    the replicated watermark, or declared it lost)."""
    reported_ms: int = 0
    """When the heartbeat these offsets came with arrived (``last_seen_ms`` also moves on session pings,
    which carry no offsets)."""
    known_master_epoch: int | None = None
    """The highest masterEpoch the broker knew when it sent them (None: an older broker)."""

    @property
    def lossy(self) -> bool:
        return bool(self.lossy_recovery)

    def is_alive(self, now_ms: int) -> bool:
        """docs/reference-behaviour.md §7.1: alive while ``lastUpdate + timeout >= now``."""
        return self.last_seen_ms + self.timeout_ms >= now_ms

    @property
    def key(self) -> LiveKey:
        return (self.broker_name, self.broker_id)


class LivenessView(Protocol):
    """What decisions may ask about liveness (RocketMQ's BrokerValidPredicate + BrokerLiveInfoGetter)."""

    def is_alive(self, broker_name: str, broker_id: int) -> bool: ...

    def info(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None: ...

    def master_confirm(self, broker_name: str) -> tuple[int, int] | None:
        """(masterEpoch, confirm offset): the highest confirm offset the set's master heartbeated in that
        masterEpoch (soft; docs/architecture.md §3.2)."""
        ...

    def member_incarnation(self, broker_name: str, broker_id: int) -> str | None:
        """The incarnation with which ``broker_id`` joined the set's SyncStateSet (soft; None: unknown)."""
        ...

    def recovery_confirms(self, broker_name: str) -> list[tuple[int, int]]:
        """(masterEpoch first seen in, confirm offset before recovery) of every broker process of the set
        this node heard of, alive or not (soft; docs/architecture.md §3.2)."""
        ...

    def ack_rule(self, broker_name: str) -> AckRule | None:
        """The set's ack rule as its brokers report it (soft; None: not reported)."""
        ...

    @property
    def now_ms(self) -> int:
        """The time of this view."""
        ...


@dataclass(frozen=True)
class AckRule:
    """A broker set's ack rule (``allAckInSyncStateSet``, ``inSyncReplicas``), as its brokers report it."""

    all_ack_in_sync_state_set: bool
    in_sync_replicas: int

    @property
    def by_count(self) -> bool:
        """An acknowledgement needs ``in_sync_replicas`` copies, not every SyncStateSet member's: a member
        need not hold every acknowledged message (docs/architecture.md §3.2)."""
        return not self.all_ack_in_sync_state_set


@dataclass(frozen=True)
class LivenessSnapshot:
    """A frozen copy of the heartbeat table at ``now_ms``; implements ``LivenessView``."""

    now_ms: int
    entries: Mapping[LiveKey, BrokerLiveInfo] = field(default_factory=FrozenMap)
    master_confirms: Mapping[str, tuple[int, int]] = field(default_factory=FrozenMap)
    member_incarnations: Mapping[LiveKey, str] = field(default_factory=FrozenMap)
    recoveries: Mapping[LiveKey, tuple[int, int]] = field(default_factory=FrozenMap)
    ack_rules: Mapping[str, AckRule] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        if not isinstance(self.entries, FrozenMap):
            object.__setattr__(self, "entries", FrozenMap(self.entries))
        if not isinstance(self.master_confirms, FrozenMap):
            object.__setattr__(self, "master_confirms", FrozenMap(self.master_confirms))
        if not isinstance(self.member_incarnations, FrozenMap):
            object.__setattr__(self, "member_incarnations", FrozenMap(self.member_incarnations))
        if not isinstance(self.recoveries, FrozenMap):
            object.__setattr__(self, "recoveries", FrozenMap(self.recoveries))
        if not isinstance(self.ack_rules, FrozenMap):
            object.__setattr__(self, "ack_rules", FrozenMap(self.ack_rules))

    def ack_rule(self, broker_name: str) -> AckRule | None:
        return self.ack_rules.get(broker_name)

    def master_confirm(self, broker_name: str) -> tuple[int, int] | None:
        return self.master_confirms.get(broker_name)

    def member_incarnation(self, broker_name: str, broker_id: int) -> str | None:
        return self.member_incarnations.get((broker_name, broker_id))

    def recovery_confirms(self, broker_name: str) -> list[tuple[int, int]]:
        return [value for key, value in sorted(self.recoveries.items()) if key[0] == broker_name]

    @classmethod
    def of(cls, now_ms: int, infos: list[BrokerLiveInfo] | tuple[BrokerLiveInfo, ...]) -> LivenessSnapshot:
        return cls(now_ms, {info.key: info for info in infos})

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        info = self.entries.get((broker_name, broker_id))
        return info is not None and info.is_alive(self.now_ms)

    def info(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.entries.get((broker_name, broker_id))


class HeartbeatTable:
    """Heartbeats of every replica this node has heard from (one table per controller node)."""

    def __init__(self) -> None:
        self._entries: dict[LiveKey, BrokerLiveInfo] = {}
        self._master_confirms: dict[str, tuple[int, int]] = {}
        self._member_incarnations: dict[LiveKey, str] = {}  # the incarnation each member joined with
        self._acking_masters: dict[str, int] = {}  # brokerName -> masterEpoch whose master acks
        # -> (incarnation, masterEpoch first seen in, confirm offset before recovery)
        self._first_seen: dict[LiveKey, tuple[str | None, int, int]] = {}
        self._ack_rules: dict[str, AckRule] = {}  # brokerName -> the rule its master (else anyone) reports

    def __len__(self) -> int:
        return len(self._entries)

    def record(
        self,
        now_ms: int,
        heartbeat: BrokerHeartbeatRequest,
        session: Hashable | None = None,
        master_epoch: int = -1,
        from_master: bool = False,
    ) -> BrokerLiveInfo:
        """Store a heartbeat; the latest report wins (deviation, see module docstring).

        ``master_epoch`` is the set's current masterEpoch: kept as ``first_seen_master_epoch`` while the
        heartbeats come from the same incarnation. The set's ack rule is the one its master reports (a
        replica's until the master has reported one); it outlives the entries, for the election after
        the master's death.
        """
        if heartbeat.all_ack_in_sync_state_set is not None and (
            from_master or heartbeat.broker_name not in self._ack_rules
        ):
            self._ack_rules[heartbeat.broker_name] = AckRule(
                heartbeat.all_ack_in_sync_state_set, heartbeat.in_sync_replicas or 1
            )
        key = (heartbeat.broker_name, heartbeat.broker_id)
        # Remembered beyond the entry (an expiry or a closed session drops it): a process that comes
        # back on a new session is the same incarnation, first seen when it was first seen.
        known = self._first_seen.get(key)  # type: ignore[arg-type]
        if known is not None and known[0] == heartbeat.incarnation:
            first_seen = known[1]
        else:
            first_seen = master_epoch
            before = heartbeat.confirm_offset_before_recovery
            self._first_seen[key] = (  # type: ignore[index]
                heartbeat.incarnation,
                master_epoch,
                -1 if before is None else before,
            )
        info = BrokerLiveInfo(
            cluster_name=heartbeat.cluster_name,
            broker_name=heartbeat.broker_name,
            broker_id=heartbeat.broker_id,
            broker_addr=heartbeat.broker_addr,
            epoch=heartbeat.epoch,
            max_offset=heartbeat.max_offset,
            confirm_offset=heartbeat.confirm_offset,
            election_priority=heartbeat.election_priority,
            timeout_ms=heartbeat.heartbeat_timeout_mills,
            last_seen_ms=now_ms,
            session=session,
            incarnation=heartbeat.incarnation,
            clean_shutdown=heartbeat.clean_shutdown,
            lossy_recovery=heartbeat.lossy_recovery,
            confirm_offset_before_recovery=(
                -1
                if heartbeat.confirm_offset_before_recovery is None
                else heartbeat.confirm_offset_before_recovery
            ),
            first_seen_master_epoch=first_seen,
            reported_ms=now_ms,
            known_master_epoch=heartbeat.known_master_epoch,
        )
        self._entries[info.key] = info
        return info

    def mark_acking_master(self, broker_name: str, master_epoch: int) -> None:
        """The master of ``master_epoch`` reports ack points (``confirmOffset`` on AlterSyncStateSet): from
        now on its heartbeats' confirm offsets, which such a master fills with its ack point, are noted
        (docs/architecture.md §3.2)."""
        self._acking_masters[broker_name] = max(master_epoch, self._acking_masters.get(broker_name, -1))

    def note_master_confirm(self, broker_name: str, master_epoch: int, confirm_offset: int) -> None:
        """The set's master (at ``master_epoch``) heartbeated ``confirm_offset``: keep the highest of the
        epoch, if that master's confirm offset is an ack point (``mark_acking_master``; otherwise it is
        only its log end and says nothing about acknowledgements). Outlives the master's entry: an
        election after its death still knows what it confirmed."""
        if self._acking_masters.get(broker_name) != master_epoch:
            return
        known = self._master_confirms.get(broker_name)
        if known is None or known[0] != master_epoch or known[1] < confirm_offset:
            if known is not None and known[0] > master_epoch:
                return  # a late heartbeat of an older master
            self._master_confirms[broker_name] = (master_epoch, confirm_offset)

    def master_confirm(self, broker_name: str) -> tuple[int, int] | None:
        return self._master_confirms.get(broker_name)

    def note_members(self, broker_name: str, incarnations: Mapping[int, str | None]) -> None:
        """The SyncStateSet of ``broker_name`` is now these members, joined with these incarnations (a
        member whose incarnation is None, or unknown here, is forgotten: it is judged by its offsets)."""
        for key in [key for key in self._member_incarnations if key[0] == broker_name]:
            if key[1] not in incarnations:
                del self._member_incarnations[key]
        for broker_id, incarnation in incarnations.items():
            if incarnation is None:
                self._member_incarnations.pop((broker_name, broker_id), None)
            else:
                self._member_incarnations[(broker_name, broker_id)] = incarnation

    def member_incarnation(self, broker_name: str, broker_id: int) -> str | None:
        return self._member_incarnations.get((broker_name, broker_id))

    def touch(self, now_ms: int, broker_name: str, broker_id: int) -> bool:
        """Refresh ``last_seen`` only (e.g. a session ping); False when the broker is unknown."""
        info = self._entries.get((broker_name, broker_id))
        if info is None:
            return False
        self._entries[info.key] = replace(info, last_seen_ms=now_ms)
        return True

    def is_alive(self, now_ms: int, broker_name: str, broker_id: int) -> bool:
        info = self._entries.get((broker_name, broker_id))
        return info is not None and info.is_alive(now_ms)

    def info(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self._entries.get((broker_name, broker_id))

    def expired(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Entries past their timeout (``now - lastUpdate > timeout``), sorted by key; not removed."""
        return [info for key, info in sorted(self._entries.items()) if not info.is_alive(now_ms)]

    def pop_expired(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Remove and return the expired entries (the docs/reference-behaviour.md §7.1 scan)."""
        gone = self.expired(now_ms)
        for info in gone:
            del self._entries[info.key]
        return gone

    def remove(
        self, broker_name: str, broker_id: int, session: Hashable | None = None
    ) -> BrokerLiveInfo | None:
        """Forget a replica (its channel closed). With ``session``, only if the entry came from it."""
        info = self._entries.get((broker_name, broker_id))
        if info is None or (session is not None and info.session != session):
            return None
        del self._entries[info.key]
        return info

    def remove_session(
        self, session: Hashable, moved: Mapping[LiveKey, Hashable] | None = None
    ) -> list[BrokerLiveInfo]:
        """Forget every replica whose latest heartbeat came on ``session`` (a closed connection), but
        those ``moved`` names: another open session of the same process carries them on."""
        moved = moved or {}
        gone = []
        for key, info in sorted(self._entries.items()):
            if info.session != session:
                continue
            if key in moved:
                self._entries[key] = replace(info, session=moved[key])
            else:
                gone.append(info)
                del self._entries[key]
        return gone

    def remove_group(self, broker_name: str) -> None:
        """Forget a whole broker set (after its metadata was cleaned)."""
        for key in [key for key in self._entries if key[0] == broker_name]:
            del self._entries[key]
        self._master_confirms.pop(broker_name, None)
        self._acking_masters.pop(broker_name, None)
        self._ack_rules.pop(broker_name, None)
        self.note_members(broker_name, {})
        for key in [key for key in self._first_seen if key[0] == broker_name]:
            del self._first_seen[key]

    def entries(self) -> list[BrokerLiveInfo]:
        return [info for _, info in sorted(self._entries.items())]

    def view(self, now_ms: int) -> LivenessSnapshot:
        """A frozen view for one decision."""
        return LivenessSnapshot(
            now_ms,
            FrozenMap(self._entries),
            FrozenMap(self._master_confirms),
            FrozenMap(self._member_incarnations),
            FrozenMap({key: (known[1], known[2]) for key, known in self._first_seen.items()}),
            FrozenMap(self._ack_rules),
        )
